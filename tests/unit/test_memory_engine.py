"""``MemoryEngine.process``: decoding and dead letters, watermarks and idempotent replay,
determinism and namespace isolation — the batch plumbing around the memory decisions."""

from __future__ import annotations

import base64
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import orjson
import pytest
from ingest_support import (
    DAY,
    T0,
    TOPICS,
    BagOfWordsEncoder,
    Log,
    by_content,
    make_engine,
    only,
)

from pipeline.ingest.engine import MemoryEngine, RawRecord
from schemas.codec import encode
from schemas.events import TurnRecorded
from schemas.memory import DeadLetter, MemoryRecord

MYSQL = "We use MySQL for the billing database"
POSTGRES = "we moved from MySQL to PostgreSQL"
OFFICE = "The office is in the city center"
PREFERENCE = "I prefer dark mode"


def dump(records: Iterable[MemoryRecord]) -> list[dict[str, Any]]:
    return [r.model_dump(mode="json") for r in sorted(records, key=lambda r: r.id)]


def state(engine: MemoryEngine) -> dict[str, list[dict[str, Any]]]:
    return {ns: dump(bank.records.values()) for ns, bank in sorted(engine.banks.items())}


def conversation(log: Log) -> list[RawRecord]:
    """A small log touching every path: create, duplicate, supersede, forget, recall, tick."""
    records = [
        log.turn("hi", T0),
        log.turn(MYSQL, T0 + timedelta(minutes=1)),
        log.turn(OFFICE, T0 + timedelta(minutes=2)),
        log.turn(PREFERENCE, T0 + timedelta(minutes=3)),
        log.turn(OFFICE + "!", T0 + timedelta(minutes=4)),
        log.turn(POSTGRES, T0 + timedelta(hours=1)),
        log.turn("以后所有代码都用 TypeScript", T0 + timedelta(hours=2), speaker="bob"),
        log.turn("the fix was to restart the worker", T0 + timedelta(hours=3)),
    ]
    return records


def follow_up(log: Log, engine: MemoryEngine) -> list[RawRecord]:
    ids = by_content(engine)
    return [
        log.recalled([ids[OFFICE].id, ids[PREFERENCE].id], T0 + DAY),
        log.command("feedback", T0 + DAY, memory_ids=[ids[OFFICE].id], score=1.0),
        log.command("pin", T0 + DAY, memory_ids=[ids[PREFERENCE].id]),
        log.command("forget", T0 + 2 * DAY, memory_ids=[ids[POSTGRES].id]),
        log.command("tick", T0 + 300 * DAY),
    ]


def dead(result: Any) -> DeadLetter:
    [letter] = result.dead_letters
    assert result.counts["dead_letters"] == 1
    return letter


# -- dead letters (I7) --------------------------------------------------------------------------


def test_malformed_bytes_become_a_dead_letter_with_the_original_bytes() -> None:
    engine, log = make_engine(), Log()
    garbage = b'{"event_type": "TurnRecorded", oops'
    bad = log.raw("turns", garbage, b"acme")

    letter = dead(engine.process([bad]))

    assert base64.b64decode(letter.original_value_b64) == garbage
    assert letter.original_key_b64 is not None
    assert base64.b64decode(letter.original_key_b64) == b"acme"
    assert letter.stage == "decode"
    assert "malformed JSON" in letter.reason
    assert (letter.source_topic, letter.source_partition, letter.source_offset) == (
        TOPICS["turns"],
        0,
        bad.offset,
    )
    # A dead letter is itself a versioned JSON event.
    assert orjson.loads(encode(letter))["event_type"] == "DeadLetter"


def test_the_stream_keeps_running_after_a_poison_event() -> None:
    engine, log = make_engine(), Log()

    result = engine.process(
        [log.turn(MYSQL), log.raw("turns", b"\xff\x00 not json", b"acme"), log.turn(OFFICE)]
    )

    assert len(result.dead_letters) == 1
    assert result.dead_letters[0].source_offset == 1
    assert result.counts["memory_created"] == 2
    assert result.watermarks == {(TOPICS["turns"], 0): 2}


