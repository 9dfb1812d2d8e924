"""Memory decisions (``pipeline.memory.decisions``) driven through the stages' pure code.

Filter → create → confirm/merge → link → supersede, the commands (forget, erase, pin, tick,
feedback, forget by query) and the recall signal, all in event time with a fake encoder (never
the real model), each input prepared and then consolidated as the live stages do.
"""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from ingest_support import (
    DAY,
    EVENTS,
    T0,
    BagOfWordsEncoder,
    ExactEncoder,
    Log,
    Stages,
    at_cosine,
    by_content,
    only,
)

from pipeline.memory.rules.extraction import memory_id
from pipeline.runtime.settings import MemoryPolicy
from schemas.memory import MemoryRecord

MYSQL = "We use MySQL for the billing database"
POSTGRES = "we moved from MySQL to PostgreSQL"
OFFICE = "The office is in the city center"
OFFICE_NEAR = "The office sits downtown next to the station"
OFFICE_SAME = "Our office is located in the centre of the city"
PREFERENCE = "I prefer dark mode"
PROCEDURE = "the fix was to restart the worker"


def remember(stages: Stages, log: Log, text: str, at: object = T0) -> MemoryRecord:
    result = stages.process([log.turn(text, at)])  # type: ignore[arg-type]
    created = only(result, "created")
    assert len(created) == 1, result.changes
    return stages.bank(log.namespace).records[created[0].id]


# -- filter and create --------------------------------------------------------------------------


def test_chit_chat_is_filtered_and_creates_nothing() -> None:
    stages, log = Stages(), Log()

    result = stages.process([log.turn(text) for text in ["hi", "thanks!", "lol ok", "你好"]])

    assert result.counts["turns"] == 4
    assert result.counts["filtered"] == 4
    assert result.changes == []
    assert stages.bank("acme").records == {}
    assert result.namespaces() == set()


def test_chit_chat_is_not_embedded() -> None:
    encoder = BagOfWordsEncoder()
    stages, log = Stages(encoder), Log()

    stages.process([log.turn("hi"), log.turn(MYSQL), log.turn("thanks!")])

    # The remembered turn alone, in one call (its slot is compared by its own vector).
    assert encoder.calls == [[f"alice: {MYSQL}"]]


def test_a_remembered_turn_creates_a_memory_with_its_provenance() -> None:
    stages, log = Stages(), Log()
    raw = log.turn(MYSQL, T0, speaker="alice", session_id="chat-1", dia_id="D1:1")

    result = stages.process([raw])

    [change] = result.changes
    record = change.record
    assert change.change == "created"
    assert record.id == memory_id("acme", ["turn-1"], MYSQL)
    assert record.namespace == "acme"
    assert record.content == MYSQL
    assert record.search_text == f"alice: {MYSQL}"
    assert record.kind == "fact"
    assert record.region == "semantic"
    assert record.base_importance == 0.7
    assert record.importance == pytest.approx(0.7)
    assert record.confirmations == 0
    assert record.status == "active"
    assert record.created_at == record.valid_from == record.updated_at == T0
    assert record.valid_to is None
    assert record.triplet is not None
    assert (record.triplet.attribute, record.triplet.value) == ("database", "MySQL")
    assert "MySQL" in record.entities
    assert record.activation == pytest.approx(0.7)
    assert record.activation_at == T0
    [source] = record.provenance
    assert source.event_id == "turn-1"
    assert source.session_id == "chat-1"
    assert source.speaker == "alice"
    assert source.event_time == T0
    assert source.dialogue_id == "D1:1"
    assert [entry.change for entry in record.history] == ["created"]
    assert record.history[0].cause_event_id == "turn-1"
    assert len(record.vector) == 256
    assert math.isclose(sum(x * x for x in record.vector), 1.0, rel_tol=1e-5)
    assert (source.topic, source.partition, source.offset) == (EVENTS, 0, raw.offset)
    assert record.origin_offset == raw.offset
    assert stages.bank("acme").records == {record.id: record}
    assert result.counts["memory_created"] == 1
    assert result.namespaces() == {"acme"}


