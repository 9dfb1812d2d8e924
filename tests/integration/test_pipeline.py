"""The ingest pipeline end to end: real broker, real stage processes, real Milvus Lite file."""

from __future__ import annotations

import asyncio
import base64
import uuid
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from pipeline.crypto.envelope import unseal
from pipeline.interfaces.client import Hindsight
from pipeline.runtime.settings import Settings
from schemas.memory import DeadLetter, MemoryChanged
from topics.catalogue import topic_names

pytestmark = pytest.mark.integration

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


async def test_retain_then_recall_reads_its_own_write(client: Hindsight, namespace: str) -> None:
    receipt = await client.retain(
        namespace, "I prefer dark mode in every editor.", speaker="alice", event_time=T0
    )
    result = await client.recall(
        namespace, "which editor theme do I like?", at=T0, wait_for=receipt, reinforce=False
    )
    assert result.memories, "the turn retained one step ago must be recallable"
    top = result.memories[0]
    assert "dark mode" in top.content
    assert top.kind == "preference"
    assert top.provenance[0].event_id == receipt.event_id
    assert "dark mode" in result.context


async def test_chit_chat_is_not_stored(client: Hindsight, namespace: str) -> None:
    receipts = [
        await client.retain(namespace, text, event_time=T0 + timedelta(minutes=i))
        for i, text in enumerate(["hi", "thanks!", "lol ok", "你好", "哈哈好的，谢谢"])
    ]
    await client.wait_applied(receipts[-1])
    assert client.records(namespace) == []


async def test_correction_supersedes_the_older_fact(client: Hindsight, namespace: str) -> None:
    await client.retain(
        namespace, "We use MySQL for the billing database.", speaker="alice", event_time=T0
    )
    last = await client.retain(
        namespace,
        "We moved from MySQL to PostgreSQL last weekend.",
        speaker="alice",
        event_time=T0 + timedelta(days=7),
    )
    current = await client.recall(
        namespace,
        "What database do we use?",
        at=T0 + timedelta(days=8),
        wait_for=last,
        reinforce=False,
    )
    contents = [m.content for m in current.memories]
    assert any("PostgreSQL" in c for c in contents)
    assert not any(c.startswith("We use MySQL") for c in contents), (
        "superseded facts are not current"
    )

    records = {r.content: r for r in client.records(namespace)}
    old = records["We use MySQL for the billing database."]
    new = records["We moved from MySQL to PostgreSQL last weekend."]
    assert old.status == "superseded" and old.superseded_by == new.id
    assert old.valid_to == new.valid_from
    assert any(a.memory_id == old.id and a.relation == "supersedes" for a in new.associations)

    history = await client.recall(
        namespace,
        "What database do we use?",
        at=T0 + timedelta(days=8),
        include_history=True,
        truncate=False,
        limit=10,
        reinforce=False,
    )
    assert any(m.id == old.id and m.status == "superseded" for m in history.memories)


async def test_namespaces_never_see_each_other(client: Hindsight) -> None:
    first, second = f"ns-{uuid.uuid4().hex[:8]}", f"ns-{uuid.uuid4().hex[:8]}"
    await client.retain(first, "My locker code is 4711.", event_time=T0)
    receipt = await client.retain(second, "My favourite fruit is mango.", event_time=T0)
    await client.wait_applied(receipt)
    found = await client.recall(
        second, "What is my locker code?", at=T0, reinforce=False, truncate=False, limit=10
    )
    assert all("4711" not in m.content for m in found.memories)
    assert all(m.namespace == second for m in found.memories)


async def test_change_feed_announces_created_and_superseded(
    client: Hindsight, namespace: str, stack_settings: Settings
) -> None:
    await client.retain(
        namespace, "From now on all code should be written in Python.", event_time=T0
    )
    last = await client.retain(
        namespace,
        "From now on all code should be written in TypeScript.",
        event_time=T0 + timedelta(hours=1),
    )
    await client.wait_applied(last)
    changes = await _read_topic(
        stack_settings, "memory_updates", lambda v: orjson.loads(v)["namespace"] == namespace, 3
    )
    # Entries are sealed with their memory's data key (the envelope names the namespace).
    kinds = [
        MemoryChanged.model_validate(
            orjson.loads(unseal(v, client.keys, "memory_updates").content or b"")
        ).change
        for v in changes
    ]
    assert kinds.count("created") == 2
    assert "superseded" in kinds