def test_an_invalid_field_is_named_in_the_dead_letter() -> None:
    engine, log = make_engine(), Log()
    payload = orjson.loads(
        encode(
            TurnRecorded(
                event_id="t1",
                namespace="acme",
                event_time=T0,
                session_id="s",
                speaker="a",
                text="x",
            )
        )
    )
    del payload["text"]
    value = orjson.dumps(payload)

    letter = dead(engine.process([log.raw("turns", value, b"acme")]))

    assert letter.stage == "validate"
    assert letter.field == "text"
    assert base64.b64decode(letter.original_value_b64) == value


def test_an_unknown_schema_version_is_dead_lettered_at_the_upcast_stage() -> None:
    engine, log = make_engine(), Log()
    payload = orjson.loads(log.turn(MYSQL).value or b"")
    payload["schema_version"] = 9

    letter = dead(engine.process([log.raw("turns", orjson.dumps(payload), b"acme")]))

    assert letter.stage == "upcast"
    assert letter.field == "schema_version"


def test_a_message_whose_key_differs_from_its_namespace_is_dead_lettered() -> None:
    engine, log = make_engine(), Log()
    value = log.turn(MYSQL, namespace="acme").value

    letter = dead(engine.process([log.raw("turns", value, b"globex")]))

    assert letter.stage == "route"
    assert letter.field == "namespace"
    assert "globex" in letter.reason
    assert engine.banks.get("acme") is None or engine.bank("acme").records == {}
    assert engine.banks.get("globex") is None


def test_a_message_without_a_key_is_routed_by_its_namespace() -> None:
    engine, log = make_engine(), Log()
    value = log.turn(MYSQL).value

    result = engine.process([log.raw("turns", value, None)])

    assert result.dead_letters == []
    assert result.counts["memory_created"] == 1


def test_an_event_on_the_wrong_topic_is_dead_lettered() -> None:
    engine, log = make_engine(), Log()
    command = log.command("tick").value

    letter = dead(engine.process([log.raw("turns", command, b"acme")]))

    assert letter.stage == "route"
    assert letter.field == "event_type"
    assert "turns" in letter.reason


def test_an_empty_value_is_dead_lettered() -> None:
    engine, log = make_engine(), Log()

    letter = dead(engine.process([log.raw("turns", None, b"acme")]))

    assert letter.stage == "decode"
    assert letter.original_value_b64 == ""


def test_an_out_of_range_event_time_is_a_dead_letter_not_a_crash() -> None:
    engine, log = make_engine(), Log()
    payload = orjson.loads(log.turn(MYSQL).value or b"")
    payload["event_time"] = "0001-01-01T00:00:00+05:00"

    letter = dead(engine.process([log.raw("turns", orjson.dumps(payload), b"acme")]))

    assert letter.field == "event_time"


def test_dead_lettered_positions_still_advance_the_watermark() -> None:
    engine, log = make_engine(), Log()

    engine.process([log.raw("turns", b"nope", b"acme")])
    again = engine.process([RawRecord("turns", TOPICS["turns"], 0, 0, b"acme", b"nope")])

    assert again.dead_letters == []
    assert again.counts["skipped_already_applied"] == 1


# -- watermarks and idempotent replay (I4) ------------------------------------------------------


def test_watermarks_track_the_highest_offset_per_topic_partition() -> None:
    engine, log = make_engine(), Log()
    other = Log(partition=3, namespace="globex")
    batch = [log.turn(MYSQL), log.turn(OFFICE), other.turn(PREFERENCE), log.command("tick")]

    result = engine.process(batch)

    assert result.watermarks == {
        (TOPICS["turns"], 0): 1,
        (TOPICS["turns"], 3): 0,
        (TOPICS["commands"], 0): 0,
    }
    assert engine.applied == result.watermarks


