"""Rebuild every derived view from the input log into a fresh target (I1, I2).

Reads turns, commands and signals from the beginning up to the end offsets seen at start, merges
each partition's three topics by producer timestamp (then topic role, then offset) — the order the
live worker saw them in — and drives the same ``MemoryEngine`` the worker uses. Writes a fresh
Milvus Lite file (or collection), a fresh compacted state topic, and a JSONL snapshot for audit.
``until`` stops at an event time: "what did we believe at time T?".

Recorded LLM extractions (``hindsight.extractions.v1``) are applied as the worker applied them;
replay never calls the LLM, unless ``re_extract`` asks for the explicit reprocess mode, which
calls it for every remembered turn and records the answers (a new revision) before using them.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from tqdm import tqdm

from pipeline.ingest.engine import MemoryEngine, RawRecord
from pipeline.ingest.worker import watermark_name
from pipeline.models.encoders import Encoder, load_encoder
from pipeline.models.llm import open_recorded_extractions
from pipeline.runtime.settings import Settings
from pipeline.views.milvus import MilvusView
from pipeline.views.state_topic import StateTopicWriter, make_producer, partition_ids
from schemas.memory import MemoryRecord
from topics.admin import ensure_topics
from topics.catalogue import INPUT_ROLES, topic_names

ROLE_ORDER = {role: index for index, role in enumerate(INPUT_ROLES)}


def _after(value: bytes | None, until: datetime) -> bool:
    """True when an event's own event time is later than ``until`` (unreadable: keep it)."""
    try:
        moment = datetime.fromisoformat(orjson.loads(value or b"{}")["event_time"])
    except (KeyError, TypeError, ValueError, orjson.JSONDecodeError):
        return False
    return moment.tzinfo is not None and moment > until


async def read_log(
    settings: Settings, until: datetime | None = None, batch: int = 256
) -> AsyncIterator[tuple[list[RawRecord], int]]:
    """Yield batches of input records in replay order, with the total count to expect."""
    names = topic_names(settings.topic_prefix)
    role_of = {names[role]: role for role in INPUT_ROLES}
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=8 * 1024 * 1024,
    )
    await consumer.start()
    try:
        assignment = [
            TopicPartition(names[role], p)
            for role in INPUT_ROLES
            for p in await partition_ids(settings.bootstrap or "", names[role])
        ]
        consumer.assign(assignment)
        await consumer.seek_to_beginning(*assignment)
        beginnings = await consumer.beginning_offsets(assignment)
        ends = await consumer.end_offsets(assignment)
        total = sum(ends[tp] - beginnings[tp] for tp in assignment)
        # Read everything per partition first: each partition's topics are merged by timestamp.
        pending: dict[TopicPartition, list[Any]] = {tp: [] for tp in assignment}
        remaining = {tp for tp in assignment if ends[tp] > beginnings[tp]}
        while remaining:
            fetched = await consumer.getmany(*remaining, timeout_ms=500, max_records=5000)
            for tp, messages in fetched.items():
                for message in messages:
                    if message.offset < ends[tp]:
                        pending[tp].append(message)
                if await consumer.position(tp) >= ends[tp]:
                    remaining.discard(tp)
        by_partition: dict[int, list[list[Any]]] = {}
        for tp, messages in pending.items():
            by_partition.setdefault(tp.partition, []).append(messages)
        out: list[RawRecord] = []
        for partition in sorted(by_partition):
            merged = heapq.merge(
                *by_partition[partition],
                key=lambda m: (m.timestamp, ROLE_ORDER[role_of[m.topic]], m.offset),
            )
            for message in merged:
                if until is not None and _after(message.value, until):
                    continue
                out.append(
                    RawRecord(
                        role_of[message.topic],
                        message.topic,
                        message.partition,
                        message.offset,
                        message.key,
                        message.value,
                    )
                )
                if len(out) >= batch:
                    yield out, total
                    out = []
        if out:
            yield out, total
    finally:
        await consumer.stop()


