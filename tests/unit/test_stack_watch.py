"""``stack.stopped_if_it_exits``: a stack whose worker process dies stops its body at once with
the exit code and the log tail, instead of letting every wait on the views run into its timeout.
Real child processes stand in for the worker; they only have to live and die."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from pipeline.runtime.stack import WorkerExited, stopped_if_it_exits


class Child:
    """A child process with the three things the watch reads."""

    def __init__(self, code: str) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", code])

    def alive(self) -> bool:
        return self.process.poll() is None

    def exit_code(self) -> int | None:
        return self.process.poll()

    def log_tail(self, lines: int = 30) -> str:
        return "boom: the last line of the worker's log"

    def stop(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait(10)


async def test_a_worker_that_exits_stops_the_body_naming_its_code_and_log() -> None:
    child = Child("import sys; sys.exit(3)")
    never = asyncio.Event()
    try:
        with pytest.raises(WorkerExited) as raised:
            async with asyncio.timeout(60):  # a bound for the test only; the exit ends it first
                async with stopped_if_it_exits(child, poll_seconds=0.02):
                    await never.wait()
    finally:
        child.stop()
    assert "code 3" in str(raised.value)
    assert "boom: the last line" in str(raised.value)
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_body_that_ends_while_the_worker_lives_is_left_alone() -> None:
    child = Child("import time; time.sleep(60)")
    try:
        async with stopped_if_it_exits(child, poll_seconds=0.02):
            await asyncio.sleep(0.1)
        assert child.alive()
        with pytest.raises(ValueError, match="the body's own"):
            async with stopped_if_it_exits(child, poll_seconds=0.02):
                raise ValueError("the body's own error")
    finally:
        child.stop()
    # Once the context is left, the worker's end cancels nothing.
    await asyncio.sleep(0.1)
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_cancellation_from_outside_stays_a_cancellation() -> None:
    child = Child("import time; time.sleep(60)")
    started = asyncio.Event()

    async def body() -> None:
        async with stopped_if_it_exits(child, poll_seconds=0.02):
            started.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(body())
    try:
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        child.stop()
