"""The compacted memory-state topic: its key scheme, restore reads and the recall-side follower.

It is ``consolidate``'s changelog and everybody's current state (I1: derived, rebuilt by replay).
One partition per input partition, written only inside ``consolidate``'s transactions, so a
``read_committed`` reader sees whole batches or nothing. Keys:

``<memory id>``
    the ``MemoryRecord`` (a tombstone once erased: compaction then removes it, I8);
``__bank__:<namespace>``
    the namespace's ``BankCounters`` (its consolidation schedule);
``__watermark__:<input topic>:<partition>``
    the ``Watermark``: the last input offset applied, written after the records it covers (I5);
``__erasure__:<namespace>:<erase event id>``
    an ``ErasureRecorded``: what an erase took (plain, kept: the erasure stays an event).

Records are sealed with their memory's data key (docs/ERASURE.md); readers open them with a key
store. A record whose key was destroyed reads as ``Shredded`` (it was erased: treat it as gone).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.partitioner import DefaultPartitioner

from pipeline.crypto.envelope import KeyLookup, open_envelope, sealed_envelope
from pipeline.runtime.kafka import client_kwargs, stop_consumer
from pipeline.runtime.settings import KafkaSecurity
from schemas.data_keys import ERASURE_PREFIX, ErasureRecorded
from schemas.errors import (
    DataKeyDestroyed,
    HindsightError,
    InvalidEvent,
    UnknownDataKey,
    WatermarkTimeout,
)
from schemas.memory import BankCounters, MemoryRecord, Watermark

if TYPE_CHECKING:
    from pipeline.crypto.keystore import TopicKeyStore

log = logging.getLogger(__name__)

WATERMARK_PREFIX = "__watermark__:"
BANK_PREFIX = "__bank__:"
_partitioner = DefaultPartitioner()


def partition_for(namespace: str, partitions: int) -> int:
    """Kafka's default (murmur2) partition for a namespace key, as the producers use it."""
    all_partitions = list(range(partitions))
    return int(_partitioner(namespace.encode(), all_partitions, all_partitions))


def watermark_key(topic: str, partition: int) -> bytes:
    return f"{WATERMARK_PREFIX}{topic}:{partition}".encode()


def bank_key(namespace: str) -> bytes:
    return f"{BANK_PREFIX}{namespace}".encode()


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
        max_request_size=8 * 1024 * 1024,
        compression_type=None,
    )


def make_transactional_producer(
    bootstrap: str, transactional_id: str, security: KafkaSecurity | None = None
) -> AIOKafkaProducer:
    """A producer whose writes become visible all at once, with the consumed offsets (I4).

    Starting it fences any older producer with the same id: a zombie owner of the partition
    can no longer commit.
    """
    return AIOKafkaProducer(
        **client_kwargs(security),
        bootstrap_servers=bootstrap,
        client_id=transactional_id,
        transactional_id=transactional_id,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        max_request_size=8 * 1024 * 1024,
    )


def committed_consumer(**kwargs: object) -> AIOKafkaConsumer:
    """A consumer that only sees committed transactions (no group unless given).

    Pass ``**client_kwargs(settings.kafka)`` among ``kwargs`` on a secured cluster."""
    return AIOKafkaConsumer(
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=8 * 1024 * 1024,
        fetch_max_bytes=64 * 1024 * 1024,
        **kwargs,  # type: ignore[arg-type]
    )


# -- one message of the state topic --------------------------------------------------------
@dataclass(frozen=True)
class RecordEntry:
    record: MemoryRecord


@dataclass(frozen=True)
class Tombstone:
    memory_id: str


@dataclass(frozen=True)
class CountersEntry:
    counters: BankCounters | None
    namespace: str


@dataclass(frozen=True)
class WatermarkEntry:
    watermark: Watermark


@dataclass(frozen=True)
class ErasureEntry:
    erasure: ErasureRecorded


@dataclass(frozen=True)
class Shredded:
    """A record sealed with a destroyed key: it was erased (its tombstone follows or went)."""

    memory_id: str
    key_id: str


@dataclass(frozen=True)
class Unopened:
    """A sealed record this reader cannot open: no key store, or a key it has never seen."""

    memory_id: str
    key_id: str
    reason: str


StateEntry = (
    RecordEntry | Tombstone | CountersEntry | WatermarkEntry | ErasureEntry | Shredded | Unopened
)


