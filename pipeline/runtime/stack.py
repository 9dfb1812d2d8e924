"""Start and stop the embedded default stack: local KRaft broker, topics, worker process.

The worker runs as its own process (as it would in production, and so a test can kill it); the
embedded broker is the same Kafka that a cluster runs, on loopback (I9). A worker with the sink
over a Milvus Lite file gets a Milvus Lite server process beside it (``infra/milvus_lite.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from infra.milvus_lite import LocalMilvusLite
from pipeline.runtime.settings import Settings
from pipeline.views.milvus_uri import is_lite_uri
from pipeline.views.state_topic import StateFollower, make_producer
from schemas.codec import encode
from schemas.errors import HindsightError
from schemas.events import CommandIssued
from topics.admin import ensure_topics
from topics.catalogue import topic_names

log = logging.getLogger("hindsight.stack")

PROBE_NAMESPACE = "hindsight-probe"


class WorkerExited(HindsightError):
    """The stack's worker process ended while the stack was up."""


class WatchedProcess(Protocol):
    def alive(self) -> bool: ...

    def exit_code(self) -> int | None: ...

    def log_tail(self, lines: int = 30) -> str: ...


class WorkerProcess:
    """A ``hindsight worker`` subprocess (some or all stages) with its log under the data dir."""

    def __init__(
        self,
        settings: Settings,
        log_name: str = "worker.log",
        stages: tuple[str, ...] = ("prepare", "consolidate", "sink"),
        milvus_uri: str | None = None,
        serve_milvus: bool = True,
    ) -> None:
        self.settings = settings
        self.stages = stages
        self.milvus_uri = milvus_uri or settings.milvus_path
        self.log_path = Path(settings.data_dir) / "logs" / log_name
        self.process: subprocess.Popen[bytes] | None = None
        # A sink over a Milvus Lite file talks to a Milvus Lite server process of its own
        # (infra/milvus_lite.py): the engine then does not live in, nor count against, the worker.
        self.milvus_server: LocalMilvusLite | None = None
        if serve_milvus and "sink" in stages and is_lite_uri(self.milvus_uri):
            self.milvus_server = LocalMilvusLite(
                Path(self.milvus_uri), Path(settings.data_dir) / "logs" / "milvus-lite-server.log"
            )

    def _milvus_target(self) -> str:
        return self.milvus_server.uri if self.milvus_server is not None else self.milvus_uri

    def command(self) -> list[str]:
        s = self.settings
        return [
            sys.executable,
            "-m",
            "pipeline.interfaces.cli",
            "worker",
            "--stages",
            ",".join(self.stages),
            "--bootstrap",
            s.bootstrap or "",
            "--milvus",
            self._milvus_target(),
            "--data-dir",
            str(s.data_dir),
            "--topic-prefix",
            s.topic_prefix,
            "--partitions",
            str(s.partitions),
            "--app-id",
            s.app_id,
            "--encoder",
            s.encoder,
        ]

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.milvus_server is not None:
            self.milvus_server.start()  # kept across restarts of this worker
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            **self.settings.kafka.env(),  # the same credentials for the stage process
        }
        with self.log_path.open("ab") as log_file:
            self.process = subprocess.Popen(
                self.command(),
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def exit_code(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the worker (SIGKILL after ``timeout``), then stop its Milvus Lite server."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._kill_worker()
        self._stop_milvus()

    def kill(self) -> None:
        """SIGKILL the worker (a crash); its Milvus Lite server is stopped, so the file is free."""
        self._kill_worker()
        self._stop_milvus()

    def _kill_worker(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def _stop_milvus(self) -> None:
        if self.milvus_server is not None:
            self.milvus_server.stop()


async def wait_worker_ready(
    settings: Settings, worker: WorkerProcess | None, timeout: float = 180.0
) -> None:
    """Ready means applied: publish a tick and wait until the views report its offset."""
    names = topic_names(settings.topic_prefix)
    follower = StateFollower(
        settings.bootstrap or "",
        names["memory_state"],
        lambda _r: None,
        lambda _k: None,
        security=settings.kafka,
    )
    await follower.start()
    producer = make_producer(settings.bootstrap or "", "hindsight-stack-probe", settings.kafka)
    await producer.start()
    try:
        from datetime import UTC, datetime

        tick = CommandIssued(
            event_id=f"probe-{time.time_ns()}",
            namespace=PROBE_NAMESPACE,
            event_time=datetime(2000, 1, 1, tzinfo=UTC),
            command="tick",
        )
        meta = await producer.send_and_wait(
            names["events"], key=PROBE_NAMESPACE.encode(), value=encode(tick)
        )
        deadline = time.monotonic() + timeout
        while True:
            if worker is not None and not worker.alive():
                raise HindsightError(
                    f"worker exited during start-up; log tail:\n{worker.log_tail()}"
                )
            try:
                await follower.wait_for(names["events"], meta.partition, meta.offset, 2.0)
                return
            except HindsightError:
                if time.monotonic() > deadline:
                    tail = worker.log_tail() if worker else ""
                    raise HindsightError(
                        f"worker not ready after {timeout}s; log tail:\n{tail}"
                    ) from None
    finally:
        await producer.stop()
        await follower.stop()


@asynccontextmanager
async def stopped_if_it_exits(
    worker: WatchedProcess, poll_seconds: float = 1.0
) -> AsyncIterator[None]:
    """Cancel the body when ``worker`` exits under it, and raise ``WorkerExited`` with its exit
    code and log tail. Without this, every wait on the views runs into its own timeout: 30 s per
    step, hours for the 528 scenarios of the generalisation suite. The body must run in the task
    that entered this context (the demo, ``up``, the scenario and LoCoMo runners all do)."""
    body = asyncio.current_task()
    if body is None:
        raise RuntimeError("stopped_if_it_exits needs a running task")

    async def watch() -> int | None:
        while worker.alive():  # ends when the worker does, or is cancelled with the context
            await asyncio.sleep(poll_seconds)
        body.cancel()
        return worker.exit_code()

    watcher = asyncio.create_task(watch(), name="hindsight-worker-watch")
    try:
        yield
    except asyncio.CancelledError:
        # The watch has returned by the time its cancellation reaches the body.
        exited = watcher.done() and not watcher.cancelled()
        if exited and body.uncancel() == 0:
            raise WorkerExited(
                f"the worker exited (code {watcher.result()}) while the stack was up; "
                f"log tail:\n{worker.log_tail()}"
            ) from None
        raise
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


@asynccontextmanager
async def running_stack(
    settings: Settings, *, start_worker: bool = True
) -> AsyncIterator[Settings]:
    """Yield settings pointing at a running broker (embedded unless given) and worker."""
    from infra.broker import LocalKafka

    broker: LocalKafka | None = None
    worker: WorkerProcess | None = None
    data_dir = Path(settings.data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    live = replace(settings, data_dir=data_dir)
    try:
        if not settings.bootstrap:
            broker = LocalKafka(data_dir / "kafka")
            await asyncio.get_running_loop().run_in_executor(None, broker.start)
            live = replace(live, bootstrap=broker.bootstrap)
            log.info("embedded Kafka on %s", broker.bootstrap)
        await ensure_topics(
            live.bootstrap or "", live.topic_prefix, live.partitions, live.replication_factor
        )
        if start_worker:
            worker = WorkerProcess(live)
            worker.start()
            await wait_worker_ready(live, worker)
            async with stopped_if_it_exits(worker):
                yield live
        else:
            yield live
    finally:
        if worker is not None:
            await asyncio.get_running_loop().run_in_executor(None, worker.stop)
        if broker is not None:
            await asyncio.get_running_loop().run_in_executor(None, broker.stop)
