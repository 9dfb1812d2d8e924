"""The Python client: what an agent uses to retain turns and recall memories.

Every write — a turn, a forget, a tick, a pin, a recall's reinforcement signal — is an event on
the one input log ``hindsight.events.v1`` and returns where it landed (a ``Receipt``), so
``recall(wait_for=receipt)`` covers all of them (read-your-writes, I5). ``recall`` answers from
the hot recall view fed by the compacted state topic. A forget by query carries the query: the
pipeline resolves it at the command's place in the log, so it sees the turns before it, and
replay resolves it identically.

With encryption on (the default) every event is sealed before it is published (docs/ERASURE.md):
a turn and an erase each with a data key of their own, created and acknowledged (acks=all) on
the data-key topic first; other commands and recall signals with the namespace's command key.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from pydantic import BaseModel, Field

from pipeline.crypto.envelope import DataKey, open_input_event, seal
from pipeline.crypto.keyring import KeyRing
from pipeline.crypto.keystore import TopicKeyStore, open_key_store
from pipeline.crypto.shredding import has_own_key
from pipeline.ingest.policies import open_policy_store
from pipeline.memory.rules.redaction import policy_in_force, redact, reveal_placeholders
from pipeline.models.encoders import Encoder, load_encoder
from pipeline.recall.context import format_context
from pipeline.recall.engine import RecallEngine
from pipeline.recall.hot_index import HotIndex
from pipeline.recall.types import RecalledMemory, RecallTrace
from pipeline.runtime.kafka import client_kwargs, stop_consumer
from pipeline.runtime.metrics import metrics
from pipeline.runtime.settings import Settings
from pipeline.views.state_topic import StateFollower, make_producer, partition_for
from schemas.codec import encode, validate
from schemas.data_keys import ErasureRecorded
from schemas.errors import (
    DataKeyDestroyed,
    HindsightError,
    InvalidEvent,
    MemoryNotFound,
    UnknownDataKey,
    WatermarkTimeout,
)
from schemas.events import (
    CommandIssued,
    InputEvent,
    MemoriesRecalled,
    RecallHit,
    TurnRecorded,
    check_namespace,
)
from schemas.memory import MemoryRecord, Watermark
from schemas.policy import NamespacePolicies, RedactionSettings
from topics.catalogue import topic_names


@dataclass(frozen=True)
class Receipt:
    """Where an event landed in the log: pass it to ``recall(wait_for=...)``."""

    event_id: str
    namespace: str
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class ForgetOutcome:
    """What a forget did: where it landed, and (once applied) the memories it took."""

    receipt: Receipt
    command: str  # forget | erase
    memory_ids: list[str]
    applied: bool


REPUBLISHED_HEADER = "hindsight-republished-from"


@dataclass(frozen=True)
class ErasureOutcome:
    """A whole-namespace erase, applied: the memories it took and the data keys it destroyed."""

    receipt: Receipt
    memory_ids: list[str]
    erasure: ErasureRecorded | None  # None when encryption is off (nothing was shredded)


class RecallResult(BaseModel):
    namespace: str
    query: str
    at: datetime
    route: str
    memories: list[RecalledMemory]
    context: str
    # Where the reinforcement signal of this recall landed (None when nothing was reinforced).
    signal: Receipt | None = None
    trace: RecallTrace | None = Field(
        default=None, description="How the recall was routed and how many candidates it scored."
    )


class FreshnessProbe:
    """Turn → recallable: each live watermark's input timestamp against the wall clock.

    Only marks read while following count: the catch-up at start-up replays old marks.
    """

    def __init__(self) -> None:
        self.follower: StateFollower | None = None

    def observe(self, mark: Watermark) -> None:
        if self.follower is None or not self.follower.running:
            return
        if mark.input_timestamp_ms is not None:
            # Wall clock on purpose: freshness is an operational measure, not a memory decision.
            seconds = time.time() - mark.input_timestamp_ms / 1000.0
            metrics().freshness_seconds.observe(max(0.0, seconds))


def _now() -> datetime:
    # The client is the boundary where wall-clock time becomes event time; decisions never read it.
    return datetime.now(UTC)


class Hindsight:
    def __init__(
        self,
        settings: Settings,
        producer: AIOKafkaProducer,
        follower: StateFollower,
        index: HotIndex,
        keys: TopicKeyStore | None = None,
    ) -> None:
        self.settings = settings
        self._producer = producer
        self._follower = follower
        self._index = index
        self._keys = keys
        self._namespace_keys: dict[str, DataKey] = {}
        self._namespace_key_lock = asyncio.Lock()
        self._names = topic_names(settings.topic_prefix)
        self._encoder: Encoder | None = None
        self._engine: RecallEngine | None = None
        self._encoder_lock = asyncio.Lock()
        self._offsets: AIOKafkaConsumer | None = None  # end offsets for wait_for checks
        self._offsets_lock = asyncio.Lock()

    @classmethod
    @asynccontextmanager
    async def connect(
        cls, settings: Settings, encoder: Encoder | None = None
    ) -> AsyncIterator[Hindsight]:
        if not settings.bootstrap:
            raise HindsightError(
                "Hindsight.connect needs settings.bootstrap; start the stack first"
            )
        names = topic_names(settings.topic_prefix)
        producer = make_producer(settings.bootstrap, "hindsight-client", settings.kafka)
        await producer.start()
        keys: TopicKeyStore | None = None
        index = HotIndex()
        freshness = FreshnessProbe()
        follower: StateFollower | None = None
        client: Hindsight | None = None
        try:
            # Keys first: the state follower opens sealed records with them.
            keys = await open_key_store(settings, producer)
            follower = StateFollower(
                settings.bootstrap,
                names["memory_state"],
                index.apply,
                index.remove,
                freshness.observe,
                security=settings.kafka,
                keys=keys,
                key_wait_s=settings.key_wait_s,
            )
            freshness.follower = follower
            live = follower
            metrics().bind_view(index, lambda: live.running and live.failure is None)
            await follower.start()
            client = cls(settings, producer, follower, index, keys)
            if encoder is not None:
                client._set_encoder(encoder)
            yield client
        finally:
            if client is not None and client._offsets is not None:
                await stop_consumer(client._offsets)
            if follower is not None:
                await follower.stop()
            if keys is not None:
                await keys.stop()
            await producer.stop()

    @property
    def keys(self) -> KeyRing | None:
        """The data keys this client knows (None with encryption off): opens sealed values."""
        return None if self._keys is None else self._keys.ring

    @property
    def key_store(self) -> TopicKeyStore | None:
        return self._keys

    # -- writing -----------------------------------------------------------------------------
    async def _namespace_key(self, namespace: str) -> DataKey:
        """The namespace's command key of this client: created once, replaced once destroyed."""
        assert self._keys is not None
        async with self._namespace_key_lock:
            key = self._namespace_keys.get(namespace)
            if key is None or self._keys.ring.state(key.key_id) != "live":
                key = self._namespace_keys[namespace] = await self._keys.new_key(namespace)
            return key

    async def _sealing_keys(self, events: Sequence[InputEvent]) -> list[DataKey | None]:
        """The key each event is sealed with: its own (created now) or the namespace's."""
        if self._keys is None:
            return [None] * len(events)
        own = [e for e in events if has_own_key(e)]
        created = iter(await self._keys.new_keys([(e.namespace, e.event_id) for e in own]))
        return [
            next(created) if has_own_key(e) else await self._namespace_key(e.namespace)
            for e in events
        ]

    def _value(self, event: InputEvent, key: DataKey | None) -> bytes:
        return encode(event) if key is None else seal(event, event.namespace, key, "events")

    async def _publish(self, namespace: str, event: InputEvent, event_id: str) -> Receipt:
        topic = self._names["events"]
        [key] = await self._sealing_keys([event])
        metadata = await self._producer.send_and_wait(
            topic, key=namespace.encode(), value=self._value(event, key)
        )
        return Receipt(event_id, namespace, topic, metadata.partition, metadata.offset)

    def _turn(
        self,
        namespace: str,
        text: str,
        speaker: str,
        session_id: str,
        event_time: datetime | None,
        role: str,
        metadata: dict[str, Any] | None,
        event_id: str | None,
    ) -> TurnRecorded:
        return validate(
            TurnRecorded,
            {
                "event_id": event_id or f"turn-{uuid.uuid4().hex}",
                "namespace": namespace,
                "session_id": session_id,
                "speaker": speaker,
                "role": role,
                "text": text,
                "event_time": event_time or _now(),
                "metadata": metadata or {},
            },
        )

    async def retain(
        self,
        namespace: str,
        text: str,
        *,
        speaker: str = "user",
        session_id: str = "default",
        event_time: datetime | None = None,
        role: str = "user",
        metadata: dict[str, Any] | None = None,
        event_id: str | None = None,
    ) -> Receipt:
        """Publish one turn; returns its log position (the offset to wait for)."""
        turn = self._turn(
            namespace, text, speaker, session_id, event_time, role, metadata, event_id
        )
        return await self._publish(namespace, turn, turn.event_id)

    async def retain_many(self, turns: Sequence[dict[str, Any]]) -> list[Receipt]:
        """Publish many turns in order without waiting for each acknowledgement in turn."""
        events = [
            self._turn(
                t["namespace"],
                t["text"],
                t.get("speaker", "user"),
                t.get("session_id", "default"),
                t.get("event_time"),
                t.get("role", "user"),
                t.get("metadata"),
                t.get("event_id"),
            )
            for t in turns
        ]
        topic = self._names["events"]
        keys = await self._sealing_keys(events)
        futures = [
            await self._producer.send(topic, key=e.namespace.encode(), value=self._value(e, key))
            for e, key in zip(events, keys, strict=True)
        ]
        results = await asyncio.gather(*futures)
        return [
            Receipt(e.event_id, e.namespace, topic, meta.partition, meta.offset)
            for e, meta in zip(events, results, strict=True)
        ]

    async def republish(self, event: InputEvent, value: bytes, *, origin: str) -> Receipt:
        """Publish an operator's corrected bytes of a dead-lettered event to its input topic.

        ``value`` must decode to ``event`` (the caller validated it); keyed by the event's
        namespace (I3). A header names the dead letter it came from, for audit.
        """
        topic = self._names["events"]
        metadata = await self._producer.send_and_wait(
            topic,
            key=event.namespace.encode(),
            value=value,
            headers=[(REPUBLISHED_HEADER, origin.encode())],
        )
        return Receipt(event.event_id, event.namespace, topic, metadata.partition, metadata.offset)

    async def command(
        self,
        namespace: str,
        command: str,
        *,
        memory_ids: Sequence[str] = (),
        whole_namespace: bool = False,
        query: str | None = None,
        reason: str | None = None,
        score: float | None = None,
        redaction: RedactionSettings | None = None,
        at: datetime | None = None,
    ) -> Receipt:
        event = validate(
            CommandIssued,
            {
                "event_id": f"cmd-{uuid.uuid4().hex}",
                "namespace": namespace,
                "event_time": at or _now(),
                "command": command,
                "memory_ids": list(memory_ids),
                "whole_namespace": whole_namespace,
                "query": query,
                "reason": reason,
                "score": score,
                "redaction": redaction,
            },
        )
        return await self._publish(namespace, event, event.event_id)

    async def set_policy(self, namespace: str, redaction: RedactionSettings) -> Receipt:
        """Redact the namespace's turns from this point of its log on (docs/SECURITY.md).

        Turns published before the receipt's offset stay as they were; from it on, emails, phone
        numbers, cards, resident IDs, IBANs and secrets become typed placeholders before anything
        extracts, embeds or stores them. The original stays only in the (sealed) input log.
        """
        return await self.command(namespace, "set_policy", redaction=redaction)

    async def policy(self, namespace: str) -> RedactionSettings:
        """The namespace's redaction as prepare last recorded it (off when never set)."""
        check_namespace(namespace)
        history = await self._policy_history(namespace)
        if history is None or not history.entries:
            return RedactionSettings()
        return history.entries[-1].redaction

    async def forget(
        self,
        namespace: str,
        *,
        memory_ids: Sequence[str] = (),
        query: str | None = None,
        whole_namespace: bool = False,
        at: datetime | None = None,
        hard: bool = False,
        reason: str | None = None,
    ) -> Receipt:
        """Soft by default (status forgotten, kept for audit, never recalled); ``hard`` erases.

        A ``query`` is resolved by the pipeline at this command's place in the log (the best
        match and what is close to it, see ``pipeline.memory.rules.forgetting``), so a forget
        sent right after a retain takes that retain too. ``forgotten(receipt)`` tells what went.
        """
        if query is not None and not query.strip():
            raise InvalidEvent("must not be empty", "query", "forget")
        if not memory_ids and query is None and not whole_namespace:
            raise InvalidEvent(
                "give memory_ids, a query or whole_namespace=True", "query", "forget"
            )
        return await self.command(
            namespace,
            "erase" if hard else "forget",
            memory_ids=list(dict.fromkeys(memory_ids)),
            whole_namespace=whole_namespace,
            query=query,
            reason=reason,
            at=at,
        )

    async def forget_and_report(
        self,
        namespace: str,
        *,
        memory_ids: Sequence[str] = (),
        query: str | None = None,
        whole_namespace: bool = False,
        hard: bool = False,
        reason: str | None = None,
        wait: bool = True,
        timeout: float = 30.0,
    ) -> ForgetOutcome:
        """Forget, and (with ``wait``) report which memories it took once it was applied.

        The one forget path of the client, HTTP and MCP. An erase leaves nothing to read back,
        so it reports the memories the namespace had before and no longer has.
        """
        check_namespace(namespace)
        before = {r.id for r in self._index.records(namespace)} if hard else set()
        receipt = await self.forget(
            namespace,
            memory_ids=memory_ids,
            query=query,
            whole_namespace=whole_namespace,
            hard=hard,
            reason=reason,
        )
        if not wait:
            return ForgetOutcome(receipt, "erase" if hard else "forget", [], False)
        try:
            await self.wait_applied(receipt, timeout)
        except WatermarkTimeout:
            # The command is in the log and will apply; only the wait ran out.
            return ForgetOutcome(receipt, "erase" if hard else "forget", [], False)
        if hard:
            after = {r.id for r in self._index.records(namespace)}
            taken = sorted(before - after)
        else:
            taken = self.changed_by(receipt)
        return ForgetOutcome(receipt, "erase" if hard else "forget", taken, True)

    async def erase_namespace(
        self, namespace: str, *, reason: str | None = None, timeout: float = 60.0
    ) -> ErasureOutcome:
        """Erase a whole namespace and wait until it is applied and its data keys are destroyed.

        Both happen in one transaction of ``consolidate``; this also waits for the erasure record
        on the data-key topic, so when it returns no key of the namespace opens anything any more
        (compaction then removes the wrapped keys from the broker's files, docs/ERASURE.md).
        """
        check_namespace(namespace)
        before = {r.id for r in self._index.records(namespace)}
        receipt = await self.forget(namespace, whole_namespace=True, hard=True, reason=reason)
        await self.wait_applied(receipt, timeout)
        erasure = None
        if self._keys is not None:
            # Committed with the watermark we just saw: reading to the topic's end finds it.
            await self._keys.catch_up(timeout)
            erasure = self._keys.ring.erasure(namespace, receipt.event_id)
            if erasure is None:
                raise HindsightError(
                    f"erase {receipt.event_id} of namespace {namespace!r} was applied but left no "
                    "erasure record on the data-key topic: is consolidate older than this client?"
                )
        self._namespace_keys.pop(namespace, None)
        after = {r.id for r in self._index.records(namespace)}
        return ErasureOutcome(receipt, sorted(before - after), erasure)

    def changed_by(self, receipt: Receipt) -> list[str]:
        """Ids of the memories an applied command changed (read from their history).

        Erased memories are gone from the view, so an erase reports what it could still see:
        nothing. Wait for the receipt first (``wait_applied``).
        """
        return sorted(
            record.id
            for record in self._index.records(receipt.namespace)
            if any(entry.cause_event_id == receipt.event_id for entry in record.history)
        )

    async def advance(self, namespace: str, to: datetime) -> Receipt:
        """Move a namespace's event time forward (a tick: idle consolidation and cooling)."""
        return await self.command(namespace, "tick", at=to)

    async def pin(self, namespace: str, memory_ids: Sequence[str], pinned: bool = True) -> Receipt:
        return await self.command(namespace, "pin" if pinned else "unpin", memory_ids=memory_ids)

    # -- reading -----------------------------------------------------------------------------
    async def wait_applied(self, receipt: Receipt, timeout: float = 30.0) -> None:
        await self._follower.wait_for(receipt.topic, receipt.partition, receipt.offset, timeout)

    async def wait_offset(self, namespace: str, offset: int, timeout: float = 30.0) -> None:
        """Wait for an input-log offset of the namespace's partition (any event kind).

        An offset the log does not hold yet is the caller's mistake, not slowness: it is refused
        naming ``wait_for_offset`` (once the wait ran out, so the fast path costs nothing).
        """
        partition = partition_for(namespace, self.settings.partitions)
        topic = self._names["events"]
        if self._follower.watermarks.get((topic, partition), -1) < offset:
            end = await self._end_offset(topic, partition)
            if offset >= end:
                raise InvalidEvent(
                    f"offset {offset} is past the end of the namespace's input partition ({end})",
                    "wait_for_offset",
                    "recall",
                )
        await self._follower.wait_for(topic, partition, offset, timeout)

    async def _end_offset(self, topic: str, partition: int) -> int:
        """The partition's end (one idle consumer per client, started on first use)."""
        async with self._offsets_lock:
            if self._offsets is None:
                consumer = AIOKafkaConsumer(
                    bootstrap_servers=self.settings.bootstrap,
                    group_id=None,
                    enable_auto_commit=False,
                    **client_kwargs(self.settings.kafka),
                )
                await consumer.start()
                self._offsets = consumer
        tp = TopicPartition(topic, partition)
        return int((await self._offsets.end_offsets([tp]))[tp])

    def _set_encoder(self, encoder: Encoder) -> None:
        self._encoder = encoder
        self._engine = RecallEngine(self._index, encoder, self.settings.recall)

    async def _recall_engine(self) -> RecallEngine:
        async with self._encoder_lock:
            if self._engine is None:
                encoder = await asyncio.get_running_loop().run_in_executor(
                    None, load_encoder, self.settings.encoder, self.settings.encoder_threads
                )
                self._set_encoder(encoder)
        assert self._engine is not None
        return self._engine

    async def recall(
        self,
        namespace: str,
        query: str,
        *,
        at: datetime | None = None,
        limit: int | None = None,
        budget_chars: int | None = None,
        regions: Sequence[str] | None = None,
        wait_for: Receipt | int | None = None,
        wait_timeout: float = 30.0,
        include_history: bool = False,
        truncate: bool | None = None,
        reinforce: bool = True,
    ) -> RecallResult:
        """Ranked memories and a compact context block.

        Without ``limit`` the result is cut at the first large score gap (the seeds' dynamic
        truncation); an explicit ``limit`` asks for that many, so the gap cut is off unless
        ``truncate=True``.
        """
        check_namespace(namespace)
        if not query.strip():
            raise InvalidEvent("must not be empty", "query", "recall")
        self._follower.check()  # a stopped view would answer from stale memory
        if isinstance(wait_for, Receipt):
            await self.wait_applied(wait_for, wait_timeout)
        elif isinstance(wait_for, int):
            await self.wait_offset(namespace, wait_for, wait_timeout)
        engine = await self._recall_engine()
        started = time.perf_counter()
        moment = at or _now()
        if truncate is None:
            truncate = limit is None
        memories, trace = await asyncio.get_running_loop().run_in_executor(
            None,
            lambda: engine.recall_with_trace(
                namespace,
                query,
                at=moment,
                limit=limit,
                regions=list(regions) if regions else None,  # type: ignore[arg-type]
                include_history=include_history,
                truncate=truncate,
                budget_chars=budget_chars,
            ),
        )
        context = format_context(
            memories,
            max_chars=budget_chars or self.settings.recall.context_chars,
            memory_chars=self.settings.recall.memory_chars,
        )
        route = trace.route
        signal_receipt: Receipt | None = None
        metrics().recall_seconds.labels(route).observe(time.perf_counter() - started)
        if reinforce and memories:
            signal = MemoriesRecalled(
                event_id=f"sig-{uuid.uuid4().hex}",
                namespace=namespace,
                event_time=moment,
                query=query[:4000],
                hits=[
                    RecallHit(memory_id=m.id, rank=i, score=m.score)
                    for i, m in enumerate(memories)
                    if m.status == "active" or m.status == "cold"
                ],
            )
            if signal.hits:
                signal_receipt = await self._publish(namespace, signal, signal.event_id)
        return RecallResult(
            namespace=namespace,
            query=query,
            at=moment,
            route=route,
            memories=memories,
            context=context,
            signal=signal_receipt,
            trace=trace,
        )

    def records(self, namespace: str) -> list[MemoryRecord]:
        return list(self._index.records(namespace))

    def namespace_sizes(self) -> dict[str, int]:
        """Memories per namespace in the recall view (every status)."""
        return self._index.namespace_sizes()

    def record(self, memory_id: str) -> MemoryRecord | None:
        """Any namespace's record by id (operators' tools; agents use ``inspect``)."""
        return self._index.get(memory_id)

    @property
    def follower(self) -> StateFollower:
        """The state-topic follower feeding recall: its health decides readiness."""
        return self._follower

    async def inspect(
        self, namespace: str, memory_id: str, *, reveal: bool = False
    ) -> MemoryRecord:
        """The memory with its provenance and history (the vector stays in the index).

        ``reveal`` puts the values redaction replaced back into the content, read from the
        original turns in the input log (callers check the ``admin`` scope first).
        """
        check_namespace(namespace)
        record = self._index.get(memory_id)
        if record is None or record.namespace != namespace:
            raise MemoryNotFound(namespace, memory_id)
        if reveal:
            return await self._revealed(record)
        return record

    async def _policy_history(self, namespace: str) -> NamespacePolicies | None:
        """The namespace's policy history as prepare recorded it (read once, then closed)."""
        store = await open_policy_store(self.settings)
        try:
            return store.book.get(namespace)
        finally:
            await store.stop()

    async def _revealed(self, record: MemoryRecord) -> MemoryRecord:
        history = await self._policy_history(record.namespace)
        content = record.content
        for source in record.provenance:
            if source.partition is None or source.offset is None:
                continue
            policy = policy_in_force(history, source.partition, source.offset)
            if policy is None:
                continue
            original = await self._input_turn(source.partition, source.offset)
            if original is not None:
                content = reveal_placeholders(content, redact(original.text, policy), original.text)
        return record.model_copy(update={"content": content})

    async def _input_turn(self, partition: int, offset: int) -> TurnRecorded | None:
        """The turn at an input position, opened with the data keys (None when erased)."""
        topic = self._names["events"]
        tp = TopicPartition(topic, partition)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.settings.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            **client_kwargs(self.settings.kafka),
        )
        await consumer.start()
        try:
            consumer.assign([tp])
            consumer.seek(tp, offset)
            fetched = await consumer.getmany(tp, timeout_ms=10_000, max_records=1)
        finally:
            await stop_consumer(consumer)
        for message in fetched.get(tp, []):
            try:
                event = open_input_event(message.value, self.keys)
            except (InvalidEvent, DataKeyDestroyed, UnknownDataKey):
                return None
            return event if isinstance(event, TurnRecorded) else None
        return None

    @property
    def watermarks(self) -> dict[tuple[str, int], int]:
        """Input offsets the recall view has applied, per (topic, partition) (I5)."""
        return self._follower.watermarks

    async def stats(self, namespace: str) -> dict[str, Any]:
        records = self.records(namespace)
        return {
            "namespace": namespace,
            "memories": len(records),
            "by_status": dict(Counter(r.status for r in records)),
            "by_kind": dict(Counter(r.kind for r in records)),
            "by_region": dict(Counter(r.region for r in records)),
            "watermarks": {f"{t}:{p}": o for (t, p), o in self._follower.watermarks.items()},
        }
