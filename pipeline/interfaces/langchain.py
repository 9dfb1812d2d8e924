"""LangChain integration (extra ``langchain``): a retriever and a chat-message history.

``HindsightRetriever`` answers ``invoke``/``ainvoke`` with recalled memories as ``Document``s.
``HindsightChatMessageHistory`` retains every added message as a turn and reads a session's
messages back from the turns log (the source of truth, I1), so two processes see one history.

The ``Hindsight`` client is async and bound to the event loop it was connected on. Async code
passes the client as is. Sync code (``invoke``, ``add_messages``) needs the client's loop running
in another thread: ``BackgroundHindsight`` provides exactly that::

    with BackgroundHindsight(settings) as hs:
        retriever = HindsightRetriever(client=hs.client, loop=hs.loop, namespace="alice")
        docs = retriever.invoke("which database do we use?")
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, TypeVar

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.documents import Document
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )
    from langchain_core.retrievers import BaseRetriever
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "pipeline.interfaces.langchain needs langchain-core: "
        "pip install 'hindsight-memory[langchain]'"
    ) from error

from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import ConfigDict, Field

from pipeline.crypto.envelope import open_input_event
from pipeline.crypto.keystore import TopicKeyStore
from pipeline.interfaces.client import Hindsight, Receipt
from pipeline.recall.types import RecalledMemory
from pipeline.runtime.kafka import client_kwargs, stop_consumer
from pipeline.runtime.settings import Settings
from pipeline.views.state_topic import partition_for, partition_ids
from schemas.errors import DataKeyDestroyed, HindsightError, InvalidEvent, UnknownDataKey
from schemas.events import TurnRecorded, check_namespace
from schemas.memory import Region
from topics.catalogue import topic_names

T = TypeVar("T")

ROLE_OF_TYPE = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


# -- calling the async client from sync or foreign-loop code --------------------------------
def _run_sync(loop: asyncio.AbstractEventLoop | None, call: Callable[[], Awaitable[T]]) -> T:
    if loop is None:
        raise HindsightError(
            "sync use needs loop=: the event loop the client runs on (see BackgroundHindsight), "
            "or call the async methods (ainvoke, aadd_messages, aget_messages)"
        )
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        # Blocking here would wait for the very loop we block: a deadlock.
        raise HindsightError("sync call from the client's own event loop; use the async method")
    return asyncio.run_coroutine_threadsafe(_as_coroutine(call), loop).result()


async def _run_async(loop: asyncio.AbstractEventLoop | None, call: Callable[[], Awaitable[T]]) -> T:
    if loop is None or loop is asyncio.get_running_loop():
        return await call()
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_as_coroutine(call), loop))


async def _as_coroutine(call: Callable[[], Awaitable[T]]) -> T:
    return await call()


class BackgroundHindsight:
    """A connected client on a private event-loop thread, for sync callers."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="hindsight-client", daemon=True
        )
        self._connection: AbstractAsyncContextManager[Hindsight] | None = None
        self._client: Hindsight | None = None

    @property
    def client(self) -> Hindsight:
        if self._client is None:
            raise HindsightError("BackgroundHindsight is not started; use it in a with block")
        return self._client

    def __enter__(self) -> BackgroundHindsight:
        self._thread.start()
        connection = Hindsight.connect(self.settings)
        self._client = asyncio.run_coroutine_threadsafe(connection.__aenter__(), self.loop).result()
        self._connection = connection
        return self

    def __exit__(self, *exc: object) -> None:
        if self._connection is not None:
            asyncio.run_coroutine_threadsafe(
                self._connection.__aexit__(None, None, None), self.loop
            ).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


# -- retriever ------------------------------------------------------------------------------
def memory_document(memory: RecalledMemory) -> Document:
    return Document(
        page_content=memory.content,
        id=memory.id,
        metadata={
            "memory_id": memory.id,
            "citation": memory.citation,
            "namespace": memory.namespace,
            "kind": memory.kind,
            "region": memory.region,
            "status": memory.status,
            "score": memory.score,
            "importance": memory.importance,
            "created_at": memory.created_at.isoformat(),
            "valid_from": memory.valid_from.isoformat(),
            "valid_to": memory.valid_to.isoformat() if memory.valid_to else None,
            "superseded_by": memory.superseded_by,
            "source_event_ids": [turn.event_id for turn in memory.provenance],
        },
    )


