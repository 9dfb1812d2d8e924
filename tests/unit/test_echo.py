"""Topic echoes (``pipeline.memory.rules.echo``): an acknowledgement that names the topic of a
memory already there is not stored; a turn that adds a value, a change or a negation is.

Both sides in English and Chinese, through the stages' pure code (prepare with the rules, then
consolidate) with a fake encoder, as ``test_decisions`` does.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from ingest_support import T0, Log, Stages, by_content, only

from pipeline.memory.bank import NamespaceBank
from pipeline.memory.rules.echo import ECHO_MAX_KEEP, echoed, residue

MEETING = "My son's parent-teacher meeting is on the 14th at 5:30."
ENDOSCOPY = "下周二上午九点去做胃镜，前一晚十点以后不能吃东西。"


def told(fact: str) -> tuple[Stages, Log]:
    stages, log = Stages(), Log()
    [created] = only(stages.process([log.turn(fact, T0)]), "created")
    assert created.content == fact
    return stages, log


def stored_after(fact: str, turn: str, *, session_id: str = "s1") -> bool:
    stages, log = told(fact)
    result = stages.process([log.turn(turn, T0 + timedelta(minutes=1), session_id=session_id)])
    assert result.counts["filtered"] == 0  # the rules keep it: only the bank can tell
    return turn in by_content(stages)


@pytest.mark.parametrize(
    ("fact", "turn"),
    [
        (MEETING, "ok ok parent-teacher meeting, got it"),
        (MEETING, "Understood regarding the parent-teacher meeting, thank you."),
        ("The prod deploy freeze starts on Friday at 18:00.", "👍 deploy stuff noted"),
        ("my car's at the garage, pickup is tmrw at 5pm", "k thx again for the car thing"),
        (ENDOSCOPY, "胃镜的事收到啦"),
        (ENDOSCOPY, "哈哈谢谢提醒我胃镜的事"),
        ("季度经营分析会定于本月18日下午两点，在总部二楼。", "关于经营分析会，已知悉，谢谢。"),
    ],
)
def test_an_acknowledgement_naming_a_memorys_topic_is_not_stored(fact: str, turn: str) -> None:
    assert not stored_after(fact, turn)


@pytest.mark.parametrize(
    ("fact", "turn"),
    [
        # A new value, a change, a negation or another topic is news, acknowledged or not.
        (MEETING, "the parent-teacher meeting moved to 6pm"),
        (MEETING, "thanks! the parent-teacher meeting moved to 6pm"),
        (MEETING, "ok, the parent-teacher meeting is cancelled"),
        (MEETING, "ok no parent-teacher meeting"),
        (MEETING, "got it, and the parent-teacher meeting is on zoom"),
        (MEETING, "thanks, my daughter's parent-teacher meeting is on the 15th"),
        (ENDOSCOPY, "好的，胃镜改到下周三了"),
        (ENDOSCOPY, "胃镜取消了哈哈"),
        (ENDOSCOPY, "收到，胃镜换到市一医院做"),
        (ENDOSCOPY, "谢谢提醒，牙医的事也别忘了"),
    ],
)
def test_a_turn_that_adds_something_to_the_topic_is_stored(fact: str, turn: str) -> None:
    assert stored_after(fact, turn)


def test_an_echo_of_another_sessions_memory_is_not_stored_either() -> None:
    assert not stored_after(MEETING, "ok ok parent-teacher meeting, got it", session_id="s2")


def test_an_echo_changes_nothing_in_the_bank() -> None:
    stages, log = told(MEETING)
    before = dict(stages.bank("acme").records)

    result = stages.process([log.turn("ok ok parent-teacher meeting, got it", T0)])

    assert result.changes == []
    assert stages.bank("acme").records == before


def test_the_same_acknowledgement_with_nothing_to_echo_is_kept() -> None:
    stages, log = Stages(), Log()

    stages.process([log.turn("ok ok parent-teacher meeting, got it", T0)])

    assert "ok ok parent-teacher meeting, got it" in by_content(stages)


def test_a_bare_restatement_is_left_to_the_duplicate_rule() -> None:
    # Nothing acknowledges: it is the fact told again, which confirms or merges as always.
    assert not residue(MEETING).acknowledges
    stages, _ = told(MEETING)
    [existing] = stages.bank("acme").records.values()
    assert echoed(MEETING, None, [existing]) is None


def test_a_turn_the_classifier_is_sure_about_is_never_an_echo() -> None:
    stages, _ = told(MEETING)
    [existing] = stages.bank("acme").records.values()
    turn = "ok ok parent-teacher meeting, got it"

    assert echoed(turn, None, [existing]) == existing.id
    assert echoed(turn, ECHO_MAX_KEEP - 0.01, [existing]) == existing.id
    assert echoed(turn, ECHO_MAX_KEEP, [existing]) is None


def test_residue_takes_out_the_acknowledgement_and_keeps_values() -> None:
    assert residue("thx 4 the car reminder lol").terms == ("car",)
    assert residue("thanks, I have 4 cars").terms == ("4", "car")
    assert residue("考级的事知道啦").terms == ("考级",)
    assert residue("考级改成考九级了，知道啦").acknowledges
    assert "九级" in residue("考级改成考九级了，知道啦").terms
    assert residue("没问题，胃镜的事收到").negated is False
    assert residue("胃镜的事不做了").negated is True


def test_a_restored_bank_finds_the_same_echo_as_the_live_one() -> None:
    # Replay rebuilds the bank from its records: the echo's candidates come back in the same order.
    stages, log = told(MEETING)
    stages.process([log.turn("The school fair is on Saturday.", T0 + timedelta(minutes=1))])
    live = stages.bank("acme")
    restored = NamespaceBank.load("acme", live.records.values(), live.counters())
    turn = "ok ok parent-teacher meeting, got it"

    assert [r.id for r in restored.session_current("s1")] == [
        r.id for r in live.session_current("s1")
    ]
    assert echoed(turn, None, restored.session_current("s1")) == echoed(
        turn, None, live.session_current("s1")
    )
    assert echoed(turn, None, live.session_current("s1")) == by_content(stages)[MEETING].id


@pytest.mark.parametrize(
    ("fact", "turn"),
    [
        # Verbs of knowing with an object, placeholders and particles are no acknowledgement.
        ("I'm taking French classes on Mondays.", "I understand French"),
        ("周日顺便买一包木屑。", "周日去买东西了"),
        ("周日顺便买一包木屑。", "周日买的东西"),
    ],
)
def test_words_that_only_look_like_an_acknowledgement_are_not_one(fact: str, turn: str) -> None:
    assert not residue(turn).acknowledges
    assert stored_after(fact, turn)


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("Shall we use Postgres for the billing service?", "ok, Postgres for the billing service"),
        ("周五的评审会要不要改到线上？", "好的，评审会改到线上"),
        ("周五的评审会改到线上吗", "好的，周五的评审会线上"),
    ],
)
def test_agreeing_to_a_question_is_an_answer_not_an_echo(question: str, answer: str) -> None:
    assert stored_after(question, answer)


@pytest.mark.parametrize(
    ("fact", "turn"),
    [
        # A small-talk word as the predicate of the topic is a statement about it.
        ("billing runs nightly", "billing is ok"),
        ("The hotel in Lisbon is booked for May.", "the hotel in Lisbon looks great"),
        ("The deploy freeze starts on Friday.", "the deploy freeze'll be ok"),
        ("计费系统每晚跑一次。", "计费系统还行"),
        ("计费系统每晚跑一次。", "计费系统挺好的"),
    ],
)
def test_a_topic_with_a_predicate_of_its_own_is_a_statement(fact: str, turn: str) -> None:
    assert residue(turn).asserts
    assert stored_after(fact, turn)