@pytest.mark.parametrize(
    ("text", "kind", "region", "importance"),
    [
        (PREFERENCE, "preference", "semantic", 0.9),
        ("I'm working on the billing migration", "task_state", "episodic", 0.85),
        (PROCEDURE, "procedure", "procedural", 0.65),
        ("I'm so stressed about the launch", "emotion", "episodic", 0.5),
        ("以后所有代码都用 TypeScript", "decision", "semantic", 0.85),
    ],
)
def test_kind_region_and_importance_come_from_the_classifier(
    text: str, kind: str, region: str, importance: float
) -> None:
    record = remember(Stages(), Log(), text)

    assert (record.kind, record.region, record.importance) == (kind, region, importance)
    assert record.activation == pytest.approx(importance)


# -- duplicates and links -----------------------------------------------------------------------


def test_a_duplicate_turn_confirms_the_existing_memory() -> None:
    stages, log = Stages(), Log()
    first = remember(stages, log, OFFICE)

    result = stages.process([log.turn(OFFICE + "!", T0 + timedelta(minutes=5))])

    assert only(result, "created") == []
    [change] = result.changes
    assert change.change in {"merged", "confirmed"}
    record = change.record
    assert record.id == first.id
    assert record.confirmations == 1
    assert record.importance == pytest.approx(0.77)
    assert record.importance > first.importance
    assert [source.event_id for source in record.provenance] == ["turn-1", "turn-2"]
    assert record.updated_at == T0 + timedelta(minutes=5)
    assert record.activation > first.activation
    assert record.history[-1].cause_event_id == "turn-2"
    assert list(stages.bank("acme").records) == [first.id]


def test_a_restated_fact_confirms_through_its_triplet() -> None:
    stages, log = Stages(), Log()
    first = remember(stages, log, MYSQL)

    result = stages.process([log.turn("we use MySQL for billing", T0 + DAY)])

    [change] = result.changes
    assert change.change == "confirmed"
    assert change.record.id == first.id
    assert change.record.confirmations == 1


def test_confirmations_raise_importance_up_to_the_cap() -> None:
    stages, log = Stages(), Log()
    first = remember(stages, log, OFFICE)

    for n in range(1, 8):
        stages.process([log.turn(OFFICE, T0 + n * DAY)])

    record = stages.bank("acme").records[first.id]
    assert record.confirmations == 7
    assert record.importance == pytest.approx(min(1.0, 0.7 * 1.5))
    assert len(record.provenance) == 8


@pytest.mark.parametrize("cosine", [0.92, 0.95, 0.999])
def test_near_identical_turns_merge_at_or_above_the_duplicate_threshold(cosine: float) -> None:
    encoder = ExactEncoder({OFFICE: [1.0], OFFICE_SAME: at_cosine(cosine)})
    stages, log = Stages(encoder), Log()
    first = remember(stages, log, OFFICE)

    result = stages.process([log.turn(OFFICE_SAME, T0 + DAY)])

    [change] = result.changes
    assert change.change == "merged"
    assert change.record.id == first.id
    assert change.related_ids == (memory_id("acme", ["turn-2"], OFFICE_SAME),)
    assert len(stages.bank("acme").records) == 1


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("李娜负责招聘。", "李妍负责新员工培训。"),  # another person
        ("工单OPS-3307：磁盘告警。", "工单OPS-3370：磁盘告警。"),  # another ticket
        ("护照到期：2028年6月。", "驾照：2030年。"),  # a value the memory lacks
        # A word put in another's place: a value no span catches, lost if merged.
        ("我女儿在学钢琴，每周六上午在文化宫上课。", "我女儿在学古筝，每周六上午在文化宫上课。"),
    ],
)
def test_a_near_duplicate_about_another_thing_or_value_is_kept(first: str, second: str) -> None:
    encoder = ExactEncoder({first: [1.0], second: at_cosine(0.95)})
    stages, log = Stages(encoder), Log()
    kept = remember(stages, log, first)

    result = stages.process([log.turn(second, T0 + DAY)])

    assert "merged" not in [c.change for c in result.changes]
    assert {r.content for r in stages.bank("acme").records.values()} == {first, second}
    assert stages.bank("acme").records[kept.id].status == "active"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # The default encoder's cosines of these pairs: 0.999, 0.997, 0.968.
        ("我家那辆老捷达还在开", "我家猫在用豆腐猫砂"),
        ("我在准备雅思", "我开了个淘宝店"),
        ("我表弟在澳洲留学。", "我最近在学滑板"),
    ],
)
def test_chinese_statements_worded_otherwise_are_no_duplicates_however_close(
    first: str, second: str
) -> None:
    encoder = ExactEncoder({first: [1.0], second: at_cosine(0.999)})
    stages, log = Stages(encoder), Log()
    remember(stages, log, first)

    result = stages.process([log.turn(second, T0 + DAY)])

    assert "merged" not in [c.change for c in result.changes]
    assert {r.content for r in stages.bank("acme").records.values()} == {first, second}