def test_positions_at_or_below_the_applied_watermark_are_skipped() -> None:
    log = Log()
    batch = [log.turn(MYSQL), log.turn(OFFICE), log.turn(PREFERENCE)]
    engine = make_engine(applied={(TOPICS["turns"], 0): 1})

    result = engine.process(batch)

    assert result.counts["skipped_already_applied"] == 2
    assert [c.record.content for c in result.changes] == [PREFERENCE]
    assert result.watermarks == {(TOPICS["turns"], 0): 2}


def test_watermarks_of_other_partitions_do_not_skip() -> None:
    log = Log(partition=1)
    engine = make_engine(applied={(TOPICS["turns"], 0): 99, (TOPICS["commands"], 1): 99})

    result = engine.process([log.turn(MYSQL)])

    assert result.counts["memory_created"] == 1


def test_processing_the_same_batch_twice_changes_nothing_the_second_time() -> None:
    engine, log = make_engine(), Log()
    batch = conversation(log)
    engine.process(batch)
    before = state(engine)

    again = engine.process(batch)

    assert again.changes == []
    assert again.counts["skipped_already_applied"] == len(batch)
    assert state(engine) == before


def test_replay_after_a_crash_before_the_watermark_was_saved_is_a_no_op() -> None:
    # The views got the records but not the watermark: a fresh engine reloads the banks from the
    # view and sees the whole batch again. Turns, commands and signals must all be recognised.
    log = Log()
    first = make_engine()
    first.process(conversation(log))
    tail = follow_up(log, first)
    first.process(tail)
    view = {record.id: record for bank in first.banks.values() for record in bank.records.values()}

    restarted = make_engine(load_bank=lambda ns: [r for r in view.values() if r.namespace == ns])
    log_again = conversation(Log()) + tail
    result = restarted.process(log_again)

    assert result.changes == []
    assert state(restarted) == state(first)


def test_crash_mid_log_and_resume_equals_one_uninterrupted_run() -> None:
    log = Log()
    full_log = conversation(log)
    reference = make_engine()
    reference.process(full_log)
    reference.process(follow_up(log, reference))

    log = Log()
    replayed_log = conversation(log)
    crashed = make_engine()
    crashed.process(replayed_log[:4])
    view = [r for bank in crashed.banks.values() for r in bank.records.values()]
    resumed = make_engine(
        load_bank=lambda ns: [r for r in view if r.namespace == ns],
        applied=dict(crashed.applied),
    )
    resumed.process(replayed_log)  # the consumer re-reads from its last committed offset
    resumed.process(follow_up(log, resumed))

    assert state(resumed) == state(reference)


# -- determinism (I2) ---------------------------------------------------------------------------


def test_the_same_log_gives_identical_records_in_two_fresh_engines() -> None:
    def run() -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
        log = Log()
        engine = make_engine(BagOfWordsEncoder())
        results = [engine.process(conversation(log))]
        results.append(engine.process(follow_up(log, engine)))
        updates = [c.as_update().model_dump(mode="json") for r in results for c in r.changes]
        return state(engine), updates

    first_state, first_updates = run()
    second_state, second_updates = run()

    assert first_state == second_state
    assert first_updates == second_updates
    assert first_state["acme"]


def test_batch_boundaries_do_not_change_the_outcome() -> None:
    log = Log()
    whole = make_engine()
    records = conversation(log)
    whole.process(records)

    one_by_one = make_engine()
    for record in records:
        one_by_one.process([record])

    assert state(one_by_one) == state(whole)


def test_one_encoder_call_per_batch_for_the_remembered_turns_only() -> None:
    encoder = BagOfWordsEncoder()
    engine, log = make_engine(encoder), Log()

    engine.process(conversation(log))

    assert len(encoder.calls) == 1
    assert len(encoder.calls[0]) == 7  # eight turns, one of them "hi"


# -- namespace isolation (I8) -------------------------------------------------------------------


