"""Liveness, readiness and lag: what ``/healthz``, ``/readyz``, the metrics and the operations
page report, decided by pure functions over numbers the broker and the follower give.

- healthy: the process runs and the broker answers a metadata request;
- ready: the recall view follows the state topic (its task has not stopped; if it failed, the
  cause is given) and, for every input partition, the view's watermark is within
  ``max_lag`` messages of the partition's end (I5: what recall answers from is current).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from aiokafka import TopicPartition

from pipeline.runtime.metrics import Metrics
from pipeline.runtime.settings import Settings
from pipeline.views.log_reader import GroupLag, LogReader, LogUnavailable
from topics.catalogue import topic_names

log = logging.getLogger("hindsight.health")

LAG_SAMPLE_S = 15.0

Position = tuple[str, int]


class Following(Protocol):
    """What readiness reads of the state follower (``StateFollower`` has it)."""

    @property
    def running(self) -> bool: ...

    @property
    def watermarks(self) -> dict[Position, int]: ...

    failure: BaseException | None


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reasons: list[str] = field(default_factory=list)
    # Input messages the view has not applied yet, per input partition.
    lags: dict[Position, int] = field(default_factory=dict)

    @property
    def view_lag(self) -> dict[str, int]:
        return {f"{topic}:{partition}": lag for (topic, partition), lag in self.lags.items()}


def view_lag(
    watermarks: Mapping[Position, int], ends: Mapping[Position, int]
) -> dict[Position, int]:
    """Per input partition: messages after the view's watermark (-1 when it has none)."""
    return {
        position: max(0, end - (watermarks.get(position, -1) + 1))
        for position, end in sorted(ends.items())
    }


def assess_readiness(
    *,
    follower_running: bool,
    follower_failure: BaseException | None,
    watermarks: Mapping[Position, int],
    ends: Mapping[Position, int] | None,
    max_lag: int,
    ends_error: str | None = None,
) -> Readiness:
    reasons: list[str] = []
    if follower_failure is not None:
        reasons.append(
            f"recall view stopped: {type(follower_failure).__name__}: {follower_failure}"
        )
    elif not follower_running:
        reasons.append("recall view is not following the state topic")
    lags: dict[Position, int] = {}
    if ends is None:
        reasons.append(f"input log end offsets unavailable: {ends_error or 'no answer'}")
    else:
        lags = view_lag(watermarks, ends)
        for (topic, partition), lag in lags.items():
            if lag > max_lag:
                reasons.append(
                    f"views are {lag} messages behind {topic}[{partition}] (bound {max_lag})"
                )
    return Readiness(not reasons, reasons, lags)


async def input_ends(reader: LogReader, prefix: str) -> dict[Position, int]:
    """End offset of every partition of the input log (what the watermarks are compared to)."""
    topic = topic_names(prefix)["events"]
    partitions = [TopicPartition(topic, p) for p in await reader.partitions(topic)]
    ends = await reader.end_offsets(partitions)
    return {(tp.topic, tp.partition): end for tp, end in ends.items()}


async def check_readiness(
    follower: Following, reader: LogReader, prefix: str, max_lag: int
) -> Readiness:
    ends: dict[Position, int] | None = None
    error = None
    try:
        ends = await input_ends(reader, prefix)
    except LogUnavailable as failure:
        error = str(failure)
    return assess_readiness(
        follower_running=follower.running,
        follower_failure=follower.failure,
        watermarks=follower.watermarks,
        ends=ends,
        max_lag=max_lag,
        ends_error=error,
    )


async def stage_lags(reader: LogReader, app_id: str) -> list[GroupLag]:
    """Committed-offset lag of every consumer group of the pipeline (ids start with app_id)."""
    return await reader.group_lags(await reader.groups(app_id))


def stage_of(group: str, app_id: str) -> str:
    """``<app_id>-prepare`` → ``prepare`` (a group named just ``<app_id>`` → ``worker``)."""
    return group.removeprefix(app_id).lstrip("-._") or "worker"


async def sample(
    reader: LogReader, metrics: Metrics, follower: Following, settings: Settings
) -> Readiness:
    """One sample of the gauges Prometheus reads: stage lags, view lag and readiness."""
    try:
        lags = await stage_lags(reader, settings.app_id)
    except LogUnavailable as error:
        log.debug("consumer-lag sample skipped: %s", error)
    else:
        metrics.set_consumer_lag((row.group, row.topic, row.partition, row.lag) for row in lags)
    readiness = await check_readiness(
        follower, reader, settings.topic_prefix, settings.ready_max_lag
    )
    metrics.set_view_lag((t, p, lag) for (t, p), lag in readiness.lags.items())
    metrics.ready.set(1 if readiness.ready else 0)
    return readiness


async def sample_forever(
    reader: LogReader,
    metrics: Metrics,
    follower: Following,
    settings: Settings,
    interval: float = LAG_SAMPLE_S,
) -> None:
    """Keep the gauges current between scrapes (the API runs this for its whole life)."""
    while True:
        await sample(reader, metrics, follower, settings)
        await asyncio.sleep(interval)
