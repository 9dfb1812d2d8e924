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

Crypto-shredding (docs/ERASURE.md): prepared events arrive sealed with their input's data key
and are opened here; records and change-feed entries leave sealed with their memory's key. An
erase destroys the keys it names (``pipeline.crypto.shredding``) inside the batch's transaction;
an event whose key is already destroyed is counted as ``shredded`` and only moves the watermark.

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

from pipeline.crypto.envelope import KeyLookup, open_envelope, sealed_envelope
from pipeline.crypto.keyring import KeyRing
from pipeline.crypto.keystore import TopicKeyStore, open_key_store
from pipeline.crypto.shredding import keys_destroyed_by
from pipeline.ingest.commit import PartitionOutput, TopicsOut, commit_output
from pipeline.memory.bank import Change, NamespaceBank, Position
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
from schemas.data_keys import ROLL_KEY, ErasureRecorded, KeyDestroyed
from schemas.errors import DataKeyDestroyed, HindsightError, InvalidEvent, UnknownDataKey
from schemas.events import CommandIssued, MemoriesRecalled, TurnRecorded
from schemas.memory import DeadLetter, MemoryRecord, Watermark
from schemas.prepared import EventPrepared, LogPosition
from topics.catalogue import TOPICS, consumer_group, topic_names

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


class _BatchKeys:
    """The ring, with the keys this batch's erases destroyed (not committed yet) already gone:
    a later event of the batch sealed with one is shredded, as it will be in any replay."""

    def __init__(self, ring: KeyLookup | None, out: PartitionOutput) -> None:
        self._ring = ring
        self._out = out

    def key(self, key_id: str) -> bytes | None:
        if key_id in self._out.destroyed:
            return None
        if self._ring is None:
            raise UnknownDataKey(key_id, "this process has no data-key store (encryption is off)")
        return self._ring.key(key_id)

    def namespace_of(self, key_id: str) -> str | None:
        return None if self._ring is None else self._ring.namespace_of(key_id)