def test_a_chinese_restatement_still_merges() -> None:
    first, again = "我老婆是小学语文老师", "我老婆是小学的语文老师"
    encoder = ExactEncoder({first: [1.0], again: at_cosine(0.97)})
    stages, log = Stages(encoder), Log()
    kept = remember(stages, log, first)

    [change] = stages.process([log.turn(again, T0 + DAY)]).changes

    assert (change.change, change.record.id) == ("merged", kept.id)


@pytest.mark.parametrize("cosine", [0.85, 0.88, 0.919])
def test_related_turns_are_linked_both_ways_without_merging(cosine: float) -> None:
    encoder = ExactEncoder({OFFICE: [1.0], OFFICE_NEAR: at_cosine(cosine)})
    stages, log = Stages(encoder), Log()
    first = remember(stages, log, OFFICE)

    result = stages.process([log.turn(OFFICE_NEAR, T0 + DAY)])

    assert [c.change for c in result.changes] == ["created", "linked"]
    created, linked = (c.record for c in result.changes)
    assert linked.id == first.id
    [forward] = created.associations
    [backward] = linked.associations
    assert (forward.memory_id, forward.relation) == (first.id, "similar")
    assert (backward.memory_id, backward.relation) == (created.id, "similar")
    assert forward.weight == backward.weight == pytest.approx(cosine, abs=1e-4)
    assert result.changes[0].related_ids == (first.id,)
    assert linked.confirmations == 0
    assert linked.history[-1].change == "linked"
    assert len(stages.bank("acme").records) == 2


def test_unrelated_turns_are_neither_merged_nor_linked() -> None:
    encoder = ExactEncoder({OFFICE: [1.0], OFFICE_NEAR: at_cosine(0.84)})
    stages, log = Stages(encoder), Log()
    remember(stages, log, OFFICE)

    result = stages.process([log.turn(OFFICE_NEAR, T0 + DAY)])

    [change] = result.changes
    assert change.change == "created"
    assert change.record.associations == []


def test_duplicates_merge_within_a_region_only() -> None:
    fact = "The worker runs on host seven"
    encoder = ExactEncoder({PROCEDURE: [1.0], fact: [1.0]})
    stages, log = Stages(encoder), Log()
    procedure = remember(stages, log, PROCEDURE)

    result = stages.process([log.turn(fact, T0 + DAY)])

    [change] = result.changes
    assert change.change == "created"
    assert change.record.region == "semantic"
    assert procedure.region == "procedural"
    assert change.record.associations == []
    assert len(stages.bank("acme").records) == 2


def test_merge_thresholds_follow_the_policy() -> None:
    encoder = ExactEncoder({OFFICE: [1.0], OFFICE_NEAR: at_cosine(0.88)})
    stages, log = Stages(encoder, MemoryPolicy(duplicate_cosine=0.87)), Log()
    remember(stages, log, OFFICE)

    result = stages.process([log.turn(OFFICE_NEAR, T0 + DAY)])

    assert [c.change for c in result.changes] == ["merged"]


# -- contradictions -----------------------------------------------------------------------------


def test_a_contradiction_supersedes_the_older_memory_without_deleting_it() -> None:
    stages, log = Stages(), Log()
    mysql = remember(stages, log, MYSQL, T0)

    result = stages.process([log.turn(POSTGRES, T0 + timedelta(hours=1))])

    assert [c.change for c in result.changes] == ["created", "superseded"]
    postgres = stages.bank("acme").records[result.changes[0].record.id]
    old = stages.bank("acme").records[mysql.id]
    assert postgres.status == "active"
    assert postgres.triplet is not None and postgres.triplet.value == "PostgreSQL"
    assert [(a.memory_id, a.relation) for a in postgres.associations] == [(mysql.id, "supersedes")]
    assert old.status == "superseded"
    assert old.superseded_by == postgres.id
    assert old.valid_to == postgres.valid_from == T0 + timedelta(hours=1)
    assert (postgres.id, "superseded_by") in [(a.memory_id, a.relation) for a in old.associations]
    assert old.content == MYSQL
    assert old.activation < mysql.activation
    assert old.history[-1].change == "superseded"
    assert result.changes[0].related_ids == (mysql.id,)
    assert set(stages.bank("acme").records) == {mysql.id, postgres.id}
    assert result.counts["memory_superseded"] == 1


