"""The Python client: what an agent uses to retain turns and recall memories.

``retain`` publishes an immutable ``TurnRecorded`` event and returns where it landed in the log;
``recall`` answers from the hot recall view (fed by the compacted state topic) and can wait until
that view has applied a given turn (read-your-writes, I5). Every recall publishes its hits to the
signals topic, so reinforcement is an event that replay reproduces.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiokafka import AIOKafkaProducer
from pydantic import BaseModel

from pipeline.models.encoders import Encoder, load_encoder
from pipeline.recall.context import format_context
from pipeline.recall.engine import RecallEngine
from pipeline.recall.hot_index import HotIndex
from pipeline.recall.types import RecalledMemory
from pipeline.runtime.settings import Settings
from pipeline.views.state_topic import StateFollower, make_producer, partition_for
from schemas.codec import encode, validate
from schemas.errors import HindsightError, InvalidEvent, MemoryNotFound
from schemas.events import CommandIssued, MemoriesRecalled, RecallHit, TurnRecorded, check_namespace
from schemas.memory import MemoryRecord
from topics.catalogue import topic_names


@dataclass(frozen=True)
class Receipt:
    """Where an event landed in the log: pass it to ``recall(wait_for=...)``."""

    event_id: str
    namespace: str
    topic: str
    partition: int
    offset: int


TurnReceipt = Receipt


FORGET_TIE_MARGIN = 0.03


class RecallResult(BaseModel):
    namespace: str
    query: str
    at: datetime
    route: str
    memories: list[RecalledMemory]
    context: str


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
    ) -> None:
        self.settings = settings
        self._producer = producer
        self._follower = follower
        self._index = index
        self._names = topic_names(settings.topic_prefix)
        self._encoder: Encoder | None = None
        self._engine: RecallEngine | None = None
        self._encoder_lock = asyncio.Lock()

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
        producer = make_producer(settings.bootstrap, "hindsight-client")
        await producer.start()
        index = HotIndex()
        follower = StateFollower(
            settings.bootstrap, names["memory_state"], index.apply, index.remove
        )
        try:
            await follower.start()
            client = cls(settings, producer, follower, index)
            if encoder is not None:
                client._set_encoder(encoder)
            yield client
        finally:
            await follower.stop()
            await producer.stop()

    # -- writing -----------------------------------------------------------------------------
    async def _publish(self, role: str, namespace: str, event: BaseModel, event_id: str) -> Receipt:
        topic = self._names[role]  # type: ignore[index]
        metadata = await self._producer.send_and_wait(
            topic, key=namespace.encode(), value=encode(event)
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
        return await self._publish("turns", namespace, turn, turn.event_id)

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
        topic = self._names["turns"]
        futures = [
            await self._producer.send(topic, key=e.namespace.encode(), value=encode(e))
            for e in events
        ]
        results = await asyncio.gather(*futures)
        return [
            Receipt(e.event_id, e.namespace, topic, meta.partition, meta.offset)
            for e, meta in zip(events, results, strict=True)
        ]

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
            },
        )
        return await self._publish("commands", namespace, event, event.event_id)

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

        Forgetting by query resolves the query to ids here and records both in the command, so the
        log says exactly what was forgotten and replay does not depend on a later recall.
        """
        ids = list(memory_ids)
        if query is not None:
            ids += [
                i for i in await self.resolve_forget_query(namespace, query, at=at) if i not in ids
            ]
        if not ids and not whole_namespace:
            raise HindsightError(
                "forget: give memory_ids, a query that matches, or whole_namespace=True"
            )
        return await self.command(
            namespace,
            "erase" if hard else "forget",
            memory_ids=ids,
            whole_namespace=whole_namespace,
            query=query,
            reason=reason,
            at=at,
        )

    async def resolve_forget_query(
        self, namespace: str, query: str, *, at: datetime | None = None
    ) -> list[str]:
        """The memories a forget-by-query means: the best match and its near-ties only.

        Forgetting is destructive, so it takes less than a recall would show as context.
        """
        found = await self.recall(namespace, query, at=at, reinforce=False)
        if not found.memories:
            return []
        best = found.memories[0].score
        return [m.id for m in found.memories if m.score >= best - FORGET_TIE_MARGIN]

    async def advance(self, namespace: str, to: datetime) -> Receipt:
        """Move a namespace's event time forward (a tick: idle consolidation and cooling)."""
        return await self.command(namespace, "tick", at=to)

    async def pin(self, namespace: str, memory_ids: Sequence[str], pinned: bool = True) -> Receipt:
        return await self.command(namespace, "pin" if pinned else "unpin", memory_ids=memory_ids)

    # -- reading -----------------------------------------------------------------------------
    async def wait_applied(self, receipt: Receipt, timeout: float = 30.0) -> None:
        await self._follower.wait_for(receipt.topic, receipt.partition, receipt.offset, timeout)

    async def wait_offset(self, namespace: str, offset: int, timeout: float = 30.0) -> None:
        partition = partition_for(namespace, self.settings.partitions)
        await self._follower.wait_for(self._names["turns"], partition, offset, timeout)

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
        if isinstance(wait_for, Receipt):
            await self.wait_applied(wait_for, wait_timeout)
        elif isinstance(wait_for, int):
            await self.wait_offset(namespace, wait_for, wait_timeout)
        engine = await self._recall_engine()
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
            await self._publish("signals", namespace, signal, signal.event_id)
        return RecallResult(
            namespace=namespace,
            query=query,
            at=moment,
            route=route,
            memories=memories,
            context=context,
        )

    def records(self, namespace: str) -> list[MemoryRecord]:
        return list(self._index.records(namespace))

    async def inspect(self, namespace: str, memory_id: str) -> MemoryRecord:
        """The memory with its provenance and history (the vector stays in the index)."""
        check_namespace(namespace)
        record = self._index.get(memory_id)
        if record is None or record.namespace != namespace:
            raise MemoryNotFound(namespace, memory_id)
        return record

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