@dataclass
class PartitionTables:
    """Consolidation state of one partition: its namespaces' banks and how far it has applied.

    Pure: no I/O and no clock. ``apply`` folds one prepared message in and reports what changed
    into a ``PartitionOutput``; the caller commits that output (live or replay alike).

    ``keys`` opens sealed prepared events. ``shred`` (live only) makes erases destroy data keys;
    ``recorded_erasures`` (replay only) puts each recorded erase back at its input position —
    the erase command itself was sealed with a key it destroyed, so only the record says what
    it took.
    """

    partition: int
    events_topic: str
    policy: MemoryPolicy
    banks: dict[str, NamespaceBank] = field(default_factory=dict)
    applied_offset: int = -1  # last input offset applied (the watermark)
    applied_timestamp_ms: int | None = None
    keys: KeyRing | None = None
    shred: bool = False
    recorded_erasures: dict[int, ErasureRecorded] = field(default_factory=dict)  # by offset

    @classmethod
    def restore(
        cls,
        partition: int,
        events_topic: str,
        policy: MemoryPolicy,
        state: PartitionState,
        *,
        keys: KeyRing | None = None,
        shred: bool = False,
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
            keys=keys,
            shred=shred,
        )

    def bank(self, namespace: str) -> NamespaceBank:
        bank = self.banks.get(namespace)
        if bank is None:
            bank = self.banks[namespace] = NamespaceBank(namespace)
        return bank

    def apply(self, message: PreparedMessage, out: PartitionOutput) -> None:
        out.last_prepared_offset = max(out.last_prepared_offset, message.offset)
        try:
            envelope = sealed_envelope(message.value)
        except InvalidEvent as error:
            self._reject(message, out, error.reason, error.field)
            return
        if envelope is None:
            self._apply_plain(message, message.value, out)
            return
        source = envelope.source
        if source is None:
            self._reject(message, out, "a sealed prepared event needs its input position", "source")
            return
        if not self._fresh(message, source, out):
            return
        recorded = self.recorded_erasures.get(source.offset)
        if recorded is not None:
            self._apply_recorded_erasure(recorded, out)
            self._advance(source, out)
            return
        try:
            raw = open_envelope(envelope, _BatchKeys(self.keys, out), "prepared")
        except DataKeyDestroyed:
            out.counts["shredded"] += 1  # erased: nothing to read, only the watermark moves
            self._advance(source, out)
            return
        except UnknownDataKey as error:
            self._reject(message, out, str(error).removeprefix("key_id: "), "key_id")
            self._advance(source, out)
            return
        except InvalidEvent as error:
            self._reject(message, out, error.reason, error.field)
            self._advance(source, out)
            return
        self._apply_plain(message, raw, out, envelope.key_id)

    def _reject(
        self, message: PreparedMessage, out: PartitionOutput, reason: str, field: str | None
    ) -> None:
        out.dead_letters.append(_dead_letter(message, reason, field))
        out.counts["dead_letters"] += 1

    def _fresh(self, message: PreparedMessage, source: LogPosition, out: PartitionOutput) -> bool:
        if source.partition != self.partition:
            self._reject(
                message, out, f"prepared for input partition {source.partition}", "source.partition"
            )
            return False
        if source.offset <= self.applied_offset:
            out.counts["skipped_duplicates"] += 1  # prepare re-sent it after a restart
            return False
        return True

    def _advance(self, source: LogPosition, out: PartitionOutput) -> None:
        self.applied_offset = source.offset
        self.applied_timestamp_ms = source.timestamp_ms if source.timestamp_ms >= 0 else None
        out.watermark = Watermark(
            topic=source.topic,
            partition=source.partition,
            offset=source.offset,
            input_timestamp_ms=self.applied_timestamp_ms,
        )

    def _apply_plain(
        self,
        message: PreparedMessage,
        raw: bytes | None,
        out: PartitionOutput,
        key_id: str | None = None,
    ) -> None:
        try:
            prepared = decode_prepared(raw)
        except InvalidEvent as error:
            # Without a readable source we cannot know which input offset this was: keep the
            # bytes and move on (the prepared topic was written by a foreign or broken producer).
            self._reject(message, out, error.reason, error.field)
            return
        source = prepared.source
        if key_id is None and not self._fresh(message, source, out):
            return
        recorded = self.recorded_erasures.get(source.offset)
        if recorded is not None:
            self._apply_recorded_erasure(recorded, out)
        elif prepared.rejected is not None and prepared.rejected.shredded:
            out.counts["shredded"] += 1
        else:
            try:
                self._decide(prepared, out, key_id)
            except Exception as error:  # a poison event must not stop the partition (I7)
                log.exception(
                    "consolidating %s[%d]@%d failed",
                    message.topic,
                    message.partition,
                    message.offset,
                )
                self._reject(message, out, f"consolidation failed: {error!r}", None)
        self._advance(source, out)

    def _decide(self, prepared: EventPrepared, out: PartitionOutput, key_id: str | None) -> None:
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
                bank, PreparedTurn(event, analysis, vector, key_id), position, self.policy
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
            changes = decide_command(
                bank, event, prepared.query_vector(), self.policy, prepared.query_known_share
            )
            bank.apply(changes)
            if event.command == "tick" and changes:
                bank.turns_since_consolidation = 0
                out.counters[event.namespace] = bank.counters()
            out.add_changes(changes)
            out.counts[f"command_{event.command}"] += 1
            if event.command == "erase":
                erased = [c.record for c in changes if c.change == "erased"]
                self._erased(event, key_id, erased, source, out)
        elif isinstance(event, MemoriesRecalled):
            changes = decide_signal(bank, event, self.policy)
            bank.apply(changes)
            out.add_changes(changes)
            out.counts["signals"] += 1

    def _erased(
        self,
        command: CommandIssued,
        key_id: str | None,
        erased: list[MemoryRecord],
        source: LogPosition,
        out: PartitionOutput,
    ) -> None:
        """Record an applied erase; live, destroy its keys in the same transaction."""
        destroyed: set[str] = set()
        if self.shred and self.keys is not None:
            destroyed = keys_destroyed_by(command, key_id, erased, self.keys) - set(out.destroyed)
            for destroyed_id in sorted(destroyed):
                out.destroyed[destroyed_id] = KeyDestroyed(
                    key_id=destroyed_id,
                    namespace=command.namespace,
                    cause_event_id=command.event_id,
                    at=command.event_time,
                )
        if command.whole_namespace:
            self._forget_namespace(command.namespace, out)
        out.erasures.append(
            ErasureRecorded(
                namespace=command.namespace,
                cause_event_id=command.event_id,
                at=command.event_time,
                whole_namespace=command.whole_namespace,
                memory_ids=[] if command.whole_namespace else sorted(r.id for r in erased),
                keys_destroyed=len(destroyed),
                source=source,
            )
        )
        out.counts["keys_destroyed"] += len(destroyed)

    def _forget_namespace(self, namespace: str, out: PartitionOutput) -> None:
        """A whole-namespace erase leaves no bank behind, not even its schedule: the namespace
        starts afresh, exactly as a replay that can no longer read its earlier events."""
        self.banks.pop(namespace, None)
        out.counters[namespace] = None

    def _apply_recorded_erasure(self, erasure: ErasureRecorded, out: PartitionOutput) -> None:
        """Replay: what the erase took, from its record (the command itself is unreadable)."""
        bank = self.bank(erasure.namespace)
        if erasure.whole_namespace:
            targets = sorted(bank.records.values(), key=lambda r: r.id)
        else:
            targets = [bank.records[i] for i in erasure.memory_ids if i in bank.records]
        changes = [
            Change("erased", record, erasure.cause_event_id, erasure.at) for record in targets
        ]
        bank.apply(changes)
        out.add_changes(changes)
        if erasure.whole_namespace:
            self._forget_namespace(erasure.namespace, out)
        out.erasures.append(erasure)
        out.counts["erasures_recorded"] += 1

    def apply_all(self, messages: Iterable[PreparedMessage]) -> PartitionOutput:
        out = PartitionOutput(self.partition)
        for message in messages:
            self.apply(message, out)
        return out


