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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from aiokafka import TopicPartition

from pipeline.runtime.metrics import Metrics
from pipeline.views.log_reader import GroupLag, LogReader
from schemas.errors import HindsightError
from topics.catalogue import topic_names

log = logging.getLogger("hindsight.health")

LAG_SAMPLE_S = 15.0

Position = tuple[str, int]


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reasons: list[str] = field(default_factory=list)
    # Input messages the view has not applied yet, per "topic:partition".
    view_lag: dict[str, int] = field(default_factory=dict)


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
        behind = {p: lag for p, lag in lags.items() if lag > max_lag}
        for (topic, partition), lag in behind.items():
            reasons.append(
                f"views are {lag} messages behind {topic}[{partition}] (bound {max_lag})"
            )
    return Readiness(
        not reasons,
        reasons,
        {f"{topic}:{partition}": lag for (topic, partition), lag in lags.items()},
    )


async def input_ends(reader: LogReader, prefix: str) -> dict[Position, int]:
    """End offset of every partition of the input log (what the watermarks are compared to)."""
    topic = topic_names(prefix)["events"]
    partitions = [TopicPartition(topic, p) for p in await reader.partitions(topic)]
    ends = await reader.end_offsets(partitions)
    return {(tp.topic, tp.partition): end for tp, end in ends.items()}


async def stage_lags(reader: LogReader, app_id: str) -> list[GroupLag]:
    """Committed-offset lag of every consumer group of the pipeline (ids start with app_id)."""
    return await reader.group_lags(await reader.groups(app_id))


def stage_of(group: str, app_id: str) -> str:
    """``<app_id>-prepare`` → ``prepare``; the single worker's group ``<app_id>`` → ``worker``."""
    return group.removeprefix(app_id).lstrip("-._") or "worker"


async def sample_lags(
    reader: LogReader,
    metrics: Metrics,
    app_id: str,
    prefix: str,
    watermarks: Mapping[Position, int] | None = None,
) -> None:
    """One sample of the lag gauges (consumer groups, and the view when watermarks are given)."""
    lags = await stage_lags(reader, app_id)
    metrics.set_consumer_lag((row.group, row.topic, row.partition, row.lag) for row in lags)
    if watermarks is not None:
        lag = view_lag(watermarks, await input_ends(reader, prefix))
        metrics.set_view_lag((topic, partition, value) for (topic, partition), value in lag.items())


async def sample_lags_forever(
    reader: LogReader,
    metrics: Metrics,
    app_id: str,
    prefix: str,
    watermarks: Callable[[], Mapping[Position, int]] | None = None,
    interval: float = LAG_SAMPLE_S,
) -> None:
    """Keep the lag gauges current between scrapes; a broker hiccup skips one sample."""
    while True:
        try:
            await sample_lags(reader, metrics, app_id, prefix, watermarks() if watermarks else None)
        except HindsightError as error:
            log.debug("lag sample skipped: %s", error)
        await asyncio.sleep(interval)