async def run_replay(
    settings: Settings,
    into: Path,
    *,
    reindex: bool = False,
    until: datetime | None = None,
    encoder: Encoder | None = None,
    target_prefix: str | None = None,
    progress: bool = True,
    re_extract: bool = False,
) -> dict[str, Any]:
    """Rebuild into ``into`` (Milvus Lite file + snapshot) and a fresh state topic prefix."""
    into = into.resolve()
    into.mkdir(parents=True, exist_ok=True)
    loop = asyncio.get_running_loop()
    enc: Encoder
    if encoder is not None:
        enc = encoder
    else:
        enc = await loop.run_in_executor(
            None, load_encoder, settings.encoder, settings.encoder_threads
        )
    view = MilvusView(str(into / "milvus.db"), enc.dimension)
    await loop.run_in_executor(None, view.ensure)
    prefix = (
        target_prefix
        if target_prefix is not None
        else f"replay-{int(time.time())}.{settings.topic_prefix}"
    )
    target = replace(settings, topic_prefix=prefix)
    await ensure_topics(
        settings.bootstrap or "", prefix, settings.partitions, settings.replication_factor
    )
    target_names = topic_names(prefix)
    producer = make_producer(settings.bootstrap or "", "hindsight-replay")
    await producer.start()
    writer = StateTopicWriter(
        producer, target_names["memory_state"], target_names["memory_updates"], target.partitions
    )
    engine = MemoryEngine(enc, settings.memory, lambda _ns: [], {})
    # --- LLM extractions: read the records (the source log's topic); call only on re_extract. ---
    try:
        recorded = await open_recorded_extractions(
            settings, producer, call_llm=re_extract, re_extract=re_extract, load_all=True
        )
    except BaseException:
        await producer.stop()
        raise
    extraction_counts: Counter[str] = Counter()
    started = time.perf_counter()
    applied = 0
    bar = tqdm(total=None, unit="event", desc="replay", disable=not progress)
    try:
        async for batch, total in read_log(settings, until):
            if bar.total is None:
                bar.total = total
            extractions = await recorded.for_batch(batch)
            extraction_counts.update(recorded.drain_counts())
            result = await loop.run_in_executor(None, engine.process, batch, extractions)
            records = list(result.final_records().values())
            erased = {c.record.id for c in result.changes if c.change == "erased"}
            records = [r for r in records if r.id not in erased]
            marks = {watermark_name(t, p): o for (t, p), o in result.watermarks.items()}
            marks.update(result.counters)

            def write(
                records: list[MemoryRecord] = records,
                erased: set[str] = erased,
                marks: dict[str, int] = marks,
            ) -> None:
                if records:
                    view.upsert(records)
                if erased:
                    view.delete(sorted(erased))
                view.set_watermarks(marks)

            await loop.run_in_executor(None, write)
            await writer.publish(
                records,
                [(c.record.namespace, c.record.id) for c in result.changes if c.change == "erased"],
                [c.as_update() for c in result.changes],
                result.watermarks,
            )
            applied += len(batch)
            bar.update(len(batch))
    finally:
        bar.close()
        await recorded.stop()
        await producer.stop()
    elapsed = time.perf_counter() - started
    snapshot = into / "memory-state.jsonl"
    memories = [record for bank in engine.banks.values() for record in bank.records.values()]
    with snapshot.open("wb") as out:
        for record in sorted(memories, key=lambda r: r.id):
            out.write(orjson.dumps(record.model_dump(mode="json", exclude={"vector"})) + b"\n")
    await loop.run_in_executor(None, view.flush)
    view.close()
    return {
        "events": applied,
        "seconds": round(elapsed, 3),
        "events_per_s": round(applied / elapsed, 1) if elapsed > 0 else None,
        "memories": len(memories),
        "active": sum(1 for r in memories if r.status == "active"),
        "milvus": str(into / "milvus.db"),
        "state_topic": target_names["memory_state"],
        "snapshot": str(snapshot),
        "encoder": enc.name,
        "reindex": reindex,
        "until": until.isoformat() if until else None,
        "re_extract": re_extract,
        "extractions": dict(extraction_counts),
    }