def parse_state_message(
    key: bytes | None, value: bytes | None, keys: KeyLookup | None = None
) -> StateEntry:
    text = (key or b"").decode("utf-8", "replace")
    if text.startswith(WATERMARK_PREFIX):
        if value is None:
            raise ValueError(f"state key {text!r}: a watermark cannot be a tombstone")
        return WatermarkEntry(Watermark.model_validate(orjson.loads(value)))
    if text.startswith(BANK_PREFIX):
        namespace = text[len(BANK_PREFIX) :]
        counters = None if value is None else BankCounters.model_validate(orjson.loads(value))
        return CountersEntry(counters, namespace)
    if text.startswith(ERASURE_PREFIX):
        if value is None:
            raise ValueError(f"state key {text!r}: an erasure record cannot be a tombstone")
        return ErasureEntry(ErasureRecorded.model_validate(orjson.loads(value)))
    if value is None:
        return Tombstone(text)
    envelope = sealed_envelope(value)
    if envelope is None:
        return RecordEntry(MemoryRecord.model_validate(orjson.loads(value)))
    try:
        content = open_envelope(envelope, keys, "memory_state")
    except DataKeyDestroyed:
        return Shredded(text, envelope.key_id)
    except (UnknownDataKey, InvalidEvent) as error:
        return Unopened(text, envelope.key_id, str(error))
    return RecordEntry(MemoryRecord.model_validate(orjson.loads(content)))


@dataclass
class PartitionState:
    """What one state-topic partition holds: everything ``consolidate`` needs to resume."""

    records: dict[str, MemoryRecord] = field(default_factory=dict)
    counters: dict[str, BankCounters] = field(default_factory=dict)
    watermark: Watermark | None = None
    erasures: list[ErasureRecorded] = field(default_factory=list)
    unopened: list[str] = field(default_factory=list)  # records this reader could not open
    end_offset: int = 0
    counts: Counter[str] = field(default_factory=Counter)

    def fold(self, entry: StateEntry) -> None:
        if isinstance(entry, RecordEntry):
            self.records[entry.record.id] = entry.record
        elif isinstance(entry, Tombstone | Shredded):
            self.records.pop(entry.memory_id, None)
            self.counts["shredded"] += isinstance(entry, Shredded)
        elif isinstance(entry, Unopened):
            self.records.pop(entry.memory_id, None)
            self.unopened.append(f"{entry.memory_id}: {entry.reason}")
        elif isinstance(entry, CountersEntry):
            if entry.counters is None:
                self.counters.pop(entry.namespace, None)
            else:
                self.counters[entry.namespace] = entry.counters
        elif isinstance(entry, ErasureEntry):
            self.erasures.append(entry.erasure)
        else:
            self.watermark = entry.watermark


async def read_until_end(
    consumer: AIOKafkaConsumer,
    partitions: list[TopicPartition],
    on_message: Callable[[TopicPartition, bytes | None, bytes | None], None],
    timeout_s: float,
    keys: TopicKeyStore | None = None,
    key_wait_s: float = 15.0,
) -> dict[TopicPartition, int]:
    """Read the assigned ``partitions`` from where they are to their current end; bounded.

    The end is taken first; with ``read_committed`` the position passes transaction markers, so
    "position reached the end offset" is a sound completion test (no high-watermark guessing).
    With ``keys``, each fetched batch first waits for the data keys of its sealed values.
    """
    ends = await consumer.end_offsets(partitions)
    pending = {tp for tp in partitions if await consumer.position(tp) < ends[tp]}
    deadline = time.monotonic() + timeout_s
    while pending:
        fetched = await consumer.getmany(*pending, timeout_ms=200, max_records=5000)
        if keys is not None and fetched:
            values = [m.value for messages in fetched.values() for m in messages]
            await keys.wait_for_values(values, key_wait_s)
        for tp, messages in fetched.items():
            for message in messages:
                on_message(tp, message.key, message.value)
        for tp in list(pending):
            if await consumer.position(tp) >= ends[tp]:
                pending.discard(tp)
        if pending and time.monotonic() > deadline:
            behind = {str(tp): ends[tp] for tp in pending}
            raise WatermarkTimeout(f"could not read up to {behind} within {timeout_s:.0f}s")
    return ends


async def read_state_partition(
    bootstrap: str,
    topic: str,
    partition: int,
    timeout_s: float = 120.0,
    security: KafkaSecurity | None = None,
    *,
    keys: TopicKeyStore | None = None,
    key_wait_s: float = 15.0,
) -> PartitionState:
    """Restore read: fold one state-topic partition from its beginning (committed data only)."""
    state = PartitionState()
    consumer = committed_consumer(
        **client_kwargs(security), bootstrap_servers=bootstrap, group_id=None
    )
    await consumer.start()
    ring = None if keys is None else keys.ring
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)

        def fold(_: TopicPartition, key: bytes | None, value: bytes | None) -> None:
            state.fold(parse_state_message(key, value, ring))

        ends = await read_until_end(consumer, [tp], fold, timeout_s, keys, key_wait_s)
        state.end_offset = ends[tp]
    finally:
        await stop_consumer(consumer)
    return state


RecordSink = Callable[[MemoryRecord], object]
RemoveSink = Callable[[str], object]


class FollowerFailed(HindsightError):
    """The state follower stopped on an error: recall no longer sees new memories."""


