"""Run Milvus Lite's gRPC server as its own process on loopback, beside the embedded broker.

Milvus Lite 3 is a Python engine that runs inside whichever process opens its data directory:
opened by the sink, its memtables, Arrow segments, faiss index and gRPC threads count against the
worker (~265 MB of the worker's peak on LoCoMo dev, docs/BENCHMARKS.md "Ingest"). Served from a
process of its own, it is a store like the broker, and the worker talks to it over
``http://127.0.0.1:<port>`` exactly as it talks to a Milvus server (I9: one adapter, both paths).

The data directory is the same path the worker would have opened in-process, so the files are
the same either way: a tool that opens the ``.db`` path after the server stopped sees every row.
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path

from infra.broker import accepts_tcp, free_port, tail_file
from schemas.errors import HindsightError

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0


class MilvusLiteServerError(HindsightError):
    """The Milvus Lite server did not start (its log tail says why)."""


class LocalMilvusLite:
    """``python -m milvus_lite server`` over one data directory, logging beside it."""

    def __init__(self, data_dir: Path, log_path: Path | None = None) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.log_path = log_path or self.data_dir.parent / "milvus-lite-server.log"
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        if self.port is None:
            raise MilvusLiteServerError("the Milvus Lite server has not been started")
        return f"http://127.0.0.1:{self.port}"

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, timeout_s: float = START_TIMEOUT_S) -> str:
        """Start the server (or keep the running one) and return its URI once it accepts."""
        if self.running():
            return self.uri
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        command = [
            sys.executable,
            "-m",
            "milvus_lite",
            "server",
            "--data-dir",
            str(self.data_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        with self.log_path.open("ab") as log_file:
            self.process = subprocess.Popen(
                command, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
            )
        atexit.register(self.stop)  # never leave an orphan server holding the data directory
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise MilvusLiteServerError(
                    f"Milvus Lite server on {self.data_dir} exited with "
                    f"{self.process.returncode}:\n{tail_file(self.log_path)}"
                )
            if accepts_tcp(f"127.0.0.1:{self.port}"):
                return self.uri
            time.sleep(0.1)  # polling a local port until it listens; bounded by the deadline
        self.kill()
        raise MilvusLiteServerError(
            f"Milvus Lite server on {self.data_dir} did not listen within {timeout_s:.0f} s:\n"
            f"{tail_file(self.log_path)}"
        )

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGINT (the server drains requests and closes its database), then SIGKILL."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None
        atexit.unregister(self.stop)  # only once the server is gone: an interrupted stop reruns

    def kill(self) -> None:
        process = self.process
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait(10)
        self.process = None
