"""Stage ``consolidate``: one event at a time in partition order, state in partition tables.

Reads ``hindsight.prepared.v1`` in its own consumer group and applies each prepared event to its
namespace's bank: segmentation, dedup/confirm, links, supersede, decay and cooling,
reinforcement, forget and erase (``pipeline.memory.decisions``). No model is loaded here.

State lives in :class:`PartitionTables`, one per assigned partition, whose changelog is the
compacted state topic: restored from it when the partition is assigned, dropped when it is
revoked. Each batch commits in one Kafka transaction together with the consumed offsets
(``pipeline.ingest.commit``), so the tables, the state topic and the group's position always
describe the same prefix of the log — exact by construction, across crashes and rebalances (I4).
Prepared events are at-least-once (``prepare`` may re-send after a crash): an input offset the
tables already applied is skipped.

Why not Faust tables here: Faust writes a table's changelog as you set keys and commits offsets
on its own timer, so a batch can be half in the changelog when a process dies, and its
``exactly_once`` mode has open reports of lost and duplicated events after kill -9
(faust-streaming #47, #517; robinhood/faust #340). A transactional loop on aiokafka, with tables
that follow partitions through a rebalance listener, makes the property hold by construction.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import ConsumerStoppedError, KafkaError, ProducerFenced
from mode import Service

from pipeline.ingest.commit import PartitionOutput, TopicsOut, commit_output
from pipeline.memory.bank import NamespaceBank, Position
from pipeline.memory.decisions import (
    PreparedTurn,
    decide_after_turn,
    decide_command,
    decide_signal,
    decide_turn,
)
from pipeline.runtime.kafka import client_kwargs, stop_consumer
from pipeline.runtime.metrics import dead_letter_reason, metrics
from pipeline.runtime.settings import MemoryPolicy, Settings
from pipeline.runtime.stage_stats import StageStats
from pipeline.views.state_topic import (
    PartitionState,
    committed_consumer,
    make_transactional_producer,
    read_state_partition,
)
from schemas.codec import decode_prepared
from schemas.errors import InvalidEvent
from schemas.events import CommandIssued, MemoriesRecalled, TurnRecorded
from schemas.memory import DeadLetter, Watermark
from schemas.prepared import EventPrepared
from topics.catalogue import consumer_group, topic_names

log = logging.getLogger("hindsight.consolidate")

STAGE = "consolidate"


@dataclass(frozen=True)
class PreparedMessage:
    """One message of a prepared topic."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def _dead_letter(message: PreparedMessage, reason: str, field: str | None) -> DeadLetter:
    return DeadLetter(
        stage=STAGE,
        reason=reason,
        field=field,
        source_topic=message.topic,
        source_partition=message.partition,
        source_offset=message.offset,
        original_key_b64=base64.b64encode(message.key).decode()
        if message.key is not None
        else None,
        original_value_b64=base64.b64encode(message.value or b"").decode(),
    )