def test_a_chinese_rule_supersedes_an_english_one_on_the_same_attribute() -> None:
    stages, log = Stages(), Log()
    python = remember(stages, log, "From now on all code should be written in Python", T0)

    result = stages.process([log.turn("以后所有代码都用 TypeScript", T0 + DAY)])

    assert [c.change for c in result.changes] == ["created", "superseded"]
    assert stages.bank("acme").records[python.id].status == "superseded"


def test_a_restated_old_value_does_not_confirm_a_superseded_memory() -> None:
    stages, log = Stages(), Log()
    mysql = remember(stages, log, MYSQL, T0)
    stages.process([log.turn(POSTGRES, T0 + DAY)])

    result = stages.process([log.turn(MYSQL, T0 + 2 * DAY)])

    # MySQL is current again: a new memory that supersedes PostgreSQL; the old one stays retired.
    assert [c.change for c in result.changes] == ["created", "superseded"]
    assert stages.bank("acme").records[mysql.id].status == "superseded"
    assert stages.bank("acme").records[mysql.id].confirmations == 0
    current = [r for r in stages.bank("acme").records.values() if r.status == "active"]
    assert [r.content for r in current] == [MYSQL]


def test_a_late_arriving_older_statement_does_not_override_the_newer_one() -> None:
    stages, log = Stages(), Log()
    postgres = remember(stages, log, POSTGRES, T0 + DAY)

    # Logged later, but said earlier (event time before the PostgreSQL decision).
    result = stages.process([log.turn(MYSQL, T0)])

    [change] = result.changes
    late = change.record
    assert change.change == "created"
    assert late.status == "superseded"
    assert late.superseded_by == postgres.id
    assert late.valid_from == T0
    assert late.valid_to == postgres.valid_from
    current = stages.bank("acme").records[postgres.id]
    assert current.status == "active"
    assert current.superseded_by is None
    assert current.valid_to is None


def test_different_speakers_do_not_contradict_each_other() -> None:
    stages, log = Stages(), Log()
    alice = remember(stages, log, "I live in Berlin", T0)

    result = stages.process([log.turn("I live in Paris", T0 + DAY, speaker="bob")])

    assert [c.change for c in result.changes] == ["created"]
    assert stages.bank("acme").records[alice.id].status == "active"


# -- commands -----------------------------------------------------------------------------------


def test_forget_by_ids_marks_only_those_memories_forgotten() -> None:
    stages, log = Stages(), Log()
    office = remember(stages, log, OFFICE)
    preference = remember(stages, log, PREFERENCE)

    result = stages.process(
        [log.command("forget", T0 + DAY, memory_ids=[office.id, "m_unknown"], reason="asked")]
    )

    [change] = result.changes
    assert change.change == "forgotten"
    forgotten = stages.bank("acme").records[office.id]
    assert forgotten.status == "forgotten"
    assert forgotten.content == OFFICE  # kept for audit, never recalled
    assert forgotten.history[-1].change == "forgotten"
    assert forgotten.history[-1].detail == "asked"
    assert forgotten.history[-1].cause_event_id == "cmd-3"
    assert stages.bank("acme").records[preference.id].status == "active"
    assert result.counts["command_forget"] == 1


def test_forgetting_twice_changes_nothing_the_second_time() -> None:
    stages, log = Stages(), Log()
    office = remember(stages, log, OFFICE)
    stages.process([log.command("forget", T0 + DAY, memory_ids=[office.id])])

    result = stages.process([log.command("forget", T0 + 2 * DAY, memory_ids=[office.id])])

    assert result.changes == []


def test_whole_namespace_forget_forgets_every_memory() -> None:
    stages, log = Stages(), Log()
    for text in [OFFICE, PREFERENCE, PROCEDURE, MYSQL]:
        remember(stages, log, text)

    result = stages.process([log.command("forget", T0 + DAY, whole_namespace=True)])

    assert result.counts["memory_forgotten"] == 4
    assert {r.status for r in stages.bank("acme").records.values()} == {"forgotten"}


