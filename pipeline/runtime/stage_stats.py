"""What each stage process did and where its time went, written as a small JSON file.

Every stage keeps one ``StageStats``: event counts and wall-clock seconds per step (decode,
encode, publish, decide, commit, restore, view writes). The worker writes them under
``<data_dir>/stats/<stage>-<pid>.json`` every few seconds and at shutdown, so a benchmark can
say which stage spent the time and an operator can read it without a metrics server. This is
operations data only: no decision ever reads it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson


@dataclass
class StageStats:
    stage: str
    counts: Counter[str] = field(default_factory=Counter)
    seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))

    @contextlib.contextmanager
    def timed(self, step: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[step] += time.perf_counter() - started

    def snapshot(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "pid": os.getpid(),
            "counts": dict(self.counts),
            "seconds": {step: round(value, 4) for step, value in self.seconds.items()},
        }

    def write(self, data_dir: Path) -> None:
        folder = Path(data_dir) / "stats"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.stage}-{os.getpid()}.json"
        temporary = path.with_suffix(".tmp")
        temporary.write_bytes(orjson.dumps(self.snapshot()))
        temporary.replace(path)


def read_stats(data_dir: Path) -> list[dict[str, Any]]:
    """Every stage process's last written stats under ``data_dir``."""
    folder = Path(data_dir) / "stats"
    if not folder.exists():
        return []
    return [orjson.loads(path.read_bytes()) for path in sorted(folder.glob("*.json"))]


def seconds_by_stage(data_dir: Path) -> dict[str, dict[str, float]]:
    """Seconds per step, summed over the processes of each stage."""
    totals: dict[str, defaultdict[str, float]] = {}
    for entry in read_stats(data_dir):
        steps = totals.setdefault(entry["stage"], defaultdict(float))
        for step, value in entry.get("seconds", {}).items():
            steps[step] += value
    return {stage: {k: round(v, 3) for k, v in steps.items()} for stage, steps in totals.items()}
