"""LangChain retriever and chat history against the real stack (skipped without the extra)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langchain_core")

from langchain_core.messages import AIMessage, HumanMessage

from pipeline.interfaces.client import Hindsight
from pipeline.interfaces.langchain import (
    BackgroundHindsight,
    HindsightChatMessageHistory,
    HindsightRetriever,
)
from pipeline.runtime.settings import Settings

pytestmark = pytest.mark.integration


async def test_retriever_async_and_sync(
    client: Hindsight, stack_settings: Settings, namespace: str
) -> None:
    receipt = await client.retain(namespace, "Our staging cluster runs Kubernetes 1.31 on GKE.")
    await client.wait_applied(receipt)

    retriever = HindsightRetriever(client=client, namespace=namespace, limit=3)
    docs = await retriever.ainvoke("What does staging run on?")
    assert docs and "Kubernetes" in docs[0].page_content
    meta = docs[0].metadata
    assert meta["memory_id"] == docs[0].id and meta["kind"] and meta["region"]
    assert isinstance(meta["score"], float) and meta["created_at"].startswith("20")
    assert meta["source_event_ids"] == [receipt.event_id]

    # Sync use: the client lives on a background loop; invoke blocks a worker thread.
    def sync_invoke() -> list[str]:
        with BackgroundHindsight(stack_settings) as hs:
            sync_retriever = HindsightRetriever(client=hs.client, loop=hs.loop, namespace=namespace)
            return [d.page_content for d in sync_retriever.invoke("What does staging run on?")]

    contents = await asyncio.to_thread(sync_invoke)
    assert any("Kubernetes" in c for c in contents)


async def test_sync_call_without_loop_names_the_fix(client: Hindsight, namespace: str) -> None:
    retriever = HindsightRetriever(client=client, namespace=namespace)
    with pytest.raises(Exception, match="loop="):
        await asyncio.to_thread(retriever.invoke, "anything")


async def test_chat_history_round_trip(
    client: Hindsight, stack_settings: Settings, namespace: str
) -> None:
    history = HindsightChatMessageHistory(client, namespace, "chat-1", user_name="dana")
    await history.aadd_messages(
        [
            HumanMessage("I'm allergic to peanuts, please remember that."),
            AIMessage("Noted: no peanuts."),
        ]
    )
    messages = await history.aget_messages()
    assert [type(m) for m in messages] == [HumanMessage, AIMessage]
    assert messages[0].name == "dana" and "peanuts" in messages[0].text

    # The turns fed long-term memory too (the history waits until the views applied them).
    recalled = await client.recall(namespace, "What am I allergic to?", reinforce=False)
    assert any("peanuts" in m.content for m in recalled.memories)

    # Another session of the namespace is separate; a new object sees the same history.
    other = HindsightChatMessageHistory(client, namespace, "chat-2")
    assert await other.aget_messages() == []
    again = HindsightChatMessageHistory(client, namespace, "chat-1")
    assert [m.text for m in await again.aget_messages()] == [m.text for m in messages]

    # Sync API from another thread, through a background client.
    def sync_round_trip() -> list[str]:
        with BackgroundHindsight(stack_settings) as hs:
            sync_history = HindsightChatMessageHistory(
                hs.client, namespace, "chat-1", loop=hs.loop, wait=False
            )
            sync_history.add_user_message("And I live in Lisbon.")
            texts = [str(m.text) for m in sync_history.messages]
            sync_history.clear()
            assert sync_history.messages == []
            return texts

    texts = await asyncio.to_thread(sync_round_trip)
    assert texts[-1] == "And I live in Lisbon." and len(texts) == 3
