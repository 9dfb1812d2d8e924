"""Stream wiring: the Faust app, built by a factory (never a module-level singleton).

One agent consumes the three input topics (co-partitioned by namespace), batches events with
``take_events`` so the encoder sees a batch, runs ``MemoryEngine`` (pure decisions) in a thread so
the event loop keeps heart-beating, and hands the result to ``ViewCommitter.commit`` — the one
place that writes the commit order down.

Why one agent rather than a topic per stage: a namespace's turns must pass filter → segment →
extract → consolidate in log order, and the stages share the namespace bank; separate stage
topics would add a produce/consume hop per stage and split the embedding batches without buying
parallelism that partitions do not already give.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

import faust
import orjson
from aiokafka import AIOKafkaProducer

from pipeline.ingest.engine import COUNTER_PREFIX, BatchResult, MemoryEngine, RawRecord
from pipeline.models.encoders import Encoder, load_encoder
from pipeline.runtime.settings import Settings
from pipeline.views.milvus import MilvusView
from pipeline.views.state_topic import StateTopicWriter, make_producer, partition_for
from schemas.codec import encode
from topics.catalogue import INPUT_ROLES, Role, topic_names

ROLE_ORDER = {role: index for index, role in enumerate(INPUT_ROLES)}

log = logging.getLogger("hindsight.worker")


def watermark_name(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


class ViewCommitter:
    """Writes a batch's results to every derived view, in the order that keeps I4."""

    def __init__(self, settings: Settings, view: MilvusView, producer: AIOKafkaProducer) -> None:
        names = topic_names(settings.topic_prefix)
        self._settings = settings
        self._view = view
        self._producer = producer
        self._dead_letters = names["dead_letters"]
        self._writer = StateTopicWriter(
            producer, names["memory_state"], names["memory_updates"], settings.partitions
        )
        self.counts: Counter[str] = Counter()
        # Wall time inside batches and inside the encoder: pipeline overhead = batch - encode.
        self.timings: dict[str, float] = {"encode_seconds": 0.0, "batch_seconds": 0.0}
        self.unflushed = False
        self._metrics_path = settings.data_dir / "worker-metrics.json"

    async def commit(self, result: BatchResult) -> None:
        """Commit order:

        1. upsert changed records into Milvus and delete erased ones (idempotent by memory id);
        2. publish records, tombstones, change-feed entries, watermarks and dead letters to Kafka;
        3. wait for every acknowledgement (flush);
        4. record the applied input offsets (and per-namespace turn counters) in Milvus;
        5. return — Faust then acks the batch and commits the consumer offsets.

        A crash before 4 replays the batch from the last recorded offsets: events the view already
        holds are recognised by the records' applied positions and published again unchanged, so
        the state topic never misses what Milvus has. A crash between 4 and 5 re-reads events the
        view skips.
        """
        records = list(result.final_records().values())
        erased = [(c.record.namespace, c.record.id) for c in result.changes if c.change == "erased"]
        erased_ids = {memory_id for _, memory_id in erased}
        records = [r for r in records if r.id not in erased_ids]
        marks = {watermark_name(t, p): o for (t, p), o in result.watermarks.items()}
        marks.update(result.counters)
        loop = asyncio.get_running_loop()

        def write_records() -> None:
            if records:
                self._view.upsert(records)
                self.unflushed = True
            if erased_ids:
                self._view.delete(sorted(erased_ids))
                # Milvus drops deleted rows on flush/compaction: a hard erase flushes now.
                self._view.flush()

        await loop.run_in_executor(None, write_records)
        dead_futures = [
            await self._producer.send(
                self._dead_letters,
                key=str(letter.source_offset).encode(),
                value=encode(letter),
                partition=letter.source_partition % self._settings.partitions,
            )
            for letter in result.dead_letters
        ]
        await self._writer.publish(
            records, erased, [c.as_update() for c in result.changes], result.watermarks
        )
        if dead_futures:
            await asyncio.gather(*dead_futures)
        if marks:
            await loop.run_in_executor(None, self._view.set_watermarks, marks)
        self.counts.update(result.counts)

    def write_metrics(self) -> None:
        turns = self.counts.get("turns", 0)
        payload = {
            **dict(self.counts),
            **{key: round(value, 3) for key, value in self.timings.items()},
            "filter_rate": (self.counts.get("filtered", 0) / turns) if turns else 0.0,
        }
        try:
            self._metrics_path.parent.mkdir(parents=True, exist_ok=True)
            self._metrics_path.write_bytes(orjson.dumps(payload))
        except OSError:
            log.warning("could not write %s", self._metrics_path)


