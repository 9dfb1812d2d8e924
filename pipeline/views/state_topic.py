"""The compacted memory-state topic: writer (worker side) and follower (recall side).

Records are keyed by memory id (compaction keeps the latest) and written to their namespace's
partition, followed by a ``Watermark`` record per input partition, so a follower that has read a
watermark has read every record it covers (same partition, same producer, in order).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.partitioner import DefaultPartitioner

from pipeline.runtime.kafka import client_kwargs
from pipeline.runtime.settings import KafkaSecurity
from schemas.codec import encode
from schemas.errors import WatermarkTimeout
from schemas.memory import MemoryChanged, MemoryRecord, Watermark

log = logging.getLogger(__name__)

WATERMARK_PREFIX = "__watermark__:"
_partitioner = DefaultPartitioner()


def partition_for(namespace: str, partitions: int) -> int:
    """Kafka's default (murmur2) partition for a namespace key, as the producers use it."""
    all_partitions = list(range(partitions))
    return int(_partitioner(namespace.encode(), all_partitions, all_partitions))


def watermark_key(topic: str, partition: int) -> str:
    return f"{WATERMARK_PREFIX}{topic}:{partition}"


async def partition_ids(
    bootstrap: str, topic: str, security: KafkaSecurity | None = None
) -> list[int]:
    """The topic's partitions, or [] when it does not exist (from a metadata request)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **client_kwargs(security))
    await admin.start()
    try:
        described = await admin.describe_topics([topic])
    finally:
        await admin.close()
    for entry in described:
        if entry.get("topic") == topic and entry.get("error_code", 0) == 0:
            return sorted(p["partition"] for p in entry.get("partitions") or [])
    return []


def make_producer(
    bootstrap: str, client_id: str, security: KafkaSecurity | None = None
) -> AIOKafkaProducer:
    # acks=all + idempotence: a crash loses no write and duplicates none (I8).
    return AIOKafkaProducer(
        **client_kwargs(security),
        bootstrap_servers=bootstrap,
        client_id=client_id,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        max_request_size=4 * 1024 * 1024,
        compression_type=None,
    )


class StateTopicWriter:
    def __init__(
        self, producer: AIOKafkaProducer, state_topic: str, updates_topic: str, partitions: int
    ) -> None:
        self._producer = producer
        self._state_topic = state_topic
        self._updates_topic = updates_topic
        self._partitions = partitions

    async def publish(
        self,
        records: Sequence[MemoryRecord],
        erased: Sequence[tuple[str, str]],
        updates: Sequence[MemoryChanged],
        watermarks: dict[tuple[str, int], int],
    ) -> None:
        """Send everything, then wait for every acknowledgement (the caller commits after)."""
        futures: list[asyncio.Future[object]] = []
        for record in records:
            futures.append(
                await self._producer.send(
                    self._state_topic,
                    key=record.id.encode(),
                    value=encode(record),
                    partition=partition_for(record.namespace, self._partitions),
                )
            )
        for namespace, memory_id in erased:
            # A tombstone: compaction removes the record from the topic (hard erase, I8).
            futures.append(
                await self._producer.send(
                    self._state_topic,
                    key=memory_id.encode(),
                    value=None,
                    partition=partition_for(namespace, self._partitions),
                )
            )
        for update in updates:
            futures.append(
                await self._producer.send(
                    self._updates_topic,
                    key=update.namespace.encode(),
                    value=encode(update),
                    partition=partition_for(update.namespace, self._partitions),
                )
            )
        for (topic, partition), offset in sorted(watermarks.items()):
            mark = Watermark(topic=topic, partition=partition, offset=offset)
            futures.append(
                await self._producer.send(
                    self._state_topic,
                    key=watermark_key(topic, partition).encode(),
                    value=encode(mark),
                    partition=partition % self._partitions,
                )
            )
        if futures:
            await asyncio.gather(*futures)


RecordSink = Callable[[MemoryRecord], object]
RemoveSink = Callable[[str], object]


class StateFollower:
    """Tails the state topic from the beginning into callbacks; tracks watermarks (I5)."""

    def __init__(
        self,
        bootstrap: str,
        state_topic: str,
        on_record: RecordSink,
        on_remove: RemoveSink,
        security: KafkaSecurity | None = None,
    ) -> None:
        self._bootstrap = bootstrap
        self._security = security
        self._topic = state_topic
        self._on_record = on_record
        self._on_remove = on_remove
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._watermarks: dict[tuple[str, int], int] = {}
        self._changed = asyncio.Condition()
        self._ids_by_key: dict[bytes, str] = {}
        self.records_applied = 0

    @property
    def watermarks(self) -> dict[tuple[str, int], int]:
        return dict(self._watermarks)

    async def start(self, catch_up_timeout: float = 120.0) -> None:
        partitions = await partition_ids(self._bootstrap, self._topic, self._security)
        if not partitions:
            raise WatermarkTimeout(f"state topic {self._topic} does not exist; create topics first")
        consumer = AIOKafkaConsumer(
            **client_kwargs(self._security),
            bootstrap_servers=self._bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=8 * 1024 * 1024,
            fetch_max_bytes=64 * 1024 * 1024,
        )
        await consumer.start()
        assignment = [TopicPartition(self._topic, p) for p in sorted(partitions)]
        consumer.assign(assignment)
        await consumer.seek_to_beginning(*assignment)
        self._consumer = consumer
        end_offsets = await consumer.end_offsets(assignment)
        self._task = asyncio.create_task(self._run(), name="state-follower")
        await self._wait_positions(end_offsets, catch_up_timeout)

    async def _wait_positions(self, targets: dict[TopicPartition, int], timeout: float) -> None:
        assert self._consumer is not None
        consumer = self._consumer
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            behind = [tp for tp, end in targets.items() if await consumer.position(tp) < end]
            if not behind:
                return
            if asyncio.get_running_loop().time() > deadline:
                raise WatermarkTimeout(f"state follower did not catch up within {timeout}s")
            await asyncio.sleep(0.02)

    async def _run(self) -> None:
        assert self._consumer is not None
        while True:
            batches = await self._consumer.getmany(timeout_ms=200, max_records=5000)
            if not batches:
                continue
            marks: list[Watermark] = []
            for messages in batches.values():
                for message in messages:
                    key = message.key or b""
                    if key.startswith(WATERMARK_PREFIX.encode()):
                        if message.value is not None:
                            marks.append(Watermark.model_validate(orjson.loads(message.value)))
                        continue
                    if message.value is None:
                        self._on_remove(key.decode())
                        continue
                    try:
                        record = MemoryRecord.model_validate(orjson.loads(message.value))
                    except ValueError:
                        log.exception("unreadable state record at offset %s", message.offset)
                        continue
                    self._on_record(record)
                    self.records_applied += 1
            async with self._changed:
                for mark in marks:
                    key2 = (mark.topic, mark.partition)
                    self._watermarks[key2] = max(mark.offset, self._watermarks.get(key2, -1))
                self._changed.notify_all()

    async def wait_for(self, topic: str, partition: int, offset: int, timeout: float) -> None:
        """Block until the views have applied ``offset`` of ``topic``/``partition``."""

        def reached() -> bool:
            return self._watermarks.get((topic, partition), -1) >= offset

        try:
            async with self._changed:
                await asyncio.wait_for(self._changed.wait_for(reached), timeout)
        except TimeoutError as error:
            applied = self._watermarks.get((topic, partition), -1)
            raise WatermarkTimeout(
                f"views applied {topic}[{partition}] up to offset {applied}, waited {timeout}s "
                f"for offset {offset}; is the worker running?"
            ) from error

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._consumer is not None:
            await self._consumer.stop()