def test_erase_removes_the_memory_and_reports_erased() -> None:
    stages, log = Stages(), Log()
    office = remember(stages, log, OFFICE)
    preference = remember(stages, log, PREFERENCE)

    result = stages.process([log.command("erase", T0 + DAY, memory_ids=[office.id])])

    assert [c.change for c in result.changes] == ["erased"]
    assert result.erased_ids() == [office.id]
    assert set(stages.bank("acme").records) == {preference.id}
    # The erased memory no longer takes part in duplicate detection.
    again = stages.process([log.turn(OFFICE, T0 + 2 * DAY)])
    assert [c.change for c in again.changes] == ["created"]


def test_whole_namespace_erase_leaves_an_empty_bank() -> None:
    stages, log = Stages(), Log()
    for text in [OFFICE, PREFERENCE]:
        remember(stages, log, text)

    result = stages.process([log.command("erase", T0 + DAY, whole_namespace=True)])

    assert len(result.erased_ids()) == 2
    assert stages.bank("acme").records == {}


def test_idle_tick_cools_memories_whose_activation_decayed() -> None:
    stages, log = Stages(), Log()
    fact = remember(stages, log, OFFICE, T0)
    preference = remember(stages, log, PREFERENCE, T0)

    result = stages.process([log.command("tick", T0 + 200 * DAY)])

    # fact: 0.7·e^(−0.05·200) ≈ 3e-5 < 0.05; preference: 0.9·e^(−0.01·200) ≈ 0.12 stays warm.
    assert [(c.change, c.record.id) for c in result.changes] == [("cooled", fact.id)]
    assert stages.bank("acme").records[fact.id].status == "cold"
    assert stages.bank("acme").records[preference.id].status == "active"

    later = stages.process([log.command("tick", T0 + 400 * DAY)])

    assert [(c.change, c.record.id) for c in later.changes] == [("cooled", preference.id)]


def test_tick_without_idleness_does_not_consolidate() -> None:
    stages, log = Stages(), Log()
    fact = remember(stages, log, OFFICE, T0)
    stages.process([log.turn("hi", T0 + 200 * DAY)])  # a recent turn: the namespace is not idle

    busy = stages.process([log.command("tick", T0 + 200 * DAY + timedelta(seconds=299))])
    idle = stages.process([log.command("tick", T0 + 200 * DAY + timedelta(seconds=300))])

    assert busy.changes == []
    assert [(c.change, c.record.id) for c in idle.changes] == [("cooled", fact.id)]


def test_pin_prevents_cooling_and_unpin_allows_it_again() -> None:
    stages, log = Stages(), Log()
    pinned = remember(stages, log, OFFICE, T0)
    loose = remember(stages, log, PROCEDURE, T0)

    pin = stages.process([log.command("pin", T0 + timedelta(minutes=1), memory_ids=[pinned.id])])
    tick = stages.process([log.command("tick", T0 + 200 * DAY)])

    assert [c.change for c in pin.changes] == ["pinned"]
    assert stages.bank("acme").records[pinned.id].pinned is True
    assert [c.record.id for c in tick.changes] == [loose.id]
    assert stages.bank("acme").records[pinned.id].status == "active"

    unpin = stages.process([log.command("unpin", T0 + 201 * DAY, memory_ids=[pinned.id])])
    tick = stages.process([log.command("tick", T0 + 202 * DAY)])

    assert [c.change for c in unpin.changes] == ["unpinned"]
    assert [c.record.id for c in tick.changes] == [pinned.id]


def test_pinning_a_cold_memory_warms_it() -> None:
    stages, log = Stages(), Log()
    record = remember(stages, log, OFFICE, T0)
    stages.process([log.command("tick", T0 + 200 * DAY)])

    stages.process([log.command("pin", T0 + 200 * DAY, memory_ids=[record.id])])

    assert stages.bank("acme").records[record.id].status == "active"
    assert stages.bank("acme").records[record.id].pinned is True


def test_feedback_reinforces_in_proportion_to_its_score() -> None:
    stages, log = Stages(), Log()
    record = remember(stages, log, OFFICE, T0)

    result = stages.process([log.command("feedback", T0, memory_ids=[record.id], score=0.5)])

    [change] = result.changes
    assert change.change == "reinforced"
    assert change.record.activation == pytest.approx(0.7 + 0.2 * 0.5)