class StateFollower:
    """Tails the state topic from the beginning into callbacks; tracks watermarks (I5).

    A failure is never swallowed: the follower stops, keeps the error, ``failure`` reports it (the
    API's readiness turns red) and every ``wait_for`` raises it instead of timing out.
    """

    def __init__(
        self,
        bootstrap: str,
        state_topic: str,
        on_record: RecordSink,
        on_remove: RemoveSink,
        on_watermark: Callable[[Watermark], object] | None = None,
        security: KafkaSecurity | None = None,
        keys: TopicKeyStore | None = None,
        key_wait_s: float = 15.0,
    ) -> None:
        self._bootstrap = bootstrap
        self._security = security
        self._topic = state_topic
        self._on_record = on_record
        self._on_remove = on_remove
        self._on_watermark = on_watermark
        self._keys = keys
        self._key_wait_s = key_wait_s
        self.counts: Counter[str] = Counter()
        self._warned: set[str] = set()
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._watermarks: dict[tuple[str, int], int] = {}
        self._changed = asyncio.Condition()
        self.records_applied = 0
        self.failure: BaseException | None = None

    @property
    def watermarks(self) -> dict[tuple[str, int], int]:
        return dict(self._watermarks)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def start(self, catch_up_timeout: float = 120.0) -> None:
        partitions = await partition_ids(self._bootstrap, self._topic, self._security)
        if not partitions:
            raise WatermarkTimeout(f"state topic {self._topic} does not exist; create topics first")
        consumer = committed_consumer(
            **client_kwargs(self._security), bootstrap_servers=self._bootstrap, group_id=None
        )
        await consumer.start()
        assignment = [TopicPartition(self._topic, p) for p in sorted(partitions)]
        consumer.assign(assignment)
        await consumer.seek_to_beginning(*assignment)
        self._consumer = consumer
        # Catch up before serving, so the first recall sees what the log already holds.
        await read_until_end(
            consumer, assignment, self._absorb_one, catch_up_timeout, self._keys, self._key_wait_s
        )
        await self._publish_marks()
        self._task = asyncio.create_task(self._run(), name="state-follower")

    def _absorb_one(self, _: TopicPartition, key: bytes | None, value: bytes | None) -> None:
        entry = parse_state_message(key, value, None if self._keys is None else self._keys.ring)
        if isinstance(entry, RecordEntry):
            self._on_record(entry.record)
            self.records_applied += 1
        elif isinstance(entry, Tombstone | Shredded):
            self._on_remove(entry.memory_id)
            self.counts["shredded"] += isinstance(entry, Shredded)
        elif isinstance(entry, Unopened):
            self.counts["unopened"] += 1
            if self._keys is not None and entry.key_id not in self._warned:
                self._warned.add(entry.key_id)
                log.error("state record %s not readable: %s", entry.memory_id, entry.reason)
        elif isinstance(entry, WatermarkEntry):
            mark = entry.watermark
            key2 = (mark.topic, mark.partition)
            self._watermarks[key2] = max(mark.offset, self._watermarks.get(key2, -1))
            if self._on_watermark is not None:
                self._on_watermark(mark)

    async def _publish_marks(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _run(self) -> None:
        assert self._consumer is not None
        try:
            while True:
                batches = await self._consumer.getmany(timeout_ms=200, max_records=5000)
                if self._keys is not None and batches:
                    values = [m.value for messages in batches.values() for m in messages]
                    await self._keys.wait_for_values(values, self._key_wait_s)
                for tp, messages in batches.items():
                    for message in messages:
                        self._absorb_one(tp, message.key, message.value)
                if batches:
                    await self._publish_marks()
        except asyncio.CancelledError:
            raise
        except BaseException as error:
            log.exception("state follower of %s failed; recall stops updating", self._topic)
            self.failure = error
            await self._publish_marks()  # wake waiters so they see the failure
            raise

    def check(self) -> None:
        """Raise ``FollowerFailed`` naming the cause when the follower has stopped on an error."""
        if self.failure is not None:
            raise FollowerFailed(
                f"the state follower of {self._topic} failed: {self.failure!r}; "
                "recall is not seeing new memories"
            ) from self.failure

    async def wait_for(self, topic: str, partition: int, offset: int, timeout: float) -> None:
        """Block until consolidation has applied ``offset`` of ``topic``/``partition``."""

        def reached() -> bool:
            return (
                self.failure is not None or self._watermarks.get((topic, partition), -1) >= offset
            )

        self.check()
        try:
            async with self._changed:
                await asyncio.wait_for(self._changed.wait_for(reached), timeout)
        except TimeoutError as error:
            applied = self._watermarks.get((topic, partition), -1)
            raise WatermarkTimeout(
                f"views applied {topic}[{partition}] up to offset {applied}, waited {timeout}s "
                f"for offset {offset}; are the prepare and consolidate stages running?"
            ) from error
        self.check()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            # A failed task re-raises its error here; it was logged and kept in ``failure``.
            with contextlib.suppress(BaseException):
                await self._task
        if self._consumer is not None:
            await stop_consumer(self._consumer)