@dataclass
class PartitionTables:
    """Consolidation state of one partition: its namespaces' banks and how far it has applied.

    Pure: no I/O and no clock. ``apply`` folds one prepared message in and reports what changed
    into a ``PartitionOutput``; the caller commits that output (live or replay alike).
    """

    partition: int
    events_topic: str
    policy: MemoryPolicy
    banks: dict[str, NamespaceBank] = field(default_factory=dict)
    applied_offset: int = -1  # last input offset applied (the watermark)
    applied_timestamp_ms: int | None = None

    @classmethod
    def restore(
        cls, partition: int, events_topic: str, policy: MemoryPolicy, state: PartitionState
    ) -> PartitionTables:
        by_namespace: dict[str, list] = {}
        for record in state.records.values():
            by_namespace.setdefault(record.namespace, []).append(record)
        namespaces = set(by_namespace) | set(state.counters)
        banks = {
            ns: NamespaceBank.load(ns, by_namespace.get(ns, []), state.counters.get(ns))
            for ns in sorted(namespaces)
        }
        mark = state.watermark
        return cls(
            partition,
            events_topic,
            policy,
            banks,
            applied_offset=mark.offset if mark is not None else -1,
            applied_timestamp_ms=mark.input_timestamp_ms if mark is not None else None,
        )

    def bank(self, namespace: str) -> NamespaceBank:
        bank = self.banks.get(namespace)
        if bank is None:
            bank = self.banks[namespace] = NamespaceBank(namespace)
        return bank

    def apply(self, message: PreparedMessage, out: PartitionOutput) -> None:
        out.last_prepared_offset = max(out.last_prepared_offset, message.offset)
        try:
            prepared = decode_prepared(message.value)
        except InvalidEvent as error:
            # Without a readable source we cannot know which input offset this was: keep the
            # bytes and move on (the prepared topic was written by a foreign or broken producer).
            out.dead_letters.append(_dead_letter(message, error.reason, error.field))
            out.counts["dead_letters"] += 1
            return
        source = prepared.source
        if source.partition != self.partition:
            out.dead_letters.append(
                _dead_letter(
                    message, f"prepared for input partition {source.partition}", "source.partition"
                )
            )
            out.counts["dead_letters"] += 1
            return
        if source.offset <= self.applied_offset:
            out.counts["skipped_duplicates"] += 1  # prepare re-sent it after a restart
            return
        try:
            self._decide(prepared, out)
        except Exception as error:  # a poison event must not stop the partition (I7)
            log.exception(
                "consolidating %s[%d]@%d failed", message.topic, message.partition, message.offset
            )
            out.dead_letters.append(_dead_letter(message, f"consolidation failed: {error!r}", None))
            out.counts["dead_letters"] += 1
        self.applied_offset = source.offset
        self.applied_timestamp_ms = source.timestamp_ms if source.timestamp_ms >= 0 else None
        out.watermark = Watermark(
            topic=source.topic,
            partition=source.partition,
            offset=source.offset,
            input_timestamp_ms=self.applied_timestamp_ms,
        )

    def _decide(self, prepared: EventPrepared, out: PartitionOutput) -> None:
        event = prepared.event
        if event is None:
            out.counts["rejected"] += 1  # prepare dead-lettered it; only the watermark moves
            return
        bank = self.bank(event.namespace)
        source = prepared.source
        position = Position(source.topic, source.partition, source.offset)
        if isinstance(event, TurnRecorded):
            analysis = prepared.analysis
            if analysis is None:
                raise InvalidEvent("a prepared turn needs its analysis", "analysis", STAGE)
            vector = analysis.vector() if analysis.remember else None
            changes = decide_turn(
                bank, PreparedTurn(event, analysis, vector), position, self.policy
            )
            bank.apply(changes)
            cooled = decide_after_turn(bank, event, self.policy)
            bank.apply(cooled)
            out.add_changes([*changes, *cooled])
            out.counters[event.namespace] = bank.counters()
            out.counts["turns"] += 1
            if not analysis.remember:
                out.counts["filtered"] += 1
        elif isinstance(event, CommandIssued):
            changes = decide_command(bank, event, prepared.query_vector(), self.policy)
            bank.apply(changes)
            if event.command == "tick" and changes:
                bank.turns_since_consolidation = 0
                out.counters[event.namespace] = bank.counters()
            out.add_changes(changes)
            out.counts[f"command_{event.command}"] += 1
        elif isinstance(event, MemoriesRecalled):
            changes = decide_signal(bank, event, self.policy)
            bank.apply(changes)
            out.add_changes(changes)
            out.counts["signals"] += 1

    def apply_all(self, messages: Iterable[PreparedMessage]) -> PartitionOutput:
        out = PartitionOutput(self.partition)
        for message in messages:
            self.apply(message, out)
        return out


def transactional_id(settings: Settings, partition: int) -> str:
    """One producer per partition: its successor on that partition fences it (zombie-proof)."""
    return f"{consumer_group(settings.app_id, STAGE)}.{settings.topic_prefix}p{partition}"


