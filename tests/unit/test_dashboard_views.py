"""What the dashboard shows, decided by pure functions over records, feed entries and messages."""

from __future__ import annotations

import base64
from dataclasses import replace
from datetime import timedelta

import pytest
from recall_support import AT, make_record

from pipeline.interfaces.dashboard.views import (
    ActivationPoint,
    MemoryFilter,
    Row,
    activation_plot,
    activation_points,
    corrected_bytes,
    counts,
    dead_letter_view,
    feed_entries,
    live_action,
    memory_page,
    newest_first,
    source_view,
    supersede_links,
    timeline,
)
from pipeline.memory.rules.decay import activation_at
from pipeline.views.log_reader import LogMessage
from schemas.codec import encode
from schemas.errors import InvalidEvent
from schemas.events import CommandIssued, TurnRecorded
from schemas.memory import Association, DeadLetter, MemoryChanged, SourceTurn


def _change(memory_id: str, change: str, at_hours: float, **fields: object) -> MemoryChanged:
    values: dict[str, object] = {
        "namespace": "ns",
        "memory_id": memory_id,
        "change": change,
        "event_time": AT + timedelta(hours=at_hours),
        "cause_event_id": f"evt-{change}",
        "status": "active",
        "region": "semantic",
        "kind": "fact",
        "content": "We use PostgreSQL.",
        "importance": 0.7,
        "activation": 1.0,
    }
    values.update(fields)
    return MemoryChanged.model_validate(values)


def _message(value: bytes | None, offset: int, topic: str = "t", partition: int = 0) -> LogMessage:
    return LogMessage(topic, partition, offset, 1_700_000_000_000 + offset, b"ns", value)


def test_filter_defaults_to_what_recall_can_return() -> None:
    where = MemoryFilter.parse("bogus", "nope", "", "")
    assert where.status == "recallable" and where.kind == ""
    assert where.matches("active", "fact", "semantic", "x")
    assert where.matches("cold", "fact", "semantic", "x")
    assert not where.matches("forgotten", "fact", "semantic", "x")
    assert not where.matches("superseded", "fact", "semantic", "x")
    assert MemoryFilter.parse("all", "", "", "").matches("forgotten", "fact", "semantic", "x")


def test_filter_search_is_case_insensitive_over_content_and_entities() -> None:
    where = MemoryFilter.parse("all", "fact", "semantic", "  postgres ")
    assert where.q == "postgres"
    assert where.matches("active", "fact", "semantic", "We use PostgreSQL")
    assert where.matches("active", "fact", "semantic", "our database", ["Postgres"])
    assert not where.matches("active", "fact", "semantic", "We use MySQL")
    assert not where.matches("active", "preference", "semantic", "PostgreSQL")
    assert not where.matches("active", "fact", "episodic", "PostgreSQL")


def test_memory_page_is_newest_first_filtered_and_paged() -> None:
    records = [
        make_record(f"m{i}", f"memory {i}", created_at=AT + timedelta(minutes=i)) for i in range(7)
    ]
    records.append(make_record("gone", "memory gone", status="forgotten"))
    page = memory_page(records, MemoryFilter(), offset=0, limit=3)
    assert [row.id for row in page.rows] == ["m6", "m5", "m4"]
    assert page.total == 7 and page.next_offset == 3 and page.previous_offset is None
    last = memory_page(records, MemoryFilter(), offset=6, limit=3)
    assert [row.id for row in last.rows] == ["m0"] and last.next_offset is None
    assert last.previous_offset == 3


def test_counts_by_status_kind_and_region() -> None:
    records = [
        make_record("a", "x", kind="fact"),
        make_record("b", "y", kind="preference", region="semantic", status="superseded"),
        make_record("c", "z", kind="procedure", region="procedural"),
    ]
    c = counts(records)
    assert c.total == 3
    assert c.by_status == {"active": 2, "superseded": 1}
    assert c.by_kind == {"preference": 1, "fact": 1, "procedure": 1}
    assert c.by_region == {"semantic": 2, "procedural": 1}


def test_live_action_removes_what_leaves_the_filter() -> None:
    where = MemoryFilter()
    assert live_action(_change("m", "created", 0), where) == "upsert"
    assert live_action(_change("m", "forgotten", 1, status="forgotten"), where) == "remove"
    erased = _change("m", "erased", 1, content="")
    assert live_action(erased, MemoryFilter(status="all")) == "remove"
    assert live_action(_change("m", "created", 0), MemoryFilter(q="mysql")) == "remove"


def test_row_from_a_change_keeps_the_records_creation_time() -> None:
    record = make_record("m", "We use PostgreSQL.", created_at=AT)
    change = _change("m", "reinforced", 5, activation=1.2)
    row = Row.of_change(change, record)
    assert row.created == AT and row.activation == 1.2 and row.sources == 1
    early = Row.of_change(change, None)
    assert early.created == change.event_time and early.sources == 0


def test_activation_points_keep_only_changes_that_set_it() -> None:
    record = make_record(
        "m", "x", activation=1.4, activation_at=AT + timedelta(hours=10), created_at=AT
    )
    changes = [
        _change("m", "created", 0, activation=1.0),
        _change("m", "linked", 2, activation=1.0),  # leaves activation where it was
        _change("m", "reinforced", 10, activation=1.4),
        _change("other", "created", 3, activation=9.0),
    ]
    points = activation_points(record, changes)
    assert [(p.label, p.activation) for p in points] == [
        ("created", 1.0),
        ("latest", 1.4),
        ("reinforced", 1.4),
    ]


