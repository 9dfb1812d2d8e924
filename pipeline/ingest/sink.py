"""Stage ``sink``: Milvus as a view of the state topic (I1). Nothing reads Milvus to decide.

Follows ``hindsight.memory-state.v1`` (committed transactions only) in its own consumer group and
upserts records / deletes tombstoned ids by memory id — idempotent, so at-least-once delivery is
enough (I4). The input watermarks it passes are stored beside the rows, so the view says how
fresh it is (I5). One sink per Milvus Lite file (one process may open it); any number against a
Milvus server, sharing the partitions. Collections carry the deployment's topic prefix, so
deployments sharing a Milvus server never see each other's memories.

Records arrive sealed (docs/ERASURE.md) and are opened with the data-key store; a record whose
key was destroyed is deleted like a tombstone. Milvus keeps deleted rows in its files, so a batch
that deleted something ends with :meth:`MilvusView.purge`.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Iterable

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import ConsumerStoppedError
from mode import Service

from pipeline.crypto.envelope import KeyLookup
from pipeline.crypto.keystore import TopicKeyStore, open_key_store
from pipeline.runtime.kafka import client_kwargs, stop_consumer
from pipeline.runtime.metrics import metrics
from pipeline.runtime.settings import Settings
from pipeline.runtime.stage_stats import StageStats
from pipeline.views.milvus import DEFAULT_COLLECTION, MilvusView
from pipeline.views.milvus import watermark_key as milvus_watermark_key
from pipeline.views.state_topic import (
    RecordEntry,
    Shredded,
    Tombstone,
    Unopened,
    WatermarkEntry,
    committed_consumer,
    parse_state_message,
)
from schemas.memory import MemoryRecord
from topics.catalogue import consumer_group, topic_names

log = logging.getLogger("hindsight.sink")

STAGE = "sink"
FLUSH_EVERY_S = 10.0


def collection_for(topic_prefix: str) -> str:
    """The Milvus collection of a deployment: the default name plus its topic prefix.

    Milvus names allow letters, digits and underscores; other characters become ``_xx`` (their
    hex code), so distinct prefixes never map to one collection.
    """
    if not topic_prefix:
        return DEFAULT_COLLECTION
    safe = re.sub(r"[^A-Za-z0-9]", lambda m: f"_{ord(m.group(0)):02x}", topic_prefix)
    return f"{DEFAULT_COLLECTION}__{safe}"


class ViewBatch:
    """What a batch of state-topic messages asks of the view, folded in log order."""

    def __init__(self, keys: KeyLookup | None = None) -> None:
        self.keys = keys
        self.upserts: dict[str, MemoryRecord] = {}
        self.deletes: set[str] = set()
        self.watermarks: dict[str, int] = {}
        self.unopened = 0

    def add(self, key: bytes | None, value: bytes | None) -> None:
        entry = parse_state_message(key, value, self.keys)
        if isinstance(entry, RecordEntry):
            self.deletes.discard(entry.record.id)
            self.upserts[entry.record.id] = entry.record
        elif isinstance(entry, Tombstone | Shredded):
            self.upserts.pop(entry.memory_id, None)
            self.deletes.add(entry.memory_id)
        elif isinstance(entry, Unopened):
            self.unopened += 1
            log.error("state record %s not readable: %s", entry.memory_id, entry.reason)
        elif isinstance(entry, WatermarkEntry):
            mark = entry.watermark
            name = milvus_watermark_key(mark.topic, mark.partition)
            self.watermarks[name] = max(mark.offset, self.watermarks.get(name, -1))

    def write(self, view: MilvusView) -> None:
        """Upserts and deletes first, watermarks after them (a view never claims what it lacks)."""
        if self.upserts:
            view.upsert(list(self.upserts.values()))
        if self.deletes:
            present = view.get(sorted(self.deletes))
            if present:
                view.delete(r.id for r in present)
                view.flush()
                view.purge()  # a hard erase leaves the segment files too
        view.set_watermarks(self.watermarks)


def apply_to_view(
    view: MilvusView,
    messages: Iterable[tuple[bytes | None, bytes | None]],
    keys: KeyLookup | None = None,
) -> int:
    """Fold state-topic messages into the view; returns how many there were (replay uses it)."""
    batch = ViewBatch(keys)
    count = 0
    for key, value in messages:
        batch.add(key, value)
        count += 1
    batch.write(view)
    return count


class SinkStage(Service):
    """The sink consumer group member."""

    def __init__(self, settings: Settings, dimension: int, milvus_uri: str | None = None) -> None:
        super().__init__()
        if not settings.bootstrap:
            raise ValueError("the sink stage needs settings.bootstrap (a running Kafka)")
        self.settings = settings
        self.dimension = dimension
        self.milvus_uri = milvus_uri or settings.milvus_path
        self.group_id = consumer_group(settings.app_id, STAGE)
        self.state_topic = topic_names(settings.topic_prefix)["memory_state"]
        self._consumer: AIOKafkaConsumer | None = None
        self._view: MilvusView | None = None
        self._keys: TopicKeyStore | None = None
        self._dirty = False
        self.stats = StageStats(STAGE)
        # Held while a batch is written: shutdown waits for it before closing the view, so a
        # stop never cuts a Milvus write in half.
        self._batch = asyncio.Lock()

    async def on_start(self) -> None:
        loop = asyncio.get_running_loop()
        self._keys = await open_key_store(self.settings)
        view = MilvusView(
            self.milvus_uri, self.dimension, collection_for(self.settings.topic_prefix)
        )
        await loop.run_in_executor(None, view.ensure)
        self._view = view
        consumer = committed_consumer(
            bootstrap_servers=self.settings.bootstrap,
            group_id=self.group_id,
            client_id=self.group_id,
            session_timeout_ms=int(self.settings.session_timeout_s * 1000),
            heartbeat_interval_ms=int(self.settings.heartbeat_interval_s * 1000),
            **client_kwargs(self.settings.kafka),
        )
        await consumer.start()
        consumer.subscribe([self.state_topic])
        self._consumer = consumer

    @Service.timer(2.0)
    async def _write_stats(self) -> None:
        self.stats.write(self.settings.data_dir)

    async def on_stop(self) -> None:
        async with self._batch:  # the batch in flight is written and committed first
            self.stats.write(self.settings.data_dir)
            if self._consumer is not None:
                await stop_consumer(self._consumer)
            if self._keys is not None:
                await self._keys.stop()
        if self._view is not None:
            view, self._view = self._view, None
            await asyncio.get_running_loop().run_in_executor(None, view.flush)
            view.close()

    @Service.task
    async def _consume(self) -> None:
        assert self._consumer is not None and self._view is not None
        consumer, view = self._consumer, self._view
        loop = asyncio.get_running_loop()
        last_flush = time.monotonic()
        while not self.should_stop:
            try:
                batches = await consumer.getmany(timeout_ms=500, max_records=2000)
            except ConsumerStoppedError:
                if self.should_stop:
                    return
                raise
            messages = [(m.key, m.value) for batch in batches.values() for m in batch]
            if messages and self._keys is not None:
                with self.stats.timed("keys"):
                    await self._keys.wait_for_values(
                        [value for _, value in messages], self.settings.key_wait_s
                    )
            async with self._batch:
                if self.should_stop:
                    return  # not committed: the next sink reads these again
                if messages:
                    started = time.perf_counter()
                    ring = None if self._keys is None else self._keys.ring
                    with self.stats.timed("view"):
                        count = await loop.run_in_executor(
                            None, apply_to_view, view, messages, ring
                        )
                    metrics().events_in.labels(STAGE, "MemoryRecord").inc(count)
                    metrics().batch_seconds.labels(STAGE).observe(time.perf_counter() - started)
                    await consumer.commit()  # after the view has them: at-least-once, idempotent
                    self.stats.counts["state_messages"] += count
                    self._dirty = True
                if self._dirty and time.monotonic() - last_flush >= FLUSH_EVERY_S:
                    # Sealed segments keep Milvus searches off the slow unflushed path.
                    with self.stats.timed("flush"):
                        await loop.run_in_executor(None, view.flush)
                    self._dirty = False
                    last_flush = time.monotonic()