def topics_out(settings: Settings) -> TopicsOut:
    names = topic_names(settings.topic_prefix)
    return TopicsOut(names["memory_state"], names["memory_updates"], names["dead_letters"])


@dataclass
class _Owned:
    """A partition this worker owns: its tables and the producer that commits them."""

    tables: PartitionTables
    producer: AIOKafkaProducer


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    """Membership changes only mark partitions; the consume loop restores them.

    aiokafka assigns partitions (and may start fetching them) before it calls this listener, and
    it logs and swallows the listener's errors; so nothing slow or fallible happens here.
    """

    def __init__(self, stage: ConsolidateStage) -> None:
        self._stage = stage

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        await self._stage.revoke({tp.partition for tp in revoked})

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self._stage.assign({tp.partition for tp in assigned})


class ConsolidateStage(Service):
    """The consolidate consumer group member: a transactional loop over owned partitions."""

    def __init__(self, settings: Settings, *, prepared_topic: str | None = None) -> None:
        super().__init__()
        if not settings.bootstrap:
            raise ValueError("the consolidate stage needs settings.bootstrap (a running Kafka)")
        self.settings = settings
        names = topic_names(settings.topic_prefix)
        self.prepared_topic = prepared_topic or names["prepared"]
        self.events_topic = names["events"]
        self.group_id = consumer_group(settings.app_id, STAGE)
        self.topics = topics_out(settings)
        self._owned: dict[int, _Owned] = {}
        self._pending: set[int] = set()  # assigned, not restored yet
        # One lock for membership and processing: a revocation waits for the batch in flight.
        self._lock = asyncio.Lock()
        self._consumer: AIOKafkaConsumer | None = None
        self.stats = StageStats(STAGE)
        self.rebalances = 0
        self.last_progress: dict[int, float] = {}

    # -- membership ------------------------------------------------------------------------
    def assign(self, partitions: set[int]) -> None:
        self.rebalances += 1
        self.stats.counts["rebalances"] += 1
        self._pending |= partitions - set(self._owned)

    async def revoke(self, partitions: set[int]) -> None:
        async with self._lock:
            self._pending -= partitions
            for partition in sorted(partitions):
                owned = self._owned.pop(partition, None)
                if owned is not None:
                    with contextlib.suppress(Exception):
                        await owned.producer.stop()

    async def _take_pending(self) -> None:
        """Restore every newly assigned partition (under the lock, before its first batch)."""
        assert self._consumer is not None
        assigned = {tp.partition for tp in self._consumer.assignment()}
        for partition in sorted(self._pending):
            self._pending.discard(partition)
            if partition in assigned and partition not in self._owned:
                await self._take(partition)
        log.info("consolidate owns partitions %s", sorted(self._owned))

    async def _take(self, partition: int) -> None:
        # Fence first (a previous owner's open transaction is aborted, its commits are done),
        # then read the committed state: nothing can change it behind our back any more. The
        # group's offset may be older than that state (fetched before the fence): the tables'
        # watermark skips what the state already holds.
        producer = make_transactional_producer(
            self.settings.bootstrap or "",
            transactional_id(self.settings, partition),
            self.settings.kafka,
        )
        await producer.start()
        started = time.monotonic()
        with self.stats.timed("restore"):
            state = await read_state_partition(
                self.settings.bootstrap or "",
                self.topics.state,
                partition,
                security=self.settings.kafka,
            )
            tables = PartitionTables.restore(
                partition, self.events_topic, self.settings.memory, state
            )
        self.stats.counts["restores"] += 1
        self._owned[partition] = _Owned(tables, producer)
        log.info(
            "restored partition %d: %d namespaces, %d memories, input offset %d (%.2fs)",
            partition,
            len(tables.banks),
            len(state.records),
            tables.applied_offset,
            time.monotonic() - started,
        )

    # -- the loop --------------------------------------------------------------------------
    async def on_start(self) -> None:
        consumer = committed_consumer(
            bootstrap_servers=self.settings.bootstrap,
            group_id=self.group_id,
            client_id=self.group_id,
            session_timeout_ms=int(self.settings.session_timeout_s * 1000),
            heartbeat_interval_ms=int(self.settings.heartbeat_interval_s * 1000),
            max_poll_records=self.settings.consolidate_max_batch,
            **client_kwargs(self.settings.kafka),
        )
        await consumer.start()
        consumer.subscribe([self.prepared_topic], listener=_Rebalance(self))
        self._consumer = consumer

    async def on_stop(self) -> None:
        if self._consumer is not None:
            await stop_consumer(self._consumer)  # revokes: the batch in flight commits first
        await self.revoke(set(self._owned))
        self.stats.write(self.settings.data_dir)

    @Service.timer(2.0)
    async def _write_stats(self) -> None:
        self.stats.write(self.settings.data_dir)

    @Service.task
    async def _consume(self) -> None:
        assert self._consumer is not None
        consumer = self._consumer
        while not self.should_stop:
            try:
                batches = await consumer.getmany(timeout_ms=500)
            except ConsumerStoppedError:
                if self.should_stop:
                    return
                raise
            async with self._lock:
                if self._pending:
                    await self._take_pending()
                for tp, messages in batches.items():
                    await self._process(tp, messages)

    async def _process(self, tp: TopicPartition, messages: list[Any]) -> None:
        owned = self._owned.get(tp.partition)
        if owned is None:
            return  # revoked after the fetch: the new owner reads them from the committed offset
        batch = [PreparedMessage(m.topic, m.partition, m.offset, m.key, m.value) for m in messages]
        # Decisions are CPU work: off the event loop, so heartbeats keep the membership.
        with self.stats.timed("decide"):
            output = await asyncio.get_running_loop().run_in_executor(
                None, owned.tables.apply_all, batch
            )
        consumed = {tp: output.last_prepared_offset + 1}
        started = time.perf_counter()
        try:
            with self.stats.timed("commit"):
                await commit_output(
                    owned.producer, self.topics, output, consumed=consumed, group_id=self.group_id
                )
        except ProducerFenced:
            # Another worker owns this partition now; its rebalance revokes ours shortly.
            log.warning("partition %d: fenced by a newer owner; dropping it", tp.partition)
            self._owned.pop(tp.partition, None)
            return
        except KafkaError:
            log.exception("partition %d: commit failed; restoring it from the log", tp.partition)
            await self._reset(tp, owned)
            return
        self._observe(tp, output, len(batch), time.perf_counter() - started)
        self.stats.counts.update(output.counts)
        self.stats.counts["events"] += len(batch)
        self.stats.counts["transactions"] += 1
        self.last_progress[tp.partition] = time.monotonic()

    def _observe(
        self, tp: TopicPartition, output: PartitionOutput, events: int, seconds: float
    ) -> None:
        """Prometheus series of the stage (operations only; nothing decides on them)."""
        series = metrics()
        series.events_in.labels(STAGE, "EventPrepared").inc(events)
        series.events_out.labels(STAGE, "memory_state").inc(len(output.writes))
        series.events_out.labels(STAGE, "memory_updates").inc(len(output.updates))
        for letter in output.dead_letters:
            reason = dead_letter_reason(letter.stage, letter.field)
            series.dead_letters.labels(STAGE, reason).inc()
        series.batch_seconds.labels(STAGE).observe(seconds)
        if self._consumer is not None:
            end = self._consumer.highwater(tp)
            if end is not None:
                lag = max(0, end - output.last_prepared_offset - 1)
                series.consumer_lag.labels(self.group_id, tp.topic, str(tp.partition)).set(lag)

    async def _reset(self, tp: TopicPartition, owned: _Owned) -> None:
        """After an aborted transaction the in-memory tables are ahead: rebuild them."""
        with contextlib.suppress(Exception):
            await owned.producer.stop()
        self._owned.pop(tp.partition, None)
        await self._take(tp.partition)
        assert self._consumer is not None
        committed = await self._consumer.committed(tp)
        if committed is None:
            await self._consumer.seek_to_beginning(tp)
        else:
            self._consumer.seek(tp, committed)
