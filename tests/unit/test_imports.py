"""Every module imports first, in a fresh interpreter.

A stage process imports only its own entry point, so an import cycle that a test run never hits
(the modules already loaded by an earlier test) kills a worker at start: a consolidate-only
worker once died on slots → extraction → recall → scoring → slots."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import pipeline
import schemas
import topics

ROOT = Path(__file__).resolve().parents[2]


def _modules() -> list[str]:
    names: list[str] = []
    for package in (pipeline, schemas, topics):
        prefix = package.__name__ + "."
        names += [info.name for info in pkgutil.walk_packages(package.__path__, prefix)]
    return sorted(names)


def test_every_module_imports_first_in_a_fresh_interpreter() -> None:
    modules = _modules()
    assert "pipeline.memory.bank" in modules and "pipeline.recall.scoring" in modules
    # Each module in an interpreter of its own (about 40 s for all of them), driven from one
    # child that reports the ones that fail, with the last line of their error.
    script = (
        "import subprocess, sys\n"
        "failed = []\n"
        "for name in sys.argv[1:]:\n"
        "    done = subprocess.run([sys.executable, '-c', f'import {name}'],"
        " capture_output=True, text=True)\n"
        "    if done.returncode:\n"
        "        failed.append(name + ': ' + done.stderr.strip().splitlines()[-1])\n"
        "print('\\n'.join(failed))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, *modules],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        check=True,
    )
    assert result.stdout.strip() == ""
