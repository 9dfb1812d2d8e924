"""The replay progress file, ``<data_dir>/replay-progress.json``: written by replay, read by ops.

One small JSON object, replaced atomically (write, then rename) at most every
``WRITE_EVERY_S`` and at every change of state, so a reader never sees half a file and a fast
replay does not spend its time writing progress::

    {"schema_version": 1, "run_id": "replay-1733040000", "state": "running",
     "phase": "consolidate", "started_at": "...", "updated_at": "...",
     "events_total": 1200, "events_applied": 640, "target_prefix": "replay-1733040000.",
     "into": "/data/rebuild", "reindex": false, "until": null, "error": null}

``state`` is running, done or failed (``error`` says why); ``phase`` is where a running replay
is: reindex (re-running prepare with a new encoder), consolidate (the counted part: prepared
events applied of ``events_total``), sink (filling Milvus) or done. ``events_total`` is None until
the replay knows how many prepared events it will read.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

PROGRESS_FILE = "replay-progress.json"
WRITE_EVERY_S = 0.5

ReplayState = Literal["running", "done", "failed"]


class ReplayProgress(BaseModel):
    model_config = ConfigDict(frozen=True)

    schema_version: Literal[1] = 1
    run_id: str
    state: ReplayState
    phase: str = "start"
    started_at: datetime
    updated_at: datetime
    events_total: int | None = None
    events_applied: int = 0
    target_prefix: str
    into: str
    reindex: bool = False
    until: datetime | None = None
    error: str | None = None

    @property
    def fraction(self) -> float | None:
        if not self.events_total:
            return 1.0 if self.state == "done" else None
        return min(1.0, self.events_applied / self.events_total)

    @property
    def events_per_second(self) -> float | None:
        seconds = (self.updated_at - self.started_at).total_seconds()
        return self.events_applied / seconds if seconds > 0 else None


def progress_path(data_dir: Path) -> Path:
    return Path(data_dir) / PROGRESS_FILE


def write_progress(path: Path, progress: ReplayProgress) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_bytes(orjson.dumps(progress.model_dump(mode="json")))
    temporary.replace(path)


def read_progress(path: Path) -> ReplayProgress | None:
    """The last replay's progress; None when no replay wrote one (or it is unreadable)."""
    try:
        return ReplayProgress.model_validate(orjson.loads(path.read_bytes()))
    except (OSError, orjson.JSONDecodeError, ValidationError):
        return None


def _now() -> datetime:
    # Progress is reporting, not a memory decision: wall-clock time is what an operator wants.
    return datetime.now(UTC)


class ProgressWriter:
    """Keeps a replay's progress file current without writing it on every batch."""

    def __init__(
        self,
        path: Path,
        *,
        run_id: str,
        target_prefix: str,
        into: Path,
        reindex: bool = False,
        until: datetime | None = None,
    ) -> None:
        self.path = path
        now = _now()
        self.progress = ReplayProgress(
            run_id=run_id,
            state="running",
            started_at=now,
            updated_at=now,
            target_prefix=target_prefix,
            into=str(into),
            reindex=reindex,
            until=until,
        )
        self._written_at = 0.0
        self._write(force=True)

    def _write(self, force: bool = False) -> None:
        if force or time.monotonic() - self._written_at >= WRITE_EVERY_S:
            write_progress(self.path, self.progress)
            self._written_at = time.monotonic()

    def _update(self, force: bool = False, **changes: object) -> None:
        self.progress = self.progress.model_copy(update={**changes, "updated_at": _now()})
        self._write(force)

    def phase(self, name: str, total: int | None = None) -> None:
        changes: dict[str, object] = {"phase": name}
        if total is not None:
            changes["events_total"] = total
        self._update(force=True, **changes)

    def advance(self, applied: int, total: int | None) -> None:
        self._update(events_applied=applied, events_total=total)

    def finish(self, applied: int) -> None:
        self._update(force=True, state="done", phase="done", events_applied=applied)

    def fail(self, error: BaseException) -> None:
        self._update(force=True, state="failed", error=f"{type(error).__name__}: {error}")