# -- forget by query: resolved at the command's place in the log ------------------------------

ADDRESS = "My home address is 12 Elm Street"
NEW_ADDRESS = "My home address is now 5 Oak Road"
FORGET_ADDRESS = "forget my home address"


def test_a_forget_by_query_right_after_a_retain_takes_it() -> None:
    stages, log = Stages(), Log()
    stages.process([log.turn(MYSQL)])

    # The turn and the forget are prepared in one batch: the forget still sees the turn.
    result = stages.process(
        [log.turn(ADDRESS, T0 + DAY), log.command("forget", T0 + DAY, query=FORGET_ADDRESS)]
    )

    assert [c.change for c in result.changes] == ["created", "forgotten"]
    address = by_content(stages)[ADDRESS]
    assert result.changes[1].record.id == address.id
    assert address.status == "forgotten"
    assert address.history[-1].detail == f"query: {FORGET_ADDRESS}"
    assert address.history[-1].cause_event_id == "cmd-3"
    assert by_content(stages)[MYSQL].status == "active"


def test_a_forget_by_query_before_the_retain_does_not_take_it() -> None:
    stages, log = Stages(), Log()

    result = stages.process(
        [log.command("forget", T0, query=FORGET_ADDRESS), log.turn(ADDRESS, T0 + DAY)]
    )

    assert [c.change for c in result.changes] == ["created"]
    assert by_content(stages)[ADDRESS].status == "active"


def test_a_forget_by_query_takes_an_older_superseded_value_too() -> None:
    stages, log = Stages(), Log()
    stages.process([log.turn(ADDRESS, T0), log.turn(MYSQL, T0), log.turn(NEW_ADDRESS, T0 + DAY)])
    assert by_content(stages)[ADDRESS].status == "superseded"

    result = stages.process([log.command("forget", T0 + 2 * DAY, query=FORGET_ADDRESS)])

    forgotten = {c.record.content for c in result.changes if c.change == "forgotten"}
    assert forgotten == {ADDRESS, NEW_ADDRESS}
    assert len(result.changes) == 2
    assert by_content(stages)[MYSQL].status == "active"


def test_a_forget_by_query_that_matches_nothing_forgets_nothing() -> None:
    stages, log = Stages(), Log()
    stages.process([log.turn(ADDRESS), log.turn(MYSQL), log.turn(PREFERENCE)])

    result = stages.process([log.command("forget", T0 + DAY, query="forget my favourite colour")])

    assert result.changes == []
    assert result.counts["command_forget"] == 1
    assert {r.status for r in stages.bank("acme").records.values()} == {"active"}


def test_a_forget_by_query_combines_with_named_ids() -> None:
    stages, log = Stages(), Log()
    stages.process([log.turn(ADDRESS), log.turn(MYSQL), log.turn(PREFERENCE)])
    preference = by_content(stages)[PREFERENCE]

    result = stages.process(
        [log.command("forget", T0 + DAY, query=FORGET_ADDRESS, memory_ids=[preference.id])]
    )

    assert [c.record.content for c in result.changes] == [PREFERENCE, ADDRESS]
    assert by_content(stages)[MYSQL].status == "active"


def test_an_erase_by_query_takes_forgotten_memories_and_a_forget_skips_them() -> None:
    stages, log = Stages(), Log()
    stages.process([log.turn(ADDRESS), log.turn(MYSQL)])
    stages.process([log.command("forget", T0 + DAY, query=FORGET_ADDRESS)])

    again = stages.process([log.command("forget", T0 + 2 * DAY, query=FORGET_ADDRESS)])
    erased = stages.process([log.command("erase", T0 + 3 * DAY, query=FORGET_ADDRESS)])

    assert again.changes == []
    assert [c.change for c in erased.changes] == ["erased"]
    assert set(by_content(stages)) == {MYSQL}
    assert erased.writes() == {erased.changes[0].record.id: None}  # a tombstone


def test_a_forget_by_query_never_reaches_another_namespace() -> None:
    stages, log = Stages(), Log()
    stages.process([log.turn(ADDRESS, namespace="globex"), log.turn(MYSQL)])

    result = stages.process([log.command("forget", T0 + DAY, query=FORGET_ADDRESS)])

    assert result.changes == []
    assert by_content(stages, "globex")[ADDRESS].status == "active"


