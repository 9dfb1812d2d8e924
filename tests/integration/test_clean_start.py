"""A normal start prints no ERROR line and no weight-loading bar (``hindsight up`` and ``demo``).

Fresh topics and a fresh app id each time, so the start is a first start: topic creation, the
stages' first rebalance (Faust creates its assignor topic then) and the first model load all
happen inside the test. Output and the worker's log are both checked.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import orjson
import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ERROR_LINE = re.compile(r"\b(ERROR|CRITICAL|Traceback)\b")
NOISE = ("Loading weights",)


def _env(prefix: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"KAFKA_BOOTSTRAP", "HINDSIGHT_BOOTSTRAP", "HINDSIGHT_TOPIC_PREFIX"}
    }
    return {
        **env,
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HINDSIGHT_API_PORT": "0",
        "HINDSIGHT_APP_ID": f"hindsight-clean-{prefix}",
    }


def _problems(text: str) -> list[str]:
    return [
        line
        for line in text.splitlines()
        if ERROR_LINE.search(line) or any(noise in line for noise in NOISE)
    ]


def _logs(data_dir: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(data_dir.glob("logs/*.log")))


async def test_up_starts_and_stops_without_error_lines(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    prefix = f"cs{uuid.uuid4().hex[:8]}."
    process = subprocess.Popen(
        [
            sys.executable, "-m", "pipeline.interfaces.cli", "up",
            "--data-dir", str(tmp_path), "--bootstrap", kafka_bootstrap,
            "--topic-prefix", prefix, "--partitions", "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env=_env(prefix),
    )  # fmt: skip
    stack_file = tmp_path / "stack.json"
    try:
        deadline = time.monotonic() + 240
        while not stack_file.exists():
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            assert time.monotonic() < deadline, "stack.json never appeared"
            await asyncio.sleep(0.5)
        stack = orjson.loads(stack_file.read_bytes())
        bearer = {"Authorization": f"Bearer {stack['api_key']}"}
        async with httpx.AsyncClient(base_url=stack["api"], timeout=30, headers=bearer) as http:
            ready = await http.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert (await http.get("/ui")).status_code == 200
            assert "hindsight_ready 1.0" in (await http.get("/metrics")).text
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(90)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    output = process.stdout.read() if process.stdout else ""
    assert code == 0, output
    assert "dashboard" in output and "stopped cleanly" in output
    assert _problems(output) == [], output
    assert _problems(_logs(tmp_path)) == []


def test_demo_runs_without_error_lines(kafka_bootstrap: str, tmp_path: Path) -> None:
    prefix = f"cd{uuid.uuid4().hex[:8]}."
    result = subprocess.run(
        [
            sys.executable, "-m", "pipeline.interfaces.cli", "demo",
            "--data-dir", str(tmp_path), "--bootstrap", kafka_bootstrap,
            "--topic-prefix", prefix, "--partitions", "2",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(prefix),
        timeout=420,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "memories from" in result.stdout and "stack stopped cleanly" in result.stdout
    assert _problems(output) == [], output
    assert _problems(_logs(tmp_path)) == []