BAD_INPUTS: list[tuple[str, bytes, str, str | None]] = [
    ("malformed json", b'{"event_type": "TurnRecorded", ', "decode", None),
    ("not an object", b"[1, 2, 3]", "decode", None),
    (
        "missing text",
        b'{"event_type":"TurnRecorded","schema_version":2,"event_id":"x1","namespace":"NS",'
        b'"session_id":"s","speaker":"a","event_time":"2024-01-01T00:00:00+00:00"}',
        "validate",
        "text",
    ),
    (
        "wrong type",
        b'{"event_type":"TurnRecorded","schema_version":2,"event_id":"x2","namespace":"NS",'
        b'"session_id":"s","speaker":"a","text":42,"event_time":"2024-01-01T00:00:00+00:00"}',
        "validate",
        "text",
    ),
    (
        "unknown version",
        b'{"event_type":"TurnRecorded","schema_version":99,"event_id":"x3","namespace":"NS",'
        b'"text":"hello world"}',
        "upcast",
        "schema_version",
    ),
    (
        "empty text",
        b'{"event_type":"TurnRecorded","schema_version":2,"event_id":"x4","namespace":"NS",'
        b'"session_id":"s","speaker":"a","text":"   ","event_time":"2024-01-01T00:00:00+00:00"}',
        "validate",
        "text",
    ),
    (
        "oversized text",
        b'{"event_type":"TurnRecorded","schema_version":2,"event_id":"x5","namespace":"NS",'
        b'"session_id":"s","speaker":"a","text":"'
        + b"a" * 20_000
        + b'","event_time":"2024-01-01T00:00:00+00:00"}',
        "validate",
        "text",
    ),
    (
        "bad namespace",
        b'{"event_type":"TurnRecorded","schema_version":2,"event_id":"x6","namespace":"bad ns!",'
        b'"session_id":"s","speaker":"a","text":"hello","event_time":"2024-01-01T00:00:00+00:00"}',
        "validate",
        "namespace",
    ),
]


@pytest.mark.parametrize(
    ("label", "raw", "stage", "field"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS]
)
async def test_bad_input_goes_to_dead_letters_and_the_worker_keeps_going(
    client: Hindsight,
    namespace: str,
    stack_settings: Settings,
    label: str,
    raw: bytes,
    stage: str,
    field: str | None,
) -> None:
    names = topic_names(stack_settings.topic_prefix)
    payload = raw.replace(b'"NS"', orjson.dumps(namespace))
    producer = AIOKafkaProducer(bootstrap_servers=stack_settings.bootstrap, acks="all")
    await producer.start()
    try:
        meta = await producer.send_and_wait(names["events"], key=namespace.encode(), value=payload)
    finally:
        await producer.stop()

    def ours(value: bytes) -> bool:
        letter = orjson.loads(value)
        return (letter["source_partition"], letter["source_offset"]) == (
            meta.partition,
            meta.offset,
        )

    letters = await _read_topic(stack_settings, "dead_letters", ours, 1)
    letter = DeadLetter.model_validate(orjson.loads(letters[0]))
    assert base64.b64decode(letter.original_value_b64) == payload, "the original bytes are kept"
    assert letter.stage == stage
    assert letter.reason
    if field is not None:
        assert letter.field == field
    # The worker is still alive and applying.
    receipt = await client.retain(
        namespace, f"After the bad input ({label}) I still work at Acme.", event_time=T0
    )
    result = await client.recall(
        namespace, "Where do I work?", at=T0, wait_for=receipt, reinforce=False
    )
    assert any("Acme" in m.content for m in result.memories)


async def test_forget_hides_a_memory_but_keeps_it_for_audit(
    client: Hindsight, namespace: str
) -> None:
    receipt = await client.retain(namespace, "My passport number is X1234567.", event_time=T0)
    found = await client.recall(
        namespace, "passport number", at=T0, wait_for=receipt, reinforce=False
    )
    memory_id = found.memories[0].id
    forgotten = await client.forget(namespace, memory_ids=[memory_id], at=T0 + timedelta(minutes=1))
    await client.wait_applied(forgotten)
    again = await client.recall(
        namespace, "passport number", at=T0 + timedelta(minutes=2), reinforce=False
    )
    assert all(m.id != memory_id for m in again.memories)
    record = await client.inspect(namespace, memory_id)
    assert record.status == "forgotten"
    assert record.history[-1].change == "forgotten"