# -- recall signals -----------------------------------------------------------------------------


def test_recall_hits_reinforce_activation_and_count_accesses() -> None:
    stages, log = Stages(), Log()
    first = remember(stages, log, OFFICE, T0)
    second = remember(stages, log, PROCEDURE, T0)
    at = T0 + 10 * DAY

    result = stages.process([log.recalled([first.id, second.id, "m_missing"], at)])

    assert [c.change for c in result.changes] == ["reinforced", "reinforced"]
    top = stages.bank("acme").records[first.id]
    runner_up = stages.bank("acme").records[second.id]
    assert top.access_count == runner_up.access_count == 1
    assert top.last_access == at
    assert top.activation_at == at
    # Rank 0 adds the full weight, rank 1 half of it, on top of the decayed activation.
    assert top.activation == pytest.approx(0.7 * math.exp(-0.05 * 10) + 0.2)
    assert runner_up.activation == pytest.approx(0.65 * math.exp(-0.05 * 10) + 0.1)
    assert result.counts["signals"] == 1


def test_repeated_recall_keeps_counting() -> None:
    stages, log = Stages(), Log()
    record = remember(stages, log, OFFICE, T0)

    for day in range(1, 4):
        stages.process([log.recalled([record.id], T0 + day * DAY)])

    assert stages.bank("acme").records[record.id].access_count == 3


def test_a_recall_hit_reactivates_a_cold_memory() -> None:
    stages, log = Stages(), Log()
    record = remember(stages, log, OFFICE, T0)
    stages.process([log.command("tick", T0 + 200 * DAY)])
    assert stages.bank("acme").records[record.id].status == "cold"

    result = stages.process([log.recalled([record.id], T0 + 201 * DAY)])

    [change] = result.changes
    assert change.change == "reactivated"
    assert change.record.status == "active"
    assert change.record.activation >= 0.2
    assert change.record.history[-1].change == "reactivated"


def test_recall_hits_on_forgotten_or_superseded_memories_are_ignored() -> None:
    stages, log = Stages(), Log()
    mysql = remember(stages, log, MYSQL, T0)
    stages.process([log.turn(POSTGRES, T0 + DAY)])
    office = remember(stages, log, OFFICE, T0)
    stages.process([log.command("forget", T0 + DAY, memory_ids=[office.id])])

    result = stages.process([log.recalled([mysql.id, office.id], T0 + 2 * DAY)])

    assert result.changes == []


# -- light consolidation ------------------------------------------------------------------------


def test_light_consolidation_runs_every_twenty_turns() -> None:
    stages, log = Stages(), Log()
    old = remember(stages, log, OFFICE, T0)  # turn 1
    later = T0 + 200 * DAY

    eighteen = stages.process([log.turn("ok thanks", later) for _ in range(18)])  # turns 2-19

    assert eighteen.changes == []
    assert stages.bank("acme").turns_since_consolidation == 19

    twentieth = stages.process([log.turn("lol ok", later)])  # turn 20

    assert [(c.change, c.record.id) for c in twentieth.changes] == [("cooled", old.id)]
    assert twentieth.changes[0].cause_event_id == "turn-20"
    assert stages.bank("acme").turns_since_consolidation == 0


def test_light_consolidation_interval_follows_the_policy() -> None:
    stages, log = Stages(policy=MemoryPolicy(light_consolidation_every=3)), Log()
    old = remember(stages, log, OFFICE, T0)

    result = stages.process([log.turn("hi", T0 + 200 * DAY), log.turn("ok", T0 + 200 * DAY)])

    assert [(c.change, c.record.id) for c in result.changes] == [("cooled", old.id)]


# -- segments -----------------------------------------------------------------------------------


def test_turns_on_one_topic_share_a_segment_and_a_new_topic_starts_one() -> None:
    topic_a, topic_a2, topic_b = "billing runs nightly", "billing export is slow", "cats are nice"
    encoder = ExactEncoder({topic_a: [1.0], topic_a2: at_cosine(0.6), topic_b: at_cosine(0.0, 2)})
    stages, log = Stages(encoder), Log()

    stages.process([log.turn(topic_a), log.turn(topic_a2), log.turn(topic_b)])

    records = by_content(stages)
    assert records[topic_a].segment_id == records[topic_a2].segment_id
    assert records[topic_b].segment_id != records[topic_a].segment_id