def test_activation_plot_decays_between_points_as_the_memory_rules_say() -> None:
    points = [
        ActivationPoint(AT, 1.0, "created"),
        ActivationPoint(AT + timedelta(days=10), 0.9, "reinforced"),
    ]
    plot = activation_plot(0.7, points, width=200, height=100, samples=4)
    assert plot is not None
    assert plot.start == AT and plot.end > points[-1].at
    assert plot.peak == pytest.approx(1.0)
    coordinates = [tuple(map(float, part[1:].split(","))) for part in plot.path.split()]
    ys = [y for _, y in coordinates]
    assert ys[0] == pytest.approx(6.0)  # the peak sits at the top padding
    assert ys[:4] == sorted(ys[:4])  # the first segment only decays (SVG y grows downwards)
    # Its last sample, three quarters of the way to the reinforcement, is the rules' value.
    decayed = activation_at(1.0, AT, 0.7, AT + timedelta(days=7.5))
    assert ys[3] == pytest.approx(100 - 6 - 88 * decayed, abs=0.01)
    assert len(plot.dots) == 2
    assert activation_plot(0.7, []) is None


def test_supersede_links_follow_both_directions() -> None:
    old = make_record("old", "We use MySQL.", status="superseded", superseded_by="mid")
    mid = make_record(
        "mid",
        "We moved to PostgreSQL.",
        status="superseded",
        superseded_by="new",
        associations=[Association(memory_id="old", relation="supersedes", weight=1.0)],
    )
    new = make_record("new", "We moved to CockroachDB.")
    by_id = {r.id: r for r in (old, mid, new)}
    before, after = supersede_links(mid, by_id.get, by_id.values())
    assert before == ["old"] and after == ["new"]
    before, after = supersede_links(new, by_id.get, by_id.values())
    assert before == ["old", "mid"] and after == []


def test_feed_entries_match_subject_or_related_and_skip_garbage() -> None:
    messages = [
        _message(encode(_change("m", "created", 0)), 0),
        _message(b"not json", 1),
        _message(encode(_change("n", "superseded", 1, related_ids=["m"])), 2),
        _message(encode(_change("n", "created", 2)), 3),
        _message(None, 4),
    ]
    found = feed_entries(messages, "m")
    assert [(e.offset, e.change.memory_id) for e in found] == [(0, "m"), (2, "n")]


def test_source_view_shows_the_logged_text_only_when_it_is_that_turn() -> None:
    turn = TurnRecorded(
        event_id="turn-1",
        namespace="ns",
        session_id="s1",
        speaker="alice",
        text="We use PostgreSQL.",
        event_time=AT,
    )
    source = SourceTurn(
        event_id="turn-1",
        session_id="s1",
        speaker="alice",
        event_time=AT,
        topic="t",
        partition=0,
        offset=7,
    )
    assert source_view(source, _message(encode(turn), 7)).text == "We use PostgreSQL."
    assert source_view(source, None).text is None
    other = turn.model_copy(update={"event_id": "turn-2"})
    assert "different event" in source_view(source, _message(encode(other), 7)).note
    unpositioned = source.model_copy(update={"offset": None})
    assert "not recorded" in source_view(unpositioned, None).note


def test_timeline_orders_by_event_time_and_attaches_formed_memories() -> None:
    late = TurnRecorded(
        event_id="t2", namespace="ns", session_id="s", speaker="a", text="later", event_time=AT
    )
    early = late.model_copy(update={"event_id": "t1", "event_time": AT - timedelta(hours=1)})
    foreign = late.model_copy(update={"event_id": "t3", "namespace": "other"})
    forget = CommandIssued(
        event_id="c1",
        namespace="ns",
        event_time=AT + timedelta(hours=1),
        command="forget",
        memory_ids=["m"],
    )
    record = make_record("m", "later")
    record = record.model_copy(
        update={
            "provenance": [SourceTurn(event_id="t2", session_id="s", speaker="a", event_time=AT)]
        }
    )
    messages = [
        _message(encode(late), 0),
        _message(encode(early), 1),
        _message(encode(foreign), 2),
        _message(b"{broken", 3),
        _message(encode(forget), 4),
    ]
    items = timeline(messages, "ns", [record])
    assert [(i.what, i.event.event_id) for i in items] == [
        ("turn", "t1"),
        ("turn", "t2"),
        ("forget", "c1"),
    ]
    assert [m.id for m in items[1].formed] == ["m"] and items[0].formed == []


def _letter(original: bytes) -> LogMessage:
    letter = DeadLetter(
        stage="validate",
        reason="must not be empty or whitespace",
        field="text",
        source_topic="t",
        source_partition=1,
        source_offset=9,
        original_value_b64=base64.b64encode(original).decode(),
    )
    return _message(encode(letter), 3, partition=1)


def test_dead_letter_view_offers_text_or_base64_for_editing() -> None:
    text = dead_letter_view(_letter(b'{"text": " "}'))
    assert text is not None and text.encoding == "utf-8" and text.editable == '{"text": " "}'
    binary = dead_letter_view(_letter(b"\xff\xfe"))
    assert binary is not None and binary.encoding == "base64"
    assert base64.b64decode(binary.editable) == b"\xff\xfe"
    assert dead_letter_view(_message(b"garbage", 0)) is None


def test_corrected_bytes_name_the_field_when_not_base64() -> None:
    assert corrected_bytes('  {"a": 1}\n', "utf-8") == b'{"a": 1}'
    assert corrected_bytes(base64.b64encode(b"\x00\x01").decode(), "base64") == b"\x00\x01"
    with pytest.raises(InvalidEvent) as caught:
        corrected_bytes("***", "base64")
    assert caught.value.field == "value"


def test_newest_dead_letters_first() -> None:
    older = dead_letter_view(_letter(b"x"))
    assert older is not None
    newer = replace(older, partition=0, timestamp_ms=older.timestamp_ms + 5)
    assert newest_first([older, newer]) == [newer, older]
