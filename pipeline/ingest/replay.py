"""Rebuild every derived view from the log into a fresh target (I1, I2): audit and reindex.

Plain replay re-runs ``consolidate`` from ``hindsight.prepared.v1`` — the recorded vectors and
extractions — without loading any model: partition by partition, in log order, a chunk at a time
(memory stays bounded by one partition's banks), through the same ``PartitionTables`` and the
same transactional commit path as the live stage, into a fresh state-topic prefix; then the sink's
code fills a fresh Milvus Lite file from that state topic, and a JSONL snapshot is written.

``--reindex`` first re-runs ``prepare`` over the input log with the configured encoder into a
prepared topic named after it (``hindsight.prepared.v1.<encoder>``; resumable: it continues after
the last input offset already there), reusing recorded LLM extractions — never asking again
unless ``re_extract`` asks for the explicit reprocess mode — and then consolidates from it.
``until`` keeps only events up to an event time: "what did we believe at T, and why?".

Erased content stays erased (docs/ERASURE.md): prepared events whose data keys were destroyed
are counted as ``shredded`` and only move the watermark, and every recorded erase
(``ErasureRecorded`` on the data-key topic) is applied at its input position and written into the
target state topic and ``erasures.jsonl`` — the erasure is an event the replay keeps. The snapshot
and the Milvus file under ``into`` are user exports in the clear, not caches: an erase after the
replay does not reach them.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from tqdm import tqdm

from pipeline.crypto.envelope import KeyLookup, sealed_envelope, unseal
from pipeline.crypto.keystore import TopicKeyStore, open_key_store
from pipeline.ingest.commit import commit_output
from pipeline.ingest.consolidate import PartitionTables, PreparedMessage, topics_out
from pipeline.ingest.policies import open_policy_store
from pipeline.ingest.prepare import InputMessage, prepare_batch, publish_prepared, statement_models
from pipeline.ingest.sink import apply_to_view, collection_for
from pipeline.models.classifier import classifier_for
from pipeline.models.encoders import Encoder, encoder_dimension, encoder_id, load_encoder
from pipeline.runtime.kafka import client_kwargs, stop_consumer
from pipeline.runtime.progress import ProgressWriter, progress_path
from pipeline.runtime.settings import Settings
from pipeline.views.milvus import MilvusView
from pipeline.views.state_topic import (
    committed_consumer,
    make_producer,
    make_transactional_producer,
    partition_ids,
)
from schemas.codec import decode_prepared
from schemas.data_keys import ErasureRecorded
from schemas.errors import DataKeyDestroyed, HindsightError, InvalidEvent, UnknownDataKey
from schemas.prepared import LogPosition
from topics.admin import ensure_topics
from topics.catalogue import TOPICS, prepared_topic, topic_names

CHUNK = 2_000  # messages read, applied and committed at a time
PREPARE_CHUNK = 256  # input events per encoder call when reindexing


async def read_partition(
    consumer: AIOKafkaConsumer, tp: TopicPartition, start: int, end: int
) -> AsyncIterator[list[Any]]:
    """The messages of ``tp`` in ``[start, end)``, in order, a chunk at a time."""
    if start >= end:
        # Nothing to read; and assigning an empty partition after a read one leaves aiokafka
        # 0.14's fetcher unable to stop (consumer.stop() hangs): do not touch it.
        return
    consumer.assign([tp])
    consumer.seek(tp, start)
    while await consumer.position(tp) < end:
        fetched = await consumer.getmany(tp, timeout_ms=500, max_records=CHUNK)
        messages = [m for m in fetched.get(tp, []) if m.offset < end]
        if messages:
            yield messages


def _after(event_time: datetime | None, until: datetime | None) -> bool:
    return until is not None and event_time is not None and event_time > until


async def reindex_into_prepared(
    settings: Settings,
    encoder: Encoder,
    *,
    re_extract: bool = False,
    progress: bool = True,
    keys: TopicKeyStore | None = None,
) -> tuple[str, dict[str, Any]]:
    """Re-run ``prepare`` with ``encoder`` into the prepared topic named after it.

    The topic is named after the encoder and the extraction revision it uses (the newest in the
    log; a re-extract writes the next one): ``…prepared.v1.<encoder>`` for revision 0,
    ``…prepared.v1.<encoder>.x<revision>`` after. So a reindex resumes where an earlier one of the
    same encoder and revision stopped, and a re-extract never mixes with older answers.
    """
    from pipeline.ingest.extractions import open_recorded_extractions

    names = topic_names(settings.topic_prefix)
    bootstrap = settings.bootstrap or ""
    ring = None if keys is None else keys.ring
    producer = make_producer(bootstrap, "hindsight-reindex", settings.kafka)
    await producer.start()
    try:
        recorded = await open_recorded_extractions(
            settings,
            producer,
            call_llm=re_extract,
            re_extract=re_extract,
            load_all=True,
            keys=ring,
        )
    except BaseException:
        await producer.stop()
        raise
    classifier = classifier_for(settings.classifier, encoder.name)
    attributes, stages = statement_models(encoder.name, settings.slot_attributes)
    revision = recorded.revision if re_extract else recorded.latest_revision
    model = encoder_id(encoder) if revision == 0 else f"{encoder_id(encoder)}.x{revision}"
    target = prepared_topic(settings.topic_prefix, model)
    await ensure_topics(
        bootstrap,
        settings.topic_prefix,
        settings.partitions,
        settings.replication_factor,
        settings.kafka,
        extra={target: TOPICS["prepared"]},
    )
    resume = await _prepared_positions(bootstrap, target, settings)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        **client_kwargs(settings.kafka),
    )
    await consumer.start()
    counts: Counter[str] = Counter()
    started = time.perf_counter()
    # The live histories carry each policy's position, so a reindex that resumes mid-log redacts
    # exactly as live prepare did; the set_policy commands it passes join them again (no-ops).
    policy_store = await open_policy_store(settings)
    book = dict(policy_store.book)
    await policy_store.stop()
    try:
        tps = [
            TopicPartition(names["events"], p)
            for p in await partition_ids(bootstrap, names["events"], settings.kafka)
        ]
        ends = await consumer.end_offsets(tps)
        total = sum(max(0, ends[tp] - resume.get(tp.partition, 0)) for tp in tps)
        with tqdm(total=total, unit="event", desc="reindex", disable=not progress) as bar:
            for tp in tps:
                start = resume.get(tp.partition, 0)
                async for chunk in read_partition(consumer, tp, start, ends[tp]):
                    for index in range(0, len(chunk), PREPARE_CHUNK):
                        messages = [
                            InputMessage(
                                m.topic, m.partition, m.offset, m.timestamp, m.key, m.value
                            )
                            for m in chunk[index : index + PREPARE_CHUNK]
                        ]
                        extractions = await recorded.for_batch(messages, dict(book))
                        batch = await asyncio.get_running_loop().run_in_executor(
                            None,
                            partial(
                                prepare_batch,
                                messages,
                                encoder,
                                extractions,
                                ring,
                                time_notes=settings.memory.time_notes,
                                classifier=classifier,
                                attributes=attributes,
                                stages=stages,
                                policies=book,
                            ),
                        )
                        await publish_prepared(producer, settings, batch, target)
                        counts.update(batch.counts)
                        counts["events"] += len(messages)
                        bar.update(len(messages))
    finally:
        await stop_consumer(consumer)
        await recorded.stop()
        await producer.stop()
    elapsed = time.perf_counter() - started
    counts.update(recorded.drain_counts())
    summary = {
        "prepared_topic": target,
        "encoder": model,
        "events": counts["events"],
        "seconds": round(elapsed, 3),
        "events_per_s": round(counts["events"] / elapsed, 1) if elapsed > 0 else None,
        "counts": dict(counts),
    }
    return target, summary


def prepared_source(value: bytes | None) -> LogPosition | None:
    """The input position of a prepared event — plain on a sealed envelope — or None."""
    try:
        envelope = sealed_envelope(value)
        return envelope.source if envelope is not None else decode_prepared(value).source
    except InvalidEvent:
        return None


async def _prepared_positions(bootstrap: str, topic: str, settings: Settings) -> dict[int, int]:
    """Per input partition, the next input offset a prepared topic still lacks (resume point)."""
    positions: dict[int, int] = {}
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        **client_kwargs(settings.kafka),
    )
    await consumer.start()
    try:
        for partition in await partition_ids(bootstrap, topic, settings.kafka):
            tp = TopicPartition(topic, partition)
            end = (await consumer.end_offsets([tp]))[tp]
            if end == 0:
                continue
            consumer.assign([tp])
            consumer.seek(tp, end - 1)
            fetched = await consumer.getmany(tp, timeout_ms=5_000)
            for message in fetched.get(tp, []):
                source = prepared_source(message.value)
                if source is None:
                    continue
                positions[source.partition] = max(
                    positions.get(source.partition, 0), source.offset + 1
                )
    finally:
        await stop_consumer(consumer)
    return positions


async def run_replay(
    settings: Settings,
    into: Path,
    *,
    reindex_with: Encoder | None = None,
    reindex: bool = False,
    until: datetime | None = None,
    target_prefix: str | None = None,
    progress: bool = True,
    re_extract: bool = False,
    milvus: bool = True,
) -> dict[str, Any]:
    """Rebuild into ``into`` (Milvus Lite file + snapshot) and a fresh state-topic prefix.

    Progress goes to ``<data_dir>/replay-progress.json`` (pipeline/runtime/progress.py), which
    the dashboard's operations page shows; a failure is recorded there before it propagates.
    """
    if not settings.bootstrap:
        raise HindsightError("replay needs a running Kafka (settings.bootstrap)")
    prefix = (
        target_prefix
        if target_prefix is not None
        else f"replay-{int(time.time())}.{settings.topic_prefix}"
    )
    tracker = ProgressWriter(
        progress_path(settings.data_dir),
        run_id=prefix.rstrip("."),
        target_prefix=prefix,
        into=into.resolve(),
        reindex=reindex or reindex_with is not None or re_extract,
        until=until,
    )
    # Every key (and every destruction) was written before the events that use it: read them all.
    keys = None
    try:
        keys = await open_key_store(settings)
        return await _replay(
            settings,
            into,
            tracker,
            prefix,
            keys,
            reindex_with=reindex_with,
            reindex=reindex,
            until=until,
            progress=progress,
            re_extract=re_extract,
            milvus=milvus,
        )
    except BaseException as error:
        tracker.fail(error)
        raise
    finally:
        if keys is not None:
            await keys.stop()


def recorded_erasures(
    keys: TopicKeyStore | None, events_topic: str, until: datetime | None
) -> dict[int, dict[int, ErasureRecorded]]:
    """The erasure ledger by input partition and offset (only erases up to ``until``)."""
    ledger: dict[int, dict[int, ErasureRecorded]] = {}
    for erasure in [] if keys is None else keys.ring.erasures():
        if erasure.source.topic == events_topic and not _after(erasure.at, until):
            ledger.setdefault(erasure.source.partition, {})[erasure.source.offset] = erasure
    return ledger


async def _replay(
    settings: Settings,
    into: Path,
    tracker: ProgressWriter,
    prefix: str,
    keys: TopicKeyStore | None,
    *,
    reindex_with: Encoder | None,
    reindex: bool,
    until: datetime | None,
    progress: bool,
    re_extract: bool,
    milvus: bool,
) -> dict[str, Any]:
    assert settings.bootstrap
    into = into.resolve()
    into.mkdir(parents=True, exist_ok=True)
    bootstrap = settings.bootstrap
    ring = None if keys is None else keys.ring
    reindex_summary: dict[str, Any] | None = None
    source_topic = topic_names(settings.topic_prefix)["prepared"]
    dimension = encoder_dimension(settings.encoder)
    if reindex or reindex_with is not None or re_extract:
        encoder = reindex_with
        if encoder is None:
            loop = asyncio.get_running_loop()
            encoder = await loop.run_in_executor(
                None, load_encoder, settings.encoder, settings.encoder_threads
            )
        dimension = encoder.dimension
        tracker.phase("reindex")
        source_topic, reindex_summary = await reindex_into_prepared(
            settings, encoder, re_extract=re_extract, progress=progress, keys=keys
        )
    target = replace(settings, topic_prefix=prefix)
    await ensure_topics(
        bootstrap, prefix, settings.partitions, settings.replication_factor, settings.kafka
    )
    out_topics = topics_out(target, live=False)
    events_topic = topic_names(settings.topic_prefix)["events"]
    ledger = recorded_erasures(keys, events_topic, until)

    snapshot = into / "memory-state.jsonl"
    erasures_file = into / "erasures.jsonl"
    counts: Counter[str] = Counter()
    memories = active = done = 0
    started = time.perf_counter()
    consumer = committed_consumer(
        bootstrap_servers=bootstrap, group_id=None, **client_kwargs(settings.kafka)
    )
    await consumer.start()
    producers = []
    try:
        tps = [
            TopicPartition(source_topic, p)
            for p in await partition_ids(bootstrap, source_topic, settings.kafka)
        ]
        if not tps:
            raise HindsightError(f"prepared topic {source_topic} does not exist")
        beginnings = await consumer.beginning_offsets(tps)
        ends = await consumer.end_offsets(tps)
        total = sum(ends[tp] - beginnings[tp] for tp in tps)
        tracker.phase("consolidate", total)
        with (
            snapshot.open("wb") as out,
            erasures_file.open("wb") as erased_out,
            tqdm(total=total, unit="event", desc="replay", disable=not progress) as bar,
        ):
            for tp in tps:
                producer = make_transactional_producer(
                    bootstrap, f"hindsight-replay.{prefix}p{tp.partition}", settings.kafka
                )
                await producer.start()
                producers.append(producer)
                tables = PartitionTables(
                    tp.partition,
                    events_topic,
                    settings.memory,
                    keys=ring,
                    recorded_erasures=ledger.get(tp.partition, {}),
                )
                async for chunk in read_partition(consumer, tp, beginnings[tp], ends[tp]):
                    batch = [
                        PreparedMessage(m.topic, m.partition, m.offset, m.key, m.value)
                        for m in chunk
                        if until is None or not _after(_event_time(m.value, ring), until)
                    ]
                    output = tables.apply_all(batch)
                    await commit_output(producer, out_topics, output, keys=ring)
                    for erasure in output.erasures:
                        erased_out.write(orjson.dumps(erasure.model_dump(mode="json")) + b"\n")
                    counts.update(output.counts)
                    done += len(chunk)
                    bar.update(len(chunk))
                    tracker.advance(done, total)
                for bank in sorted(tables.banks.values(), key=lambda b: b.namespace):
                    for record in sorted(bank.records.values(), key=lambda r: r.id):
                        out.write(
                            orjson.dumps(record.model_dump(mode="json", exclude={"vector"})) + b"\n"
                        )
                        memories += 1
                        active += record.status == "active"
    finally:
        await stop_consumer(consumer)
        for producer in producers:
            await producer.stop()
    consolidate_seconds = time.perf_counter() - started
    sink_seconds = 0.0
    milvus_path = into / "milvus.db"
    if milvus:
        tracker.phase("sink", done)
        sink_started = time.perf_counter()
        await _fill_milvus(
            settings, out_topics.state, milvus_path, collection_for(prefix), dimension, keys
        )
        sink_seconds = time.perf_counter() - sink_started
    tracker.finish(done)
    return {
        "events": done,
        "seconds": round(consolidate_seconds, 3),
        "events_per_s": round(done / consolidate_seconds, 1) if consolidate_seconds > 0 else None,
        "sink_seconds": round(sink_seconds, 3),
        "memories": memories,
        "active": active,
        "milvus": str(milvus_path) if milvus else None,
        "state_topic": out_topics.state,
        "target_prefix": prefix,
        "prepared_topic": source_topic,
        "snapshot": str(snapshot),
        "erasures": str(erasures_file),
        "shredded": counts["shredded"],
        "reindex": reindex_summary,
        "until": until.isoformat() if until else None,
        "counts": dict(counts),
    }


def _event_time(value: bytes | None, keys: KeyLookup | None) -> datetime | None:
    """The event time of a prepared event, without validating all of it (until filter)."""
    try:
        payload = orjson.loads(unseal(value, keys, "prepared").content or b"{}")
        raw = payload["event"]["event_time"]
    except (KeyError, TypeError, orjson.JSONDecodeError, InvalidEvent):
        return None
    except (DataKeyDestroyed, UnknownDataKey):
        return None  # erased: the tables count it as shredded
    try:
        return datetime.fromisoformat(raw)
    except (TypeError, ValueError):
        return None


async def _fill_milvus(
    settings: Settings,
    state_topic: str,
    path: Path,
    collection: str,
    dimension: int,
    keys: TopicKeyStore | None = None,
) -> None:
    """The sink's code over a whole state topic, into a fresh Milvus Lite file."""
    loop = asyncio.get_running_loop()
    view = MilvusView(str(path), dimension, collection)
    await loop.run_in_executor(None, view.ensure)
    bootstrap = settings.bootstrap or ""
    consumer = committed_consumer(
        bootstrap_servers=bootstrap, group_id=None, **client_kwargs(settings.kafka)
    )
    await consumer.start()
    try:
        tps = [
            TopicPartition(state_topic, p)
            for p in await partition_ids(bootstrap, state_topic, settings.kafka)
        ]
        ends = await consumer.end_offsets(tps)
        for tp in tps:
            async for chunk in read_partition(consumer, tp, 0, ends[tp]):
                messages = [(m.key, m.value) for m in chunk]
                ring = None if keys is None else keys.ring
                await loop.run_in_executor(None, apply_to_view, view, messages, ring)
        await loop.run_in_executor(None, view.flush)
    finally:
        await stop_consumer(consumer)
        view.close()