async def test_hard_erase_leaves_nothing_in_the_views(client: Hindsight, namespace: str) -> None:
    receipt = await client.retain(namespace, "My home address is 12 Elm Street.", event_time=T0)
    found = await client.recall(namespace, "home address", at=T0, wait_for=receipt, reinforce=False)
    memory_id = found.memories[0].id
    erased = await client.forget(namespace, memory_ids=[memory_id], hard=True, at=T0)
    await client.wait_applied(erased)
    assert all(r.id != memory_id for r in client.records(namespace))


async def test_recall_hits_are_signals_that_reinforce(client: Hindsight, namespace: str) -> None:
    receipt = await client.retain(
        namespace, "Our staging cluster runs in Frankfurt.", event_time=T0
    )
    found = await client.recall(
        namespace, "where is staging?", at=T0 + timedelta(days=1), wait_for=receipt
    )
    memory_id = found.memories[0].id
    assert found.signal is not None, "a recall with hits publishes its reinforcement signal"
    before = await client.inspect(namespace, memory_id)
    await client.wait_applied(found.signal)  # the signal has an offset like every other write
    after = await client.inspect(namespace, memory_id)
    assert after.access_count == before.access_count + 1
    assert after.last_access is not None


async def test_forget_by_query_right_after_retain_takes_the_new_memory(
    client: Hindsight, namespace: str
) -> None:
    """No wait between the retain and the forget: the pipeline resolves the query in the log."""
    for attempt in range(10):
        retained = await client.retain(
            namespace, f"My locker code is {4100 + attempt}.", event_time=T0
        )
        forget = await client.forget(namespace, query="my locker code", at=T0)
        assert forget.offset > retained.offset
        await client.wait_applied(forget)
        codes = {r.content: r.status for r in client.records(namespace)}
        assert codes[f"My locker code is {4100 + attempt}."] == "forgotten", codes
        assert forget.event_id and client.changed_by(forget)


async def test_forget_by_query_takes_the_new_memory_when_an_older_one_matches_too(
    client: Hindsight, namespace: str
) -> None:
    old = await client.retain(namespace, "I keep my gym locker key in the blue bag.", event_time=T0)
    await client.wait_applied(old)
    await client.retain(
        namespace, "My gym locker code is 9921.", event_time=T0 + timedelta(minutes=1)
    )
    forget = await client.forget(
        namespace, query="my gym locker code", at=T0 + timedelta(minutes=2)
    )
    await client.wait_applied(forget)
    statuses = {r.content: r.status for r in client.records(namespace)}
    assert statuses["My gym locker code is 9921."] == "forgotten", statuses


async def test_forget_by_query_behind_a_backlog_still_takes_the_new_memory(
    client: Hindsight, namespace: str
) -> None:
    backlog = [
        {
            "namespace": namespace,
            "text": f"Note {i}: the build number today is {1000 + i}.",
            "event_time": T0 + timedelta(seconds=i),
        }
        for i in range(100)
    ]
    await client.retain_many(backlog)
    await client.retain(
        namespace,
        "My bank PIN hint is the year my dog was born.",
        event_time=T0 + timedelta(hours=1),
    )
    forget = await client.forget(namespace, query="bank PIN hint", at=T0 + timedelta(hours=1))
    await client.wait_applied(forget, timeout=120)
    statuses = {r.content: r.status for r in client.records(namespace)}
    assert statuses["My bank PIN hint is the year my dog was born."] == "forgotten"
    assert sum(1 for status in statuses.values() if status == "forgotten") == 1, (
        "only the memory the query means is forgotten"
    )


async def _read_topic(
    settings: Settings, role: str, accept, count: int, timeout: float = 30.0
) -> list[bytes]:  # type: ignore[no-untyped-def]
    names = topic_names(settings.topic_prefix)
    consumer = AIOKafkaConsumer(
        names[role],
        bootstrap_servers=settings.bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        isolation_level="read_committed",  # consolidate writes in transactions
    )
    await consumer.start()
    found: list[bytes] = []
    try:
        deadline = asyncio.get_running_loop().time() + timeout
        while len(found) < count and asyncio.get_running_loop().time() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for messages in batches.values():
                found += [m.value for m in messages if m.value is not None and accept(m.value)]
    finally:
        await consumer.stop()
    assert len(found) >= count, f"expected {count} messages on {role}, got {len(found)}"
    return found
