"""Bounded reads of the log for operators: one message, a page of the tail, lags, a ping.

The dashboard and the health checks read Kafka through this one reader. Every read is bounded:
a range of offsets with a count cap and a deadline, never "scan the topic" — a request costs
at most ``max_records`` messages however long the log grows.

Two consumers (no group, nothing committed): one fetches messages under a lock (assigning,
seeking and fetching are one step, and it is unassigned after each read), the other only asks for
offsets — a broker answers one connection's requests in order, so an offsets request queued
behind a waiting fetch would wait out the fetch's long poll. Both read committed data only
(``read_committed``): records of an aborted transaction never show.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from pipeline.runtime.kafka import client_kwargs, stop_consumer
from pipeline.runtime.settings import KafkaSecurity
from schemas.errors import HindsightError

T = TypeVar("T")

READ_DEADLINE_S = 5.0
FETCH_WAIT_MS = 50
MAX_RECORDS = 5_000


class LogUnavailable(HindsightError):
    """The broker did not answer in time; the message names the request."""


@dataclass(frozen=True)
class LogMessage:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True)
class GroupLag:
    """One partition of a consumer group: committed offset, end offset and the gap."""

    group: str
    topic: str
    partition: int
    committed: int  # -1: the group has committed nothing for this partition yet
    end: int

    @property
    def lag(self) -> int:
        return self.end - max(self.committed, 0)


class LogReader:
    def __init__(
        self,
        bootstrap: str,
        client_id: str = "hindsight-reader",
        security: KafkaSecurity | None = None,
    ) -> None:
        self._bootstrap = bootstrap
        self._security = security
        self._client_id = client_id
        self._consumer: AIOKafkaConsumer | None = None
        self._offsets: AIOKafkaConsumer | None = None
        self._admin: AIOKafkaAdminClient | None = None
        self._lock = asyncio.Lock()
        self._partitions: dict[str, list[int]] = {}

    def _new_consumer(self, role: str) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            **client_kwargs(self._security),
            bootstrap_servers=self._bootstrap,
            client_id=f"{self._client_id}-{role}",
            group_id=None,
            enable_auto_commit=False,
            isolation_level="read_committed",
            request_timeout_ms=int(READ_DEADLINE_S * 1000),
            max_partition_fetch_bytes=4 * 1024 * 1024,
            # At the end of a range the broker holds a fetch this long for more data.
            fetch_max_wait_ms=FETCH_WAIT_MS,
        )

    async def start(self) -> None:
        self._consumer = self._new_consumer("fetch")
        await self._consumer.start()
        self._offsets = self._new_consumer("offsets")
        await self._offsets.start()
        self._admin = AIOKafkaAdminClient(
            **client_kwargs(self._security),
            bootstrap_servers=self._bootstrap,
            client_id=f"{self._client_id}-admin",
            request_timeout_ms=int(READ_DEADLINE_S * 1000),
        )
        await self._admin.start()

    async def stop(self) -> None:
        for consumer in (self._consumer, self._offsets):
            if consumer is not None:
                await stop_consumer(consumer)
        if self._admin is not None:
            await self._admin.close()

    @property
    def _c(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise HindsightError("LogReader: start() it first")
        return self._consumer

    @property
    def _o(self) -> AIOKafkaConsumer:
        if self._offsets is None:
            raise HindsightError("LogReader: start() it first")
        return self._offsets

    @property
    def _a(self) -> AIOKafkaAdminClient:
        if self._admin is None:
            raise HindsightError("LogReader: start() it first")
        return self._admin

    async def _bounded(self, what: str, call: Awaitable[T]) -> T:
        try:
            return await asyncio.wait_for(call, READ_DEADLINE_S)
        except (TimeoutError, KafkaError) as error:
            raise LogUnavailable(f"{what}: {type(error).__name__} {error}".strip()) from error

    # -- metadata ------------------------------------------------------------------------------
    async def ping(self) -> int:
        """Ask the cluster who its brokers are; returns how many answered in the metadata."""
        described = await self._bounded("describe cluster", self._a.describe_cluster())
        return len(described.get("brokers") or [])

    async def partitions(self, topic: str) -> list[int]:
        """The topic's partitions ([] when it does not exist); cached, counts do not shrink."""
        if topic not in self._partitions:
            described = await self._bounded(
                f"describe topic {topic}", self._a.describe_topics([topic])
            )
            found = [
                sorted(p["partition"] for p in entry.get("partitions") or [])
                for entry in described
                if entry.get("topic") == topic and entry.get("error_code", 0) == 0
            ]
            if not found or not found[0]:
                return []
            self._partitions[topic] = found[0]
        return list(self._partitions[topic])

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        wanted = list(partitions)
        if not wanted:
            return {}
        return await self._bounded("end offsets", self._o.end_offsets(wanted))

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        wanted = list(partitions)
        if not wanted:
            return {}
        return await self._bounded("beginning offsets", self._o.beginning_offsets(wanted))

    async def bounds(self, tp: TopicPartition) -> tuple[int, int]:
        """(first offset still in the log, next offset to be written)."""
        begin = (await self.beginning_offsets([tp]))[tp]
        end = (await self.end_offsets([tp]))[tp]
        return begin, end

    # -- reading messages ----------------------------------------------------------------------
    async def read_range(
        self, tp: TopicPartition, start: int, stop: int, max_records: int = MAX_RECORDS
    ) -> list[LogMessage]:
        """Messages with ``start <= offset < stop``, oldest first, at most ``max_records``.

        Compacted topics have gaps; the read ends at ``stop``, at the cap or at the deadline.
        """
        max_records = min(max_records, MAX_RECORDS)
        begin, end = await self.bounds(tp)
        start, stop = max(start, begin), min(stop, end)
        if start >= stop or max_records <= 0:
            return []
        found: list[LogMessage] = []
        consumer = self._c
        async with self._lock:
            consumer.assign([tp])
            try:
                await self._fetch(consumer, tp, start, stop, max_records, found)
            finally:
                consumer.assign([])  # no fetch keeps polling between reads
        return found[:max_records]

    @staticmethod
    async def _fetch(
        consumer: AIOKafkaConsumer,
        tp: TopicPartition,
        start: int,
        stop: int,
        max_records: int,
        found: list[LogMessage],
    ) -> None:
        consumer.seek(tp, start)
        deadline = time.monotonic() + READ_DEADLINE_S
        while len(found) < max_records and time.monotonic() < deadline:
            batches = await consumer.getmany(
                tp, timeout_ms=200, max_records=min(500, max_records - len(found))
            )
            for message in batches.get(tp, []):
                if message.offset >= stop:
                    break
                found.append(
                    LogMessage(
                        message.topic,
                        message.partition,
                        message.offset,
                        message.timestamp,
                        message.key,
                        message.value,
                        tuple(message.headers or ()),
                    )
                )
            if await consumer.position(tp) >= stop:
                break

    async def read_at(self, topic: str, partition: int, offset: int) -> LogMessage | None:
        """The message at exactly ``offset``, or None (compacted away, expired, not there)."""
        found = await self.read_range(TopicPartition(topic, partition), offset, offset + 1, 1)
        return found[0] if found and found[0].offset == offset else None

    async def read_tail(
        self, topic: str, partition: int, count: int, skip: int = 0
    ) -> tuple[list[LogMessage], int, int]:
        """The ``count`` offsets before ``end - skip``, oldest first; with the scanned range.

        Returns (messages, first scanned offset, the partition's first offset): a page is older
        history when its first scanned offset is above the partition's first offset.
        """
        tp = TopicPartition(topic, partition)
        begin, end = await self.bounds(tp)
        stop = max(begin, end - max(0, skip))
        start = max(begin, stop - max(0, count))
        return await self.read_range(tp, start, stop, count), start, begin

    # -- consumer groups -----------------------------------------------------------------------
    async def groups(self, prefix: str, limit: int = 20) -> list[str]:
        """Consumer groups whose id starts with ``prefix`` (the pipeline's app id), sorted."""
        listed = await self._bounded("list consumer groups", self._a.list_consumer_groups())
        return sorted(str(entry[0]) for entry in listed if str(entry[0]).startswith(prefix))[:limit]

    async def group_lags(self, groups: Iterable[str]) -> list[GroupLag]:
        rows: list[GroupLag] = []
        for group in groups:
            committed = await self._bounded(
                f"offsets of group {group}", self._a.list_consumer_group_offsets(group)
            )
            ends = await self.end_offsets(committed)
            for tp in sorted(committed, key=lambda t: (t.topic, t.partition)):
                rows.append(
                    GroupLag(group, tp.topic, tp.partition, committed[tp].offset, ends.get(tp, 0))
                )
        return rows