def test_a_namespace_bank_never_holds_another_namespaces_memories() -> None:
    engine = make_engine()
    acme, globex = Log(namespace="acme"), Log(namespace="globex", partition=1)

    result = engine.process(
        [acme.turn(MYSQL), globex.turn(MYSQL), globex.turn(POSTGRES, T0 + DAY), acme.turn(OFFICE)]
    )

    assert {r.namespace for r in engine.bank("acme").records.values()} == {"acme"}
    assert {r.namespace for r in engine.bank("globex").records.values()} == {"globex"}
    acme_mysql = by_content(engine, "acme")[MYSQL]
    globex_mysql = by_content(engine, "globex")[MYSQL]
    assert acme_mysql.id != globex_mysql.id
    # globex's switch to PostgreSQL supersedes only globex's MySQL.
    assert globex_mysql.status == "superseded"
    assert acme_mysql.status == "active"
    assert acme_mysql.confirmations == 0
    assert result.dirty_namespaces == {"acme", "globex"}


def test_a_duplicate_in_another_namespace_confirms_nothing() -> None:
    engine = make_engine()
    acme, globex = Log(namespace="acme"), Log(namespace="globex", partition=1)
    engine.process([acme.turn(OFFICE)])

    result = engine.process([globex.turn(OFFICE, T0 + DAY)])

    assert [c.change for c in result.changes] == ["created"]
    assert by_content(engine, "acme")[OFFICE].confirmations == 0


def test_commands_and_signals_only_touch_their_own_namespace() -> None:
    engine = make_engine()
    acme, globex = Log(namespace="acme"), Log(namespace="globex", partition=1)
    engine.process([acme.turn(OFFICE), globex.turn(OFFICE)])
    acme_id = by_content(engine, "acme")[OFFICE].id

    result = engine.process(
        [
            globex.command("forget", T0 + DAY, whole_namespace=True),
            globex.command("erase", T0 + DAY, memory_ids=[acme_id]),
            globex.recalled([acme_id], T0 + DAY),
        ]
    )

    assert {c.record.namespace for c in result.changes} == {"globex"}
    acme_office = engine.bank("acme").records[acme_id]
    assert acme_office.status == "active"
    assert acme_office.access_count == 0


# -- batch result -------------------------------------------------------------------------------


def test_final_records_hold_the_last_state_of_every_touched_record() -> None:
    engine, log = make_engine(), Log()

    result = engine.process([log.turn(MYSQL, T0), log.turn(POSTGRES, T0 + DAY)])

    final = result.final_records()
    assert set(final) == set(engine.bank("acme").records)
    assert {r.status for r in final.values()} == {"active", "superseded"}
    assert only(result, "superseded")[0] == final[only(result, "superseded")[0].id]


def test_changes_become_change_feed_entries() -> None:
    engine, log = make_engine(), Log()

    result = engine.process([log.turn(MYSQL, T0), log.turn(POSTGRES, T0 + DAY)])

    updates = [c.as_update() for c in result.changes]
    assert [u.change for u in updates] == ["created", "created", "superseded"]
    superseded = updates[-1]
    assert superseded.status == "superseded"
    assert superseded.cause_event_id == "turn-2"
    assert superseded.event_time == T0 + DAY
    assert superseded.related_ids == [updates[1].memory_id]


@pytest.mark.parametrize("role", ["turns", "commands", "signals"])
def test_counts_name_what_happened(role: str) -> None:
    engine, log = make_engine(), Log()
    engine.process([log.turn(OFFICE)])
    record_id = by_content(engine)[OFFICE].id
    raw = {
        "turns": log.turn("hi"),
        "commands": log.command("forget", T0 + DAY, memory_ids=[record_id]),
        "signals": log.recalled([record_id], T0 + DAY),
    }[role]

    counts = engine.process([raw]).counts

    expected = {
        "turns": {"turns": 1, "filtered": 1},
        "commands": {"command_forget": 1, "memory_forgotten": 1},
        "signals": {"signals": 1, "memory_reinforced": 1},
    }[role]
    assert dict(counts) == expected