def create_app(settings: Settings, encoder: Encoder | None = None) -> faust.App:
    if not settings.bootstrap:
        raise ValueError("create_app needs settings.bootstrap (a running Kafka)")
    names = topic_names(settings.topic_prefix)
    role_of: dict[str, Role] = {
        names["turns"]: "turns",
        names["commands"]: "commands",
        names["signals"]: "signals",
    }
    data_dir = Path(settings.data_dir)
    app = faust.App(
        settings.app_id,
        broker=f"kafka://{settings.bootstrap}",
        datadir=str(data_dir / "faust"),
        web_enabled=False,
        producer_acks=-1,
        consumer_auto_offset_reset="earliest",
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication_factor,
        broker_commit_every=1000,
        broker_commit_interval=1.0,
        stream_wait_empty=False,
        key_serializer="raw",
        value_serializer="raw",
    )
    inputs = app.topic(
        names["turns"], names["commands"], names["signals"], key_type=bytes, value_type=bytes
    )
    state: dict[str, Any] = {}

    async def open_views() -> None:
        if "engine" in state:
            return
        loop = asyncio.get_running_loop()
        enc: Encoder
        if encoder is not None:
            enc = encoder
        else:
            enc = await loop.run_in_executor(
                None, load_encoder, settings.encoder, settings.encoder_threads
            )
        view = MilvusView(settings.milvus_path, enc.dimension)
        await loop.run_in_executor(None, view.ensure)
        applied_raw = await loop.run_in_executor(None, view.watermarks)
        applied: dict[tuple[str, int], int] = {}
        counters: dict[str, int] = {}
        for name, offset in applied_raw.items():
            if name.startswith(COUNTER_PREFIX):
                counters[name] = offset
                continue
            topic, _, partition = name.rpartition(":")
            applied[(topic, int(partition))] = offset
        producer = make_producer(settings.bootstrap or "", f"{settings.app_id}-views")
        await producer.start()
        # --- LLM extractor (optional, I2): answers are recorded in the log before use. Opened
        # before the engine, so a failure never leaves a worker silently using the rules. ---
        if settings.llm_base_url:
            from pipeline.models.llm import open_recorded_extractions

            state["extractions"] = await open_recorded_extractions(
                settings, producer, call_llm=True
            )
        state["engine"] = MemoryEngine(enc, settings.memory, view.load_namespace, applied, counters)
        state["committer"] = ViewCommitter(settings, view, producer)
        state["view"] = view
        state["producer"] = producer
        log.info("views open: milvus=%s applied=%s", settings.milvus_path, applied)

    @app.on_before_shutdown.connect  # type: ignore[misc, arg-type]
    async def close_views(app: faust.App, **_: Any) -> None:
        extractions = state.get("extractions")  # LLM extractor: stop before its producer
        if extractions is not None:
            await extractions.stop()
        producer = state.get("producer")
        if producer is not None:
            await producer.stop()
        view = state.get("view")
        if view is not None:
            view.close()

    @app.timer(interval=10.0)
    async def flush_view() -> None:
        # Sealing segments keeps Milvus queries (bank loads, dense search) off the slow path that
        # scans unflushed rows; maintenance only, no decision reads this clock.
        committer = state.get("committer")
        if committer is not None and committer.unflushed:
            committer.unflushed = False
            await asyncio.get_running_loop().run_in_executor(None, state["view"].flush)

    @app.agent(inputs)
    async def remember(stream: faust.StreamT[bytes]) -> None:
        loop = asyncio.get_running_loop()
        await open_views()
        batches = stream.take_events(  # type: ignore[attr-defined]
            settings.batch_size, within=settings.batch_window_s
        )
        async for events in batches:
            # Within a batch, restore each partition's producer order across the three topics
            # (timestamp, then turns < commands < signals, then offset): the order replay uses.
            events = sorted(
                events,
                key=lambda e: (
                    e.message.partition,
                    e.message.timestamp,
                    ROLE_ORDER[role_of.get(e.message.topic, "turns")],
                    e.message.offset,
                ),
            )
            batch = [
                RawRecord(
                    role=role_of.get(event.message.topic, "turns"),
                    topic=event.message.topic,
                    partition=event.message.partition,
                    offset=event.message.offset,
                    key=event.message.key,
                    value=event.message.value,
                )
                for event in events
            ]
            started = time.perf_counter()
            # --- LLM extractor: look up / call / record (acked) before the engine uses them. ---
            extractions = None
            if "extractions" in state:
                extractions = await state["extractions"].for_batch(batch, state["engine"].applied)
            result = await loop.run_in_executor(None, state["engine"].process, batch, extractions)
            if "extractions" in state:
                result.counts.update(state["extractions"].drain_counts())
            await state["committer"].commit(result)
            elapsed = time.perf_counter() - started
            state["committer"].timings["encode_seconds"] += result.encode_seconds
            state["committer"].timings["batch_seconds"] += elapsed
            state["committer"].write_metrics()
            log.debug("batch of %d in %.1f ms", len(batch), elapsed * 1000)

    return app


def namespace_partition(namespace: str, settings: Settings) -> int:
    return partition_for(namespace, settings.partitions)


def run_worker(settings: Settings, loglevel: str = "info") -> None:
    """Run the Faust worker in this process until SIGINT/SIGTERM."""
    app = create_app(settings)
    worker = faust.Worker(app, loglevel=loglevel, quiet=True)
    worker.execute_from_commandline()