class HindsightRetriever(BaseRetriever):
    """Recall as a LangChain retriever: one ``Document`` per memory, best first."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: Hindsight = Field(exclude=True)
    namespace: str
    loop: asyncio.AbstractEventLoop | None = Field(default=None, exclude=True)
    limit: int | None = None
    regions: list[Region] | None = None
    at: datetime | None = None  # recall as of this time; default now
    include_history: bool = False
    reinforce: bool = True  # recall hits reinforce activation (published as a signal event)

    def _recall(self, query: str) -> Callable[[], Awaitable[list[Document]]]:
        async def call() -> list[Document]:
            result = await self.client.recall(
                check_namespace(self.namespace),
                query,
                at=self.at,
                limit=self.limit,
                regions=self.regions,
                include_history=self.include_history,
                reinforce=self.reinforce,
            )
            return [memory_document(memory) for memory in result.memories]

        return call

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return _run_sync(self.loop, self._recall(query))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        return await _run_async(self.loop, self._recall(query))


# -- chat history ---------------------------------------------------------------------------
def turn_to_message(turn: TurnRecorded) -> BaseMessage:
    kind = turn.metadata.get("lc_type") or {"assistant": "ai"}.get(turn.role, turn.role)
    common: dict[str, Any] = {"content": turn.text, "id": turn.event_id}
    if kind == "ai":
        return AIMessage(name=turn.speaker, **common)
    if kind == "system":
        return SystemMessage(**common)
    if kind == "tool":
        return ToolMessage(tool_call_id=str(turn.metadata.get("tool_call_id", "")), **common)
    return HumanMessage(name=turn.speaker, **common)


async def _events_partition(settings: Settings, namespace: str) -> TopicPartition:
    topic = topic_names(settings.topic_prefix)["events"]
    ids = await partition_ids(settings.bootstrap or "", topic, settings.kafka)
    if not ids:
        raise HindsightError(f"input log {topic} does not exist; start the stack first")
    return TopicPartition(topic, partition_for(namespace, len(ids)))


async def read_session_turns(
    settings: Settings,
    namespace: str,
    session_id: str,
    after_offset: int = -1,
    keys: TopicKeyStore | None = None,
) -> tuple[list[TurnRecorded], int]:
    """A session's turns after ``after_offset`` in log order, and the log's last offset.

    Reads only the namespace's partition of the input log, up to its end at call time.
    An ``after_offset`` past the end reads nothing and just reports the end. Sealed turns open
    with ``keys``; erased ones are gone from the history too.
    """
    partition = await _events_partition(settings, namespace)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        **client_kwargs(settings.kafka),
    )
    await consumer.start()
    turns: list[TurnRecorded] = []
    try:
        consumer.assign([partition])
        end = (await consumer.end_offsets([partition]))[partition]
        start = after_offset + 1
        if start < end:
            consumer.seek(partition, start)
        while start < end and await consumer.position(partition) < end:
            batch = await consumer.getmany(partition, timeout_ms=500)
            fetched = batch.get(partition, [])
            if keys is not None and fetched:
                await keys.wait_for_values([m.value for m in fetched], settings.key_wait_s)
            ring = None if keys is None else keys.ring
            for message in fetched:
                if message.offset >= end:
                    break
                try:
                    event = open_input_event(message.value, ring)
                except (InvalidEvent, UnknownDataKey, DataKeyDestroyed):
                    continue  # dead-lettered or erased; not part of any history
                if (
                    isinstance(event, TurnRecorded)
                    and event.namespace == namespace
                    and event.session_id == session_id
                ):
                    turns.append(event)
    finally:
        await stop_consumer(consumer)
    return turns, end - 1


class HindsightChatMessageHistory(BaseChatMessageHistory):
    """A session's messages, stored as turns in Hindsight.

    Each added message becomes a ``TurnRecorded`` (role from the message type, speaker from
    ``message.name`` or ``user_name``/``ai_name``), so it also feeds long-term memory. ``messages``
    reads the session back from the input log. ``clear()`` hides earlier turns from this object
    only: the log is immutable; use ``client.forget`` to forget what was remembered.
    """

    def __init__(
        self,
        client: Hindsight,
        namespace: str,
        session_id: str,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        user_name: str = "user",
        ai_name: str = "assistant",
        wait: bool = True,
    ) -> None:
        super().__init__()
        self.client = client
        self.namespace = check_namespace(namespace)
        self.session_id = session_id
        self.loop = loop
        self.user_name = user_name
        self.ai_name = ai_name
        self.wait = wait  # wait until recall sees the messages (read-your-writes)
        self._after_offset = -1

    def _speaker(self, message: BaseMessage) -> str:
        if message.name:
            return message.name
        return self.ai_name if message.type == "ai" else self.user_name

    async def _retain(self, messages: Sequence[BaseMessage]) -> None:
        last: Receipt | None = None
        for message in messages:
            metadata: dict[str, Any] = {"lc_type": message.type}
            if isinstance(message, ToolMessage):
                metadata["tool_call_id"] = message.tool_call_id
            last = await self.client.retain(
                self.namespace,
                str(message.text),
                speaker=self._speaker(message),
                session_id=self.session_id,
                role=ROLE_OF_TYPE.get(message.type, "user"),
                metadata=metadata,
                # A message id makes the retain idempotent: a retried add stores one turn.
                event_id=f"lc-{message.id}" if message.id else None,
            )
        if self.wait and last is not None:
            await self.client.wait_applied(last)

    async def _read(self) -> list[BaseMessage]:
        turns, _ = await read_session_turns(
            self.client.settings,
            self.namespace,
            self.session_id,
            self._after_offset,
            self.client.key_store,
        )
        return [turn_to_message(turn) for turn in turns]

    async def _log_end(self) -> int:
        # Nothing after the end is read: only the end offset comes back.
        _, last = await read_session_turns(
            self.client.settings, self.namespace, self.session_id, after_offset=2**62
        )
        return last

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        return _run_sync(self.loop, self._read)

    async def aget_messages(self) -> list[BaseMessage]:
        return await _run_async(self.loop, self._read)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        _run_sync(self.loop, lambda: self._retain(messages))

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        await _run_async(self.loop, lambda: self._retain(messages))

    def clear(self) -> None:
        self._after_offset = _run_sync(self.loop, self._log_end)

    async def aclear(self) -> None:
        self._after_offset = await _run_async(self.loop, self._log_end)
