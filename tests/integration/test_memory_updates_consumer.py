"""The change-feed example (examples/memory_updates_consumer.py) against the real stack."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from pipeline.interfaces.client import Hindsight
from pipeline.runtime.settings import Settings
from schemas.memory import MemoryChanged

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "memory_updates_consumer.py"


async def _run_example(settings: Settings, *args: str) -> list[str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE),
        "--bootstrap",
        settings.bootstrap or "",
        "--topic-prefix",
        settings.topic_prefix,
        "--data-dir",  # its master key opens the sealed entries
        str(settings.data_dir),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ},
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, stderr.decode()
    return stdout.decode().splitlines()


async def test_example_prints_each_change_and_stops_after_max(
    client: Hindsight, stack_settings: Settings, namespace: str
) -> None:
    first = await client.retain(namespace, "The release train leaves every Thursday.")
    second = await client.retain(namespace, "Actually we use Rust for the ingest service now.")
    await client.wait_applied(second)

    lines = await _run_example(
        stack_settings, "--namespace", namespace, "--from-beginning", "--max", "2"
    )
    changes = [MemoryChanged.model_validate_json(line) for line in lines]
    assert len(changes) == 2
    assert [c.change for c in changes] == ["created", "created"]
    assert {c.namespace for c in changes} == {namespace}
    # Per-namespace order is log order: the first turn's memory comes first.
    assert changes[0].cause_event_id == first.event_id
    assert changes[1].cause_event_id == second.event_id

    text = await _run_example(
        stack_settings, "--namespace", namespace, "--from-beginning", "--max", "1",
        "--format", "text",
    )  # fmt: skip
    assert len(text) == 1 and "created" in text[0] and "release train" in text[0]
