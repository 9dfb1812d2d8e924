"""Stage processes on a real broker, and the yardsticks for "live equals replay".

Shared by the scale-out and chaos benchmarks and the integration tests of rebalances and
exactness: start ``hindsight worker --stages …`` processes, kill them with SIGKILL, wait on
offsets (never on sleeps) until consolidation has applied the input log, read the live state
from the state topic, replay into a fresh target and compare record for record.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from pipeline.crypto.keystore import open_key_store
from pipeline.ingest.replay import run_replay
from pipeline.runtime.kafka import stop_consumer
from pipeline.runtime.settings import Settings
from pipeline.runtime.stack import WorkerProcess
from pipeline.views.state_topic import partition_ids, read_state_partition
from schemas.errors import HindsightError
from schemas.memory import MemoryRecord
from topics.catalogue import Role, topic_names


@dataclass
class Fleet:
    """Worker processes by name; each may run any subset of the stages."""

    settings: Settings
    processes: dict[str, WorkerProcess] = field(default_factory=dict)
    kills: int = 0

    def start(self, name: str, stages: tuple[str, ...], milvus_uri: str | None = None) -> None:
        process = WorkerProcess(
            self.settings, log_name=f"{name}.log", stages=stages, milvus_uri=milvus_uri
        )
        process.start()
        self.processes[name] = process

    def kill(self, name: str) -> None:
        self.processes.pop(name).kill()
        self.kills += 1

    def stop_all(self) -> None:
        for process in self.processes.values():
            process.stop()
        self.processes.clear()

    def failed(self) -> list[str]:
        return [name for name, process in self.processes.items() if not process.alive()]

    def log_tail(self, name: str, lines: int = 40) -> str:
        process = self.processes.get(name)
        return process.log_tail(lines) if process else ""


async def topic_ends(settings: Settings, name: Role) -> dict[int, int]:
    """End offset per partition of the catalogue's topic ``name`` (e.g. "events", "prepared")."""
    topic = topic_names(settings.topic_prefix)[name]
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, group_id=None)
    await consumer.start()
    try:
        tps = [
            TopicPartition(topic, p) for p in await partition_ids(settings.bootstrap or "", topic)
        ]
        ends = await consumer.end_offsets(tps)
    finally:
        await stop_consumer(consumer)
    return {tp.partition: end for tp, end in ends.items()}


async def input_ends(settings: Settings) -> dict[int, int]:
    """The input log's end offset per partition (what consolidation must reach)."""
    return await topic_ends(settings, "events")


async def applied_offsets(settings: Settings) -> dict[int, int]:
    """The last input offset consolidation applied, per partition (from the state topic)."""
    names = topic_names(settings.topic_prefix)
    applied: dict[int, int] = {}
    for partition in await partition_ids(settings.bootstrap or "", names["memory_state"]):
        state = await read_state_partition(
            settings.bootstrap or "", names["memory_state"], partition
        )
        applied[partition] = state.watermark.offset if state.watermark else -1
    return applied


async def wait_consolidated(
    settings: Settings, fleet: Fleet | None = None, timeout_s: float = 600.0, poll_s: float = 0.5
) -> None:
    """Return once consolidation has applied every input event published so far."""
    ends = await input_ends(settings)
    deadline = time.monotonic() + timeout_s
    while True:
        applied = await applied_offsets(settings)
        behind = {p: end for p, end in ends.items() if end > 0 and applied.get(p, -1) < end - 1}
        if not behind:
            return
        if fleet is not None and fleet.failed():
            names = fleet.failed()
            raise HindsightError(
                f"stage process {names[0]} died; log tail:\n{fleet.log_tail(names[0])}"
            )
        if time.monotonic() > deadline:
            raise HindsightError(
                f"consolidation did not reach {behind} within {timeout_s:.0f}s (applied {applied})"
            )
        await asyncio.sleep(poll_s)  # polling the state topic's watermarks, with a deadline


async def live_records(
    settings: Settings, keys_of: Settings | None = None
) -> dict[str, MemoryRecord]:
    """Every current record in the deployment's state topic (committed data only).

    Records are sealed with their memories' data keys, which live with the deployment whose log
    they came from: ``keys_of`` names it when ``settings`` is a replay's target prefix.
    """
    names = topic_names(settings.topic_prefix)
    records: dict[str, MemoryRecord] = {}
    keys = await open_key_store(keys_of or settings)
    try:
        for partition in await partition_ids(settings.bootstrap or "", names["memory_state"]):
            state = await read_state_partition(
                settings.bootstrap or "", names["memory_state"], partition, keys=keys
            )
            if state.unopened:
                raise HindsightError(f"state records cannot be opened: {state.unopened[:3]}")
            records.update(state.records)
    finally:
        if keys is not None:
            await keys.stop()
    return records


async def replayed_records(
    settings: Settings, into: Path
) -> tuple[dict[str, MemoryRecord], dict[str, Any]]:
    """Replay the prepared log into a fresh prefix; its records (with vectors) and summary."""
    summary = await run_replay(settings, into, progress=False, milvus=False)
    target = replace(settings, topic_prefix=summary["target_prefix"])
    return await live_records(target, keys_of=settings), summary


def dumps(
    records: dict[str, MemoryRecord], namespaces: Iterable[str] | None = None
) -> dict[str, Any]:
    wanted = None if namespaces is None else set(namespaces)
    return {
        memory_id: record.model_dump(mode="json")
        for memory_id, record in records.items()
        if wanted is None or record.namespace in wanted
    }


def differences(live: dict[str, Any], rebuilt: dict[str, Any]) -> list[str]:
    """Human-readable differences between two dumps (empty when equal)."""
    problems = []
    for memory_id in sorted(set(live) | set(rebuilt)):
        if memory_id not in rebuilt:
            problems.append(f"{memory_id} only live: {live[memory_id]['content']!r}")
        elif memory_id not in live:
            problems.append(f"{memory_id} only in replay: {rebuilt[memory_id]['content']!r}")
        elif live[memory_id] != rebuilt[memory_id]:
            changed = sorted(
                k for k in live[memory_id] if live[memory_id][k] != rebuilt[memory_id].get(k)
            )
            problems.append(f"{memory_id} differs in {changed}")
    return problems


def duplicate_sources(records: dict[str, MemoryRecord]) -> int:
    """Memories created twice from the same content-addressed input (the creating turn)."""
    created_by = Counter(
        (record.namespace, record.provenance[0].event_id)
        for record in records.values()
        if record.provenance
    )
    return sum(count - 1 for count in created_by.values() if count > 1)
