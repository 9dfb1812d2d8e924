"""``PartitionTables``: the consolidate stage's pure part over prepared events — the watermark and
the skipping of re-sent inputs, its dead letters, determinism, namespace isolation, what a batch
writes, and a restore from exactly the bytes a commit writes."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import pytest
from aiokafka import TopicPartition
from ingest_support import (
    BROKER_T0_MS,
    DAY,
    EVENTS,
    PREPARED,
    T0,
    BagOfWordsEncoder,
    Log,
    Stages,
    by_content,
    only,
)

from pipeline.ingest.commit import PartitionOutput, TopicsOut, commit_output
from pipeline.ingest.consolidate import PartitionTables, PreparedMessage
from pipeline.ingest.prepare import InputMessage, prepare_batch
from pipeline.runtime.settings import MemoryPolicy
from pipeline.views.state_topic import PartitionState, parse_state_message
from schemas.codec import decode_model, encode
from schemas.memory import MemoryChanged, MemoryRecord
from schemas.prepared import EventPrepared

MYSQL = "We use MySQL for the billing database"
POSTGRES = "we moved from MySQL to PostgreSQL"
OFFICE = "The office is in the city center"
PREFERENCE = "I prefer dark mode"


def dump(records: Iterable[MemoryRecord]) -> list[dict[str, Any]]:
    return [r.model_dump(mode="json") for r in sorted(records, key=lambda r: r.id)]


def state(stages: Stages) -> dict[str, list[dict[str, Any]]]:
    return {ns: dump(bank.records.values()) for ns, bank in sorted(stages.banks.items())}


def conversation(log: Log) -> list[InputMessage]:
    """A small log touching every path: create, duplicate, supersede, filter, two languages."""
    return [
        log.turn("hi", T0),
        log.turn(MYSQL, T0 + timedelta(minutes=1)),
        log.turn(OFFICE, T0 + timedelta(minutes=2)),
        log.turn(PREFERENCE, T0 + timedelta(minutes=3)),
        log.turn(OFFICE + "!", T0 + timedelta(minutes=4)),
        log.turn(POSTGRES, T0 + timedelta(hours=1)),
        log.turn("以后所有代码都用 TypeScript", T0 + timedelta(hours=2), speaker="bob"),
        log.turn("the fix was to restart the worker", T0 + timedelta(hours=3)),
    ]


def follow_up(log: Log, ids: dict[str, MemoryRecord]) -> list[InputMessage]:
    """Signals and commands after the conversation (``ids``: its memories by content)."""
    return [
        log.recalled([ids[OFFICE].id, ids[PREFERENCE].id], T0 + DAY),
        log.command("feedback", T0 + DAY, memory_ids=[ids[OFFICE].id], score=1.0),
        log.command("pin", T0 + DAY, memory_ids=[ids[PREFERENCE].id]),
        log.command("forget", T0 + 2 * DAY, memory_ids=[ids[POSTGRES].id]),
        log.command("forget", T0 + 2 * DAY, query="forget the fix for the worker"),
        log.command("tick", T0 + 300 * DAY),
    ]


def prepared_message(offset: int, value: bytes | None, partition: int = 0) -> PreparedMessage:
    return PreparedMessage(PREPARED, partition, offset, b"acme", value)


# -- the watermark and re-sent inputs (I4, I5) --------------------------------------------------


def test_the_watermark_is_the_last_input_offset_applied_per_partition() -> None:
    stages, log, other = Stages(), Log(), Log(partition=3, namespace="globex")

    result = stages.process(
        [log.turn(MYSQL), log.turn(OFFICE), other.turn(PREFERENCE), log.command("tick")]
    )

    assert result.watermarks == {0: 2, 3: 0}
    mark = result.outputs[0].watermark
    assert mark is not None
    assert (mark.topic, mark.partition, mark.offset) == (EVENTS, 0, 2)
    assert mark.input_timestamp_ms == BROKER_T0_MS + 2  # the input's broker time, for lag
    assert stages.tables[0].applied_offset == 2
    assert stages.tables[3].applied_offset == 0


def test_input_offsets_at_or_below_the_watermark_are_skipped() -> None:
    log = Log()
    batch = [log.turn(MYSQL), log.turn(OFFICE), log.turn(PREFERENCE)]
    stages = Stages()
    stages.tables[0] = PartitionTables(0, EVENTS, MemoryPolicy(), applied_offset=1)

    result = stages.process(batch)

    assert result.counts["skipped_duplicates"] == 2
    assert [c.record.content for c in result.changes] == [PREFERENCE]
    assert result.watermarks == {0: 2}


def test_re_sent_prepared_events_change_nothing() -> None:
    # prepare is at-least-once: after its crash the same inputs come through again.
    stages, log = Stages(), Log()
    batch = conversation(log)
    stages.process(batch)
    before = state(stages)
    applied = stages.tables[0].applied_offset

    again = stages.process(batch)

    assert again.changes == []
    assert dict(again.counts) == {"skipped_duplicates": len(batch)}
    assert again.watermarks == {}  # nothing new applied: no watermark to write
    assert state(stages) == before
    assert stages.tables[0].applied_offset == applied


def test_a_partly_re_sent_batch_applies_only_the_inputs_past_the_watermark() -> None:
    stages, log = Stages(), Log()
    batch = conversation(log)
    stages.process(batch[:4])

    result = stages.process(batch[2:])

    assert result.counts["skipped_duplicates"] == 2
    assert result.counts["turns"] == len(batch) - 4
    reference = Stages()
    reference.process(conversation(Log()))
    assert state(stages) == state(reference)


def test_a_rejected_input_still_advances_the_watermark() -> None:
    stages, log = Stages(), Log()

    result = stages.process(
        [log.turn(MYSQL), log.raw(b"\xff\x00 not json", b"acme"), log.turn(OFFICE)]
    )

    [letter] = result.dead_letters
    assert (letter.stage, letter.source_offset) == ("decode", 1)
    assert result.counts["rejected"] == 1
    assert result.counts["memory_created"] == 2
    assert result.watermarks == {0: 2}

    # The stream stopped on nothing, and a re-sent marker is skipped like any other input.
    again = stages.process([log.raw(b"\xff\x00 not json", b"acme", offset=1)])
    assert dict(again.counts) == {"skipped_duplicates": 1}
    assert again.outputs[0].dead_letters == []


def test_a_watermark_alone_moves_when_a_batch_holds_only_rejected_input() -> None:
    stages, log = Stages(), Log()

    result = stages.process([log.raw(b"nope", b"acme"), log.raw(None, b"acme")])

    assert dict(result.counts) == {"rejected": 2}
    assert result.watermarks == {0: 1}
    assert result.writes() == {}
    assert not result.outputs[0].empty


# -- consolidation's own dead letters (I7) -----------------------------------------------------


@pytest.mark.parametrize(
    ("value", "reason", "field"),
    [
        (b"{oops", "malformed JSON", None),
        (None, "message has no value", None),
        (b'{"event_type": "TurnRecorded"}', "expected an EventPrepared object", "event_type"),
        (b'{"event_type": "EventPrepared", "schema_version": 1}', "Field required", "source"),
    ],
)
def test_an_unreadable_prepared_message_is_dead_lettered_with_its_bytes(
    value: bytes | None, reason: str, field: str | None
) -> None:
    stages, log = Stages(), Log()
    stages.process([log.turn(MYSQL)])
    out = PartitionOutput(0)

    stages.tables[0].apply(prepared_message(7, value), out)

    [letter] = out.dead_letters
    assert letter.stage == "consolidate"
    assert reason in letter.reason
    assert letter.field == field
    assert (letter.source_topic, letter.source_partition, letter.source_offset) == (PREPARED, 0, 7)
    assert base64.b64decode(letter.original_value_b64) == (value or b"")
    assert letter.original_key_b64 == base64.b64encode(b"acme").decode()
    # Its input offset is unknown, so the watermark stays; the partition goes on.
    assert out.watermark is None
    assert out.last_prepared_offset == 7
    assert stages.tables[0].applied_offset == 0
    assert stages.process([log.turn(OFFICE)]).counts["memory_created"] == 1


def test_a_prepared_event_for_another_input_partition_is_dead_lettered() -> None:
    stages, log = Stages(), Log(partition=1)
    [(_, prepared)] = prepare_batch([log.turn(MYSQL)], BagOfWordsEncoder()).prepared
    tables = stages.partition(0)
    out = PartitionOutput(0)

    tables.apply(prepared_message(0, encode(prepared)), out)

    [letter] = out.dead_letters
    assert (letter.stage, letter.field) == ("consolidate", "source.partition")
    assert "input partition 1" in letter.reason
    assert out.watermark is None and out.changes == []
    assert tables.banks == {} and tables.applied_offset == -1


def test_a_decision_that_raises_is_dead_lettered_and_the_partition_moves_on() -> None:
    stages, log = Stages(), Log()
    stages.process([log.turn(MYSQL)])
    before = state(stages)
    # Prepared by an encoder of another dimension: the similarity step cannot run.
    foreign = prepare_batch([log.turn(OFFICE, T0 + DAY)], BagOfWordsEncoder(dimension=8))
    [(message, prepared)] = foreign.prepared
    out = PartitionOutput(0)

    stages.tables[0].apply(prepared_message(1, encode(prepared)), out)

    [letter] = out.dead_letters
    assert letter.stage == "consolidate"
    assert letter.reason.startswith("consolidation failed: ")
    assert (letter.source_topic, letter.source_offset) == (PREPARED, 1)
    assert base64.b64decode(letter.original_value_b64) == encode(prepared)
    assert out.counts["dead_letters"] == 1
    assert out.changes == [] and out.writes == {}
    assert state(stages) == before  # nothing half-applied
    # Its input offset counts as applied: the watermark passes it and the next turn applies.
    assert out.watermark is not None and out.watermark.offset == message.offset
    assert stages.process([log.turn(PREFERENCE, T0 + DAY)]).counts["memory_created"] == 1


def test_a_prepared_turn_without_its_analysis_is_dead_lettered() -> None:
    stages, log = Stages(), Log()
    [(_, prepared)] = prepare_batch([log.turn(MYSQL)], BagOfWordsEncoder()).prepared
    broken = prepared.model_copy(update={"analysis": None})
    out = PartitionOutput(0)

    stages.partition(0).apply(prepared_message(0, encode(broken)), out)

    [letter] = out.dead_letters
    assert "a prepared turn needs its analysis" in letter.reason
    assert out.watermark is not None and out.watermark.offset == 0
    assert stages.bank("acme").records == {}


# -- determinism (I2) ---------------------------------------------------------------------------


def test_the_same_log_gives_identical_records_and_change_feed_in_two_fresh_runs() -> None:
    def run() -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
        stages, log = Stages(BagOfWordsEncoder()), Log()
        results = [stages.process(conversation(log))]
        results.append(stages.process(follow_up(log, by_content(stages))))
        feed = [u for r in results for out in r.outputs.values() for u in out.updates]
        return state(stages), [u.model_dump(mode="json") for u in feed]

    first_state, first_feed = run()
    second_state, second_feed = run()

    assert first_state == second_state
    assert first_feed == second_feed
    assert first_state["acme"]


@pytest.mark.parametrize("size", [1, 3])
def test_batch_boundaries_do_not_change_the_outcome(size: int) -> None:
    whole, log = Stages(), Log()
    records = conversation(log)
    whole.process(records)
    whole.process(follow_up(log, by_content(whole)))

    chunked, log = Stages(), Log()
    records = conversation(log)
    for start in range(0, len(records), size):
        chunked.process(records[start : start + size])
    tail = follow_up(log, by_content(chunked))
    for start in range(0, len(tail), size):
        chunked.process(tail[start : start + size])

    assert state(chunked) == state(whole)


def test_the_change_feed_follows_the_log_order() -> None:
    stages, log = Stages(), Log()

    result = stages.process([log.turn(MYSQL, T0), log.turn(POSTGRES, T0 + DAY)])

    feed = result.outputs[0].updates
    assert [u.change for u in feed] == ["created", "created", "superseded"]
    assert feed == [c.as_update() for c in result.changes]


# -- namespace isolation (I8) -------------------------------------------------------------------


@pytest.mark.parametrize("globex_partition", [0, 1])
def test_a_namespace_bank_never_holds_another_namespaces_memories(globex_partition: int) -> None:
    stages = Stages()
    acme = Log(namespace="acme")
    globex = acme if globex_partition == 0 else Log(namespace="globex", partition=1)

    result = stages.process(
        [
            acme.turn(MYSQL),
            globex.turn(MYSQL, namespace="globex"),
            globex.turn(POSTGRES, T0 + DAY, namespace="globex"),
            acme.turn(OFFICE),
        ]
    )

    assert {r.namespace for r in stages.bank("acme").records.values()} == {"acme"}
    assert {r.namespace for r in stages.bank("globex").records.values()} == {"globex"}
    acme_mysql = by_content(stages, "acme")[MYSQL]
    globex_mysql = by_content(stages, "globex")[MYSQL]
    assert acme_mysql.id != globex_mysql.id
    # globex's switch to PostgreSQL supersedes only globex's MySQL.
    assert globex_mysql.status == "superseded"
    assert acme_mysql.status == "active"
    assert acme_mysql.confirmations == 0
    assert result.namespaces() == {"acme", "globex"}


def test_a_duplicate_in_another_namespace_confirms_nothing() -> None:
    stages, log = Stages(), Log()
    stages.process([log.turn(OFFICE)])

    result = stages.process([log.turn(OFFICE, T0 + DAY, namespace="globex")])

    assert [c.change for c in result.changes] == ["created"]
    assert by_content(stages, "acme")[OFFICE].confirmations == 0


def test_commands_and_signals_only_touch_their_own_namespace() -> None:
    stages, log = Stages(), Log()
    stages.process([log.turn(OFFICE), log.turn(OFFICE, namespace="globex")])
    acme_id = by_content(stages, "acme")[OFFICE].id

    result = stages.process(
        [
            log.command("forget", T0 + DAY, namespace="globex", whole_namespace=True),
            log.command("erase", T0 + DAY, namespace="globex", memory_ids=[acme_id]),
            log.command("forget", T0 + DAY, namespace="globex", query="forget the office"),
            log.recalled([acme_id], T0 + DAY, namespace="globex"),
        ]
    )

    assert {c.record.namespace for c in result.changes} == {"globex"}
    acme_office = stages.bank("acme").records[acme_id]
    assert acme_office.status == "active"
    assert acme_office.access_count == 0


# -- what a batch writes ------------------------------------------------------------------------


def test_writes_hold_the_last_state_of_every_touched_record() -> None:
    stages, log = Stages(), Log()

    result = stages.process([log.turn(MYSQL, T0), log.turn(POSTGRES, T0 + DAY)])

    writes = result.writes()
    assert set(writes) == set(stages.bank("acme").records)
    assert {r.status for r in writes.values() if r is not None} == {"active", "superseded"}
    superseded = only(result, "superseded")[0]
    assert writes[superseded.id] == superseded == stages.bank("acme").records[superseded.id]


def test_an_erase_writes_a_tombstone_and_a_feed_entry_without_content() -> None:
    stages, log = Stages(), Log()
    stages.process([log.turn(OFFICE)])
    office = by_content(stages)[OFFICE]

    result = stages.process([log.command("erase", T0 + DAY, memory_ids=[office.id])])

    assert result.writes() == {office.id: None}
    [entry] = result.outputs[0].updates
    assert (entry.change, entry.memory_id, entry.content) == ("erased", office.id, "")


def test_changes_become_change_feed_entries() -> None:
    stages, log = Stages(), Log()

    result = stages.process([log.turn(MYSQL, T0), log.turn(POSTGRES, T0 + DAY)])

    updates = result.outputs[0].updates
    assert [u.change for u in updates] == ["created", "created", "superseded"]
    superseded = updates[-1]
    assert superseded.status == "superseded"
    assert superseded.cause_event_id == "turn-2"
    assert superseded.event_time == T0 + DAY
    assert superseded.related_ids == [updates[1].memory_id]


def test_every_turn_writes_its_namespaces_schedule() -> None:
    stages, log = Stages(), Log()

    result = stages.process([log.turn("hi", T0), log.turn(MYSQL, T0 + DAY), log.command("tick")])

    counters = result.outputs[0].counters
    assert set(counters) == {"acme"}
    assert (counters["acme"].turns_seen, counters["acme"].turns_since_consolidation) == (2, 2)
    assert counters["acme"].last_turn_at == T0 + DAY


@pytest.mark.parametrize("kind", ["turns", "commands", "signals", "rejected"])
def test_counts_name_what_happened(kind: str) -> None:
    stages, log = Stages(), Log()
    stages.process([log.turn(OFFICE)])
    record_id = by_content(stages)[OFFICE].id
    raw = {
        "turns": log.turn("hi"),
        "commands": log.command("forget", T0 + DAY, memory_ids=[record_id]),
        "signals": log.recalled([record_id], T0 + DAY),
        "rejected": log.raw(b"nope", b"acme"),
    }[kind]

    counts = stages.process([raw]).counts

    expected = {
        "turns": {"turns": 1, "filtered": 1},
        "commands": {"command_forget": 1, "memory_forgotten": 1},
        "signals": {"signals": 1, "memory_reinforced": 1},
        "rejected": {"rejected": 1},
    }[kind]
    assert dict(counts) == expected


# -- restore from what a commit writes ---------------------------------------------------------


class RecordingProducer:
    """Stands in for the transactional producer: keeps what one transaction sent, in order."""

    def __init__(self, fail_on_topic: str | None = None) -> None:
        self.sent: list[tuple[str, int, bytes | None, bytes | None]] = []
        self.calls: list[str] = []
        self.fail_on_topic = fail_on_topic

    async def begin_transaction(self) -> None:
        self.calls.append("begin")

    async def send(
        self, topic: str, key: bytes, value: bytes | None, partition: int
    ) -> asyncio.Future[None]:
        if topic == self.fail_on_topic:
            raise ConnectionError(f"broker went away while sending to {topic}")
        self.sent.append((topic, partition, key, value))
        acked: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        acked.set_result(None)
        return acked

    async def send_offsets_to_transaction(self, offsets: dict, group_id: str) -> None:
        self.calls.append(f"offsets {group_id}")

    async def commit_transaction(self) -> None:
        self.calls.append("commit")

    async def abort_transaction(self) -> None:
        self.calls.append("abort")


TOPICS_OUT = TopicsOut("state", "updates", "dead-letters")


def committed(outputs: Iterable[PartitionOutput]) -> tuple[PartitionState, RecordingProducer]:
    """Run every output through ``commit_output`` and fold the state messages as restore does."""
    producer = RecordingProducer()

    async def commit_all() -> None:
        for output in outputs:
            await commit_output(producer, TOPICS_OUT, output)  # type: ignore[arg-type]

    asyncio.run(commit_all())
    folded = PartitionState()
    for topic, _, key, value in producer.sent:
        if topic == TOPICS_OUT.state:
            folded.fold(parse_state_message(key, value))
    return folded, producer


def test_a_commit_writes_records_then_counters_then_the_watermark_then_the_feed() -> None:
    stages, log = Stages(), Log()
    stages.process([log.turn(MYSQL)])
    result = stages.process([log.turn(POSTGRES, T0 + DAY), log.raw(b"x", b"acme")])

    _, producer = committed([result.outputs[0]])

    kinds = [
        "record" if topic == "state" and key and key.startswith(b"m_") else f"{topic}:{key!r}"
        for topic, _, key, _ in producer.sent
    ]
    assert kinds == [
        "record",
        "record",
        "state:b'__bank__:acme'",
        f"state:{b'__watermark__:' + EVENTS.encode() + b':0'!r}",
        "updates:b'acme'",
        "updates:b'acme'",
    ]
    assert {partition for _, partition, _, _ in producer.sent} == {0}
    assert producer.calls == ["begin", "commit"]
    feed = [decode_model(MemoryChanged, v or b"") for t, _, _, v in producer.sent if t == "updates"]
    assert [u.change for u in feed] == ["created", "superseded"]


def test_a_failed_send_aborts_the_transaction_and_commits_nothing() -> None:
    stages, log = Stages(), Log()
    result = stages.process([log.turn(MYSQL)])
    producer = RecordingProducer(fail_on_topic="updates")

    with pytest.raises(ConnectionError):
        asyncio.run(commit_output(producer, TOPICS_OUT, result.outputs[0]))  # type: ignore[arg-type]

    assert producer.calls == ["begin", "abort"]


def test_consumed_offsets_go_into_the_same_transaction() -> None:
    stages, log = Stages(), Log()
    result = stages.process([log.turn(MYSQL)])
    producer = RecordingProducer()
    consumed = {TopicPartition(PREPARED, 0): result.outputs[0].last_prepared_offset + 1}

    asyncio.run(
        commit_output(
            producer,  # type: ignore[arg-type]
            TOPICS_OUT,
            result.outputs[0],
            consumed=consumed,
            group_id="hindsight-consolidate",
        )
    )
    with pytest.raises(ValueError, match="consumer group"):
        asyncio.run(commit_output(producer, TOPICS_OUT, result.outputs[0], consumed=consumed))  # type: ignore[arg-type]

    assert producer.calls == [
        "begin",
        "offsets hindsight-consolidate",
        "commit",
        "begin",
        "abort",
    ]


def test_tables_restored_from_the_committed_bytes_decide_as_the_uninterrupted_ones() -> None:
    log = Log()
    inputs = conversation(log)
    reference = Stages()
    reference.process(inputs)
    tail = follow_up(log, by_content(reference))
    reference.process(tail)

    crashed = Stages()
    first = crashed.process(inputs[:5])
    state_bytes, _ = committed(first.outputs.values())
    resumed = Stages()
    resumed.tables[0] = PartitionTables.restore(0, EVENTS, MemoryPolicy(), state_bytes)
    assert resumed.tables[0].applied_offset == 4
    assert resumed.bank("acme").counters() == crashed.bank("acme").counters()
    resumed.process(inputs)  # consumption resumes at the committed offset or before it
    resumed.process(tail)

    assert state(resumed) == state(reference)


def test_a_restored_record_round_trips_its_vector_exactly() -> None:
    stages, log = Stages(), Log()
    result = stages.process([log.turn(MYSQL)])

    state_bytes, _ = committed(result.outputs.values())

    [record] = state_bytes.records.values()
    assert record == stages.bank("acme").records[record.id]
    [(_, prepared)] = prepare_batch([log.turn(MYSQL, offset=0)], BagOfWordsEncoder()).prepared
    assert isinstance(prepared, EventPrepared) and prepared.analysis is not None
    assert record.vector == prepared.analysis.vector().tolist()
