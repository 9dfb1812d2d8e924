"""The TypeScript and Java clients' own test suites, run against a real ``hindsight up``.

One stack per module: ``hindsight up`` as a subprocess on the session broker, found through
``<data-dir>/stack.json`` (``api``, and ``api_key`` once the API requires one). Each suite gets
``HINDSIGHT_URL``/``HINDSIGHT_API_KEY`` and must exit 0; its output is shown when it does not.
Without node/npm or java/mvn the tests skip locally and fail under ``CI=true``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ROOT / "clients"
# The CLI's module; moves to pipeline.interfaces.cli with the layout change.
CLI_MODULE = "pipeline.interfaces.cli"
STACK_START_SECONDS = 240.0
STACK_STOP_SECONDS = 90.0
NPM_TEST_SECONDS = 600.0
MVN_TEST_SECONDS = 1200.0  # the first run also resolves Spring AI and friends into ~/.m2


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def _require_tools(*tools: str) -> None:
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if not missing:
        return
    message = f"the client tests need {', '.join(missing)} on PATH"
    if _in_ci():
        pytest.fail(message)
    pytest.skip(message)


def _stack_env(**extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        # The stack gets its broker and topics from the command line, not the environment.
        if key not in {"KAFKA_BOOTSTRAP", "HINDSIGHT_BOOTSTRAP", "HINDSIGHT_TOPIC_PREFIX"}
    }
    return {**env, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **extra}


def _tail(path: Path, lines: int = 60) -> str:
    if not path.exists():
        return "(no output)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture(scope="module")
def stack(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """A running ``hindsight up`` on the session broker; yields its ``stack.json``."""
    data_dir = tmp_path_factory.mktemp("clients-stack")
    stack_file = data_dir / "stack.json"
    log_path = data_dir / "up.log"
    prefix = f"cl{uuid.uuid4().hex[:8]}."
    with log_path.open("wb") as log:  # a file, not a pipe: nobody reads it while the stack runs
        process = subprocess.Popen(
            [
                sys.executable, "-m", CLI_MODULE, "up",
                "--data-dir", str(data_dir),
                "--bootstrap", kafka_bootstrap,
                "--topic-prefix", prefix,
                "--partitions", "2",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            env=_stack_env(HINDSIGHT_API_PORT="0", HINDSIGHT_APP_ID=f"hindsight-clients-{prefix}"),
        )  # fmt: skip
    try:
        deadline = time.monotonic() + STACK_START_SECONDS
        while not stack_file.exists():
            if process.poll() is not None:
                pytest.fail(f"hindsight up exited with {process.returncode}:\n{_tail(log_path)}")
            if time.monotonic() > deadline:
                waited = f"stack.json did not appear in {STACK_START_SECONDS:g}s"
                pytest.fail(f"{waited}:\n{_tail(log_path)}")
            time.sleep(0.2)  # polling a file's existence; the deadline bounds the loop
        yield orjson.loads(stack_file.read_bytes())
    finally:
        process.send_signal(signal.SIGINT)
        try:
            code = process.wait(STACK_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STACK_STOP_SECONDS)
            raise
        assert code == 0, f"hindsight up stopped with {code}:\n{_tail(log_path)}"


def _client_env(stack: dict[str, str]) -> dict[str, str]:
    return {
        **os.environ,
        "HINDSIGHT_URL": stack["api"],
        # Present once the API requires a key (hindsight up writes the admin key there).
        "HINDSIGHT_API_KEY": str(stack.get("api_key") or ""),
    }


def _run(command: list[str], cwd: Path, env: dict[str, str], timeout: float) -> None:
    try:
        result = subprocess.run(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as expired:
        # TimeoutExpired carries bytes even in text mode.
        output = "\n".join(
            part.decode(errors="replace") if isinstance(part, bytes) else part or ""
            for part in (expired.stdout, expired.stderr)
        )
        pytest.fail(f"{' '.join(command)} took over {timeout:g}s:\n{output}")
    assert result.returncode == 0, (
        f"{' '.join(command)} in {cwd} exited {result.returncode}\n"
        f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"
    )


@pytest.fixture(scope="module")
def installed() -> None:
    """``ensure_clients`` (clients/ensure.sh): npm ci when the lock changed, else nothing."""
    _require_tools("bash", "node", "npm", "java", "mvn")
    _run(
        ["bash", "-c", "source clients/ensure.sh && ensure_clients"],
        cwd=ROOT,
        env=dict(os.environ),
        timeout=NPM_TEST_SECONDS,
    )


def test_typescript_client_suite(installed: None, stack: dict[str, str]) -> None:
    _run(["npm", "test"], CLIENTS / "typescript", _client_env(stack), NPM_TEST_SECONDS)


def test_java_client_suite(installed: None, stack: dict[str, str]) -> None:
    _run(["mvn", "-q", "-B", "test"], CLIENTS / "java", _client_env(stack), MVN_TEST_SECONDS)