def transactional_id(settings: Settings, partition: int) -> str:
    """One producer per partition: its successor on that partition fences it (zombie-proof)."""
    return f"{consumer_group(settings.app_id, STAGE)}.{settings.topic_prefix}p{partition}"


def topics_out(settings: Settings, *, live: bool = True) -> TopicsOut:
    """Where a batch's output goes; only live consolidation writes to the data-key topic."""
    names = topic_names(settings.topic_prefix)
    return TopicsOut(
        names["memory_state"],
        names["memory_updates"],
        names["dead_letters"],
        names["data_keys"] if live else None,
    )


# A write this long after an erase rolls the data-key segment that holds its tombstones (Kafka
# rolls a segment on the first append after ``segment.ms``), so the cleaner can drop the wrapped
# keys; a margin covers clock steps between this process and the broker.
ROLL_AFTER_S = int(TOPICS["data_keys"].configs["segment.ms"]) / 1000 + 2.0


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
        self._keys: TopicKeyStore | None = None
        self._rolls_due: dict[int, float] = {}  # partition -> when to roll its data-key segment
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
                keys=self._keys,
                key_wait_s=self.settings.key_wait_s,
            )
            if state.unopened:
                # A restore must be whole: deciding without a live memory changes decisions.
                raise HindsightError(
                    f"partition {partition}: {len(state.unopened)} state records cannot be "
                    f"opened, e.g. {state.unopened[0]}"
                )
            tables = PartitionTables.restore(
                partition,
                self.events_topic,
                self.settings.memory,
                state,
                keys=self._ring,
                shred=True,
            )
        self.stats.counts["restores"] += 1
        self._owned[partition] = _Owned(tables, producer)
        if self._keys is not None:
            # An erase committed just before a crash may still wait for its segment roll.
            self._rolls_due.setdefault(partition, time.monotonic() + ROLL_AFTER_S)
        log.info(
            "restored partition %d: %d namespaces, %d memories, input offset %d (%.2fs)",
            partition,
            len(tables.banks),
            len(state.records),
            tables.applied_offset,
            time.monotonic() - started,
        )

    # -- the loop --------------------------------------------------------------------------
    @property
    def _ring(self) -> KeyRing | None:
        return None if self._keys is None else self._keys.ring

    async def on_start(self) -> None:
        self._keys = await open_key_store(self.settings)
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
        if self._keys is not None:
            await self._keys.stop()
        self.stats.write(self.settings.data_dir)

    @Service.timer(2.0)
    async def _write_stats(self) -> None:
        self.stats.write(self.settings.data_dir)

    @Service.timer(1.0)
    async def _roll_data_key_segments(self) -> None:
        """After an erase, one more write to its data-key partition once ``segment.ms`` passed:
        it rolls the segment holding the tombstones, and the cleaner then removes the wrapped
        keys from the segment files (docs/ERASURE.md, "When the bytes are gone")."""
        now = time.monotonic()
        due = sorted(p for p, at in self._rolls_due.items() if at <= now)
        if not due:
            return
        async with self._lock:
            for partition in due:
                self._rolls_due.pop(partition, None)
                owned = self._owned.get(partition)
                if owned is None or self.topics.data_keys is None:
                    continue  # its new owner rolls it after restoring
                try:
                    await owned.producer.begin_transaction()
                    await owned.producer.send_and_wait(
                        self.topics.data_keys,
                        key=ROLL_KEY.encode(),
                        value=None,
                        partition=partition,
                    )
                    await owned.producer.commit_transaction()
                    self.stats.counts["data_key_rolls"] += 1
                except KafkaError:
                    log.exception("partition %d: rolling the data-key segment failed", partition)
                    with contextlib.suppress(Exception):
                        await owned.producer.abort_transaction()
                    self._rolls_due[partition] = now + ROLL_AFTER_S

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
        if self._keys is not None:
            with self.stats.timed("keys"):
                await self._keys.wait_for_values([m.value for m in batch], self.settings.key_wait_s)
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
                    owned.producer,
                    self.topics,
                    output,
                    consumed=consumed,
                    group_id=self.group_id,
                    keys=self._ring,
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
        if output.destroyed and self._keys is not None:
            # Committed: forget the keys now rather than when the follower reads them back.
            self._keys.ring.mark_destroyed(output.destroyed.values())
            self._keys.ring.record_erasures(output.erasures)
            self._rolls_due[tp.partition] = time.monotonic() + ROLL_AFTER_S
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
