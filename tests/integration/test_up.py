"""``hindsight up`` as a subprocess on the session broker, driven by the CLI through stack.json."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import orjson
import pytest
from aiokafka import AIOKafkaConsumer

from schemas.codec import decode_event
from schemas.events import CommandIssued
from topics.catalogue import topic_names

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _env(**extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        # stack.json must be what the CLI reads, not a broker from the environment
        if key not in {"KAFKA_BOOTSTRAP", "HINDSIGHT_BOOTSTRAP", "HINDSIGHT_TOPIC_PREFIX"}
    }
    return {**env, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **extra}


def _cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.interfaces.cli", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(),
        timeout=180,
    )
    assert result.returncode == 0, f"{args}: {result.stdout}\n{result.stderr}"
    return result


async def _ticks_for(bootstrap: str, prefix: str, namespace: str, timeout: float) -> list[str]:
    consumer = AIOKafkaConsumer(
        topic_names(prefix)["events"],
        bootstrap_servers=bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    found: list[str] = []
    try:
        deadline = time.monotonic() + timeout
        while not found and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for messages in batches.values():
                for message in messages:
                    event = decode_event(message.value)
                    if isinstance(event, CommandIssued) and event.namespace == namespace:
                        found.append(event.command)
    finally:
        await consumer.stop()
    return found


async def test_up_serves_the_cli_and_stops_cleanly(
    kafka_bootstrap: str, tmp_path: Path, namespace: str
) -> None:
    prefix = f"up{uuid.uuid4().hex[:8]}."
    stack_file = tmp_path / "stack.json"
    process = subprocess.Popen(
        [
            sys.executable, "-m", "pipeline.interfaces.cli", "up",
            "--data-dir", str(tmp_path),
            "--bootstrap", kafka_bootstrap,
            "--topic-prefix", prefix,
            "--partitions", "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        # Port 0: any free port (written to stack.json); a fast ticker so the test sees a tick.
        env=_env(
            HINDSIGHT_API_PORT="0",
            HINDSIGHT_TICK_SECONDS="1",
            HINDSIGHT_APP_ID=f"hindsight-up-{prefix}",
        ),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not stack_file.exists():
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            assert time.monotonic() < deadline, "stack.json never appeared"
            await asyncio.sleep(0.5)
        stack = orjson.loads(stack_file.read_bytes())
        assert stack["bootstrap"] == kafka_bootstrap and stack["topic_prefix"] == prefix
        assert stack["api"].startswith("http://127.0.0.1:")
        # Auth is on by default: the local admin key is in the stack file, owner-only.
        assert stack["auth"] is True and stack["api_key"].startswith("hs_")
        assert stat.S_IMODE(stack_file.stat().st_mode) == 0o600
        assert stat.S_IMODE((tmp_path / "admin.key").stat().st_mode) == 0o600

        retained = _cli(
            tmp_path, "retain", namespace, "Our CI runs on Buildkite agents.", "--wait", "--json"
        )
        receipt = json.loads(retained.stdout)
        recalled = _cli(
            tmp_path, "recall", namespace, "Where does CI run?", "--json",
            "--wait-for", str(receipt["offset"]),
        )  # fmt: skip
        memories = json.loads(recalled.stdout)["memories"]
        assert any("Buildkite" in m["content"] for m in memories), recalled.stdout
        stats = _cli(tmp_path, "stats", namespace, "--json")
        assert json.loads(stats.stdout)["memories"] >= 1

        async with httpx.AsyncClient(base_url=stack["api"], timeout=30) as http:
            health = await http.get("/healthz")
            assert health.status_code == 200, health.text
            path = f"/v1/namespaces/{namespace}/stats"
            assert (await http.get(path)).status_code == 401
            bearer = {"Authorization": f"Bearer {stack['api_key']}"}
            assert (await http.get(path, headers=bearer)).status_code == 200

        # The ticker published a tick for the namespace that just had a turn.
        assert "tick" in await _ticks_for(kafka_bootstrap, prefix, namespace, timeout=30)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(90)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    output = process.stdout.read() if process.stdout else ""
    assert code == 0, output
    assert "stopped cleanly" in output
    assert not stack_file.exists()


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10"])
def test_up_refuses_a_non_loopback_address_without_auth(tmp_path: Path, host: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.interfaces.cli", "up", "--no-auth",
         "--data-dir", str(tmp_path), "--bootstrap", "127.0.0.1:1"],
        capture_output=True, text=True, cwd=ROOT, env=_env(HINDSIGHT_API_HOST=host), timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "refusing to listen on" in result.stderr and "loopback" in result.stderr
    assert not (tmp_path / "stack.json").exists()
