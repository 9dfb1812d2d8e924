"""Updates by slot (``pipeline.memory.rules.slots``): value spans, frames and the update rule.

Pure functions with plain values: the frame vectors are given by hand (``frames_at``), so each
test states exactly how close two frames are; the real encoder is measured by
``python -m training.slots.evaluate`` instead.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from ingest_support import DAY, T0, ExactEncoder, Log, Stages, at_cosine, by_content

from pipeline.ingest.local import LocalPipeline
from pipeline.memory.rules.slots import (
    Statement,
    about_two_things,
    about_whom,
    adds_a_value,
    chinese_number,
    content_word_count,
    slot_of,
    slot_vector,
    update_reason,
    value_spans,
)
from pipeline.runtime.settings import MemoryPolicy
from schemas.memory import Kind, Region, Slot
from schemas.prepared import encode_vector

POLICY = MemoryPolicy()


def frames_at(cosine: float) -> tuple[np.ndarray, np.ndarray]:
    first = np.array([1.0, 0.0], dtype=np.float32)
    second = np.array([cosine, math.sqrt(1.0 - cosine * cosine)], dtype=np.float32)
    return first, second


def statement(
    text: str,
    vector: np.ndarray,
    *,
    speaker: str = "ana",
    kind: Kind = "fact",
    region: Region = "semantic",
) -> Statement:
    return Statement(speaker, kind, region, None, slot_of(text), vector)


def reason(older: str, newer: str, cosine: float, **kinds: object) -> str | None:
    first, second = frames_at(cosine)
    return update_reason(
        statement(older, first, **kinds),  # type: ignore[arg-type]
        statement(newer, second),
        POLICY,
    )


# -- value spans -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("一百五", 150),
        ("四千五", 4500),
        ("一万二千", 12000),
        ("十一", 11),
        ("两百", 200),
        ("两万五", 25000),  # a trailing digit after 万 counts in thousands
        ("一亿五", 150_000_000),
        ("一百零五", 105),  # after 零 it counts in ones
        ("三万零五", 30_005),
    ],
)
def test_chinese_numerals_read_as_numbers(text: str, value: int) -> None:
    assert chinese_number(text) == value


@pytest.mark.parametrize("text", ["同事带了榴莲千层来公司", "去百货大楼逛了逛", "万一下雨就改天"])
def test_a_lone_magnitude_character_begins_a_word_and_is_no_number(text: str) -> None:
    # 千层 (a layered cake) once read as "1000 层" and superseded "隔两层楼都能闻到".
    assert [s for s in value_spans(text) if s.kind == "number"] == []


# Kinds from the value probe (bench/values): parts of a whole, a number whatever follows it,
# units of a dose.
@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("降压药早上吃一片半", ["number:1.5"]),
        ("每次一个半小时", ["number:1.5"]),
        ("狗粮早晚各四分之三杯", ["number:0.75"]),
        ("电量只剩百分之三十了", ["number:30"]),
        ("血红蛋白得先回到一百二以上", ["number:120"]),
        ("退税一千二百三到账了", ["number:1230"]),
        ("新药二十五毫克的", ["number:25"]),
        ("Using 1/2 tsp of salt now", ["number:0.5"]),
        ("Our team grew to a dozen people.", ["number:12"]),
    ],
)
def test_amounts_told_as_grammar(text: str, values: list[str]) -> None:
    assert [s.value for s in value_spans(text) if s.kind == "number"] == values


@pytest.mark.parametrize(
    "text",
    ["一辆车就够了", "万一下雨就改天", "半年蹿了一大截", "每晚一集", "physio twice a week"],
)
def test_articles_rates_and_durations_beside_a_value_are_no_amounts(text: str) -> None:
    # A rate or a duration beside a slot's value would read as a second changed value.
    assert [s for s in value_spans(text) if s.kind == "number"] == []


@pytest.mark.parametrize(
    "text",
    [
        "Hypothetically, if I finished the certification would my pay go up?",
        "No idea whether the permit got approved or not.",
        "假如下个月上线的话，服务器预算得加到两万",
        "要是贷款能批下来，月供大概六千四",
    ],
)
def test_a_state_in_a_supposed_clause_does_not_hold(text: str) -> None:
    assert [s for s in value_spans(text) if s.kind == "state"] == []


def test_numbers_compare_by_value_whatever_their_spelling() -> None:
    assert slot_of("Our rent is 1,450 a month.").values == ["number:1450"]
    assert slot_of("We pay 1450 monthly for rent.").values == ["number:1450"]
    assert slot_of("房租一个月四千五。").values == ["number:4500"]  # 一个: "a", not a number


def test_the_frame_masks_values_and_keeps_the_attribute() -> None:
    slot = slot_of("The dev server listens on port 8080.")
    assert slot.frame == "The dev server listens on port …."
    assert "port" in slot.terms and slot.values == ["number:8080"]


def test_task_states_are_values_on_one_scale() -> None:
    assert "state:planned" in slot_of("We're planning to repaint the nursery.").values
    assert "state:in_progress" in slot_of("装修进行中，在贴砖。").values
    assert "state:done" in slot_of("Nursery is finished!").values


def test_identifiers_and_names_are_values_but_acronyms_and_first_words_are_not() -> None:
    kinds = {s.value for s in value_spans("Our CI runs on Jenkins, host db-stg-01.internal")}
    assert kinds == {"name:jenkins", "identifier:db-stg-01.internal"}
    assert slot_of("Helix won me over.").values == []


def test_a_chinese_word_inside_a_longer_one_is_not_counted_again() -> None:
    # Segmented for search: 国际象棋 also gives 国际 and 象棋, 少年宫 gives 少年.
    assert content_word_count(slot_of("我儿子在学国际象棋，每周日下午在少年宫上课。")) == 7
    assert content_word_count(slot_of("I swim at the leisure centre before work.")) == 4


def test_moments_and_additions_are_flagged() -> None:
    assert slot_of("Had lunch with Tom yesterday.").moment
    assert slot_of("周一见了新客户。").moment
    assert not slot_of("周会是周一上午十点。").moment
    # A weekday tells one time only with a past verb; a habit on a weekday is a state.
    assert slot_of("Watched the match at Dan's on Tuesday.").moment
    assert slot_of("Ran into Priya at the market on Saturday.").moment
    assert not slot_of("I help out at the food bank on Saturday mornings.").moment
    assert not slot_of("I read in the bath on Sunday nights.").moment
    assert slot_of("I also like old soul records.").additive
    assert slot_of("我也喜欢看悬疑电影。").additive


# -- the rule --------------------------------------------------------------------------------


def test_a_number_that_changed_in_the_same_slot_is_an_update() -> None:
    found = reason("The dev server listens on port 8080.", "dev server port is 5173", 0.85)
    assert found is not None and "number:8080 -> number:5173" in found


def test_a_restated_value_is_not_an_update() -> None:
    assert reason("Our rent is 1,450 a month.", "We pay 1450 monthly for rent.", 0.95) is None


def test_frames_below_the_threshold_are_another_slot() -> None:
    older, newer = "The dev server listens on port 8080.", "Ping me on 5173"
    assert reason(older, newer, POLICY.slot_cosine - 0.01) is None


def test_close_frames_sharing_most_words_are_one_slot_below_the_cosine() -> None:
    older, newer = "门锁密码是1357。", "门锁密码2468。"
    assert reason(older, newer, POLICY.slot_cosine_floor + 0.01) is not None
    assert reason(older, newer, POLICY.slot_cosine_floor - 0.01) is None


def test_statements_that_open_with_two_people_are_two_slots() -> None:
    assert about_whom(slot_of("My brother Sam lives in Leeds.")) == "brother"
    assert about_whom(slot_of("I live with my boyfriend Marcus in Camden.")) == "self"
    assert about_whom(slot_of("Standup moved to 10.")) is None
    assert about_whom(slot_of("My older brother lives in Leeds.")) == "brother"
    assert about_whom(slot_of("My office is in Leeds.")) == "self"
    assert about_whom(slot_of("我大女儿今年12岁。")) == "女儿"
    assert about_whom(slot_of("我在宁德时代做工艺工程师")) == "self"
    older, newer = "My brother Sam lives in Leeds.", "I live with my boyfriend Marcus in Camden."
    assert reason(older, newer, 0.9) is None
    assert reason("My brother Sam lives in Leeds.", "My brother Sam lives in York now.", 0.9)


def test_where_the_encoder_does_not_read_one_word_in_common_is_no_slot() -> None:
    # 门锁 and 密码 in common: the topic and its attribute. 每天 or 今年 alone is a topic of many.
    assert reason("门锁密码是1357。", "门锁密码2468。", 0.9) is not None
    assert reason("我每天喝两杯美式。", "我每天六点下班。", 0.9) is None
    assert reason("我爸今年60，还在上班。", "我是坐地铁10号线上班的", 0.9) is None
    # 每周五 is one word, though jieba also gives 每周 and 周五.
    assert reason("我每周五下午做针灸，在中医院。", "我们组周报每周五交", 0.9) is None


def test_a_state_moving_on_is_an_update() -> None:
    assert reason("PR #482 is in review.", "PR #482 got merged.", 0.81) is not None


def test_a_past_event_is_never_superseded_by_another_event() -> None:
    older = "Ran 5 km this morning in 27 minutes."
    assert reason(older, "Ran 10 km, 58 minutes.", 0.99) is None
    assert reason("Had a migraine", "Another migraine", 0.99, region="episodic") is None


def test_a_task_told_as_an_event_can_still_move_on() -> None:
    older = "Started painting the nursery this weekend."
    assert reason(older, "Nursery painting is finished.", 0.9, region="episodic") is not None


def test_another_speaker_never_updates_what_someone_said() -> None:
    first, second = frames_at(0.99)
    older = statement("I live in Denver.", first, speaker="melanie")
    newer = statement("I live in Austin.", second, speaker="caroline")
    assert update_reason(older, newer, POLICY) is None


def test_an_addition_is_not_a_switch() -> None:
    assert reason("I like Jazz Fusion.", "I also like Bossa Nova.", 0.95) is None


def test_a_minimal_pair_of_frames_names_two_attributes() -> None:
    older, newer = "Our frontend is written in TypeScript.", "Our backend is written in Rust."
    assert reason(older, newer, 0.95) is None


def test_two_values_of_different_kinds_changing_at_once_are_two_subjects() -> None:
    assert (
        reason("The Berlin office has 40 people.", "The Lisbon office has 12 people.", 1.0) is None
    )


def test_a_date_and_an_amount_are_two_attributes() -> None:
    assert reason("Our rent is due on the 1st.", "Our rent is 1,450.", 0.95) is None


def test_procedures_emotions_and_small_talk_never_take_part() -> None:
    older, newer = "The dev server listens on port 8080.", "dev server port is 5173"
    assert reason(older, newer, 0.95, kind="procedure") is None
    assert reason(older, newer, 0.95, kind="emotion") is None


# -- through the stages ----------------------------------------------------------------------

PORT_OLD = "The dev server listens on port 8080."
PORT_NEW = "dev server port is 5173"


# The two statements close as wholes (given by hand): the slot is compared by their own vectors.
PORT_VECTORS = {PORT_OLD: [1.0, 0.0, 0.0], PORT_NEW: at_cosine(0.95)}


def test_a_slot_update_supersedes_through_the_stages_and_keeps_the_old_memory() -> None:
    encoder = ExactEncoder(PORT_VECTORS)
    stages, log = Stages(encoder), Log()
    processed = stages.process([log.turn(PORT_OLD, T0), log.turn(PORT_NEW, T0 + 3 * DAY)])

    records = by_content(stages)
    old, new = records[PORT_OLD], records[PORT_NEW]
    assert old.status == "superseded" and old.superseded_by == new.id
    assert old.valid_to == new.valid_from
    assert "slot: frame cosine 0.950" in old.history[-1].detail
    # Nothing more was embedded for the slot: one text per statement.
    assert processed.prepared.counts["encoded_texts"] == 2
    assert old.slot is not None and old.slot.vector_b64 is None


def test_far_apart_statements_of_one_frame_are_not_one_slot() -> None:
    # Before 2026-12-03 the masked frames were embedded and compared; now the statements are,
    # and statements this far apart (cosine 0) are two slots even though their frames match.
    encoder = ExactEncoder({PORT_OLD: [1.0, 0.0, 0.0], PORT_NEW: [0.0, 1.0, 0.0]})
    stages, log = Stages(encoder), Log()
    stages.process([log.turn(PORT_OLD, T0), log.turn(PORT_NEW, T0 + 3 * DAY)])
    assert by_content(stages)[PORT_OLD].status == "active"


def test_a_frame_vector_recorded_by_an_earlier_build_is_still_the_one_read() -> None:
    # Replay of an older log decides as the build that wrote it did.
    recorded = np.asarray(at_cosine(0.6), np.float32)
    older = Slot(frame="…", vector_b64=encode_vector(recorded))
    own = np.asarray([1.0, 0.0], np.float32)
    assert np.array_equal(slot_vector(older, own), recorded)
    assert np.array_equal(slot_vector(Slot(frame="…"), own), own)
    assert slot_vector(None, own) is None


def test_a_bank_restored_between_the_two_statements_still_supersedes() -> None:
    # The older memory's slot vector comes back from its record, not from any cache (I2).
    encoder = ExactEncoder(PORT_VECTORS)
    pipeline = LocalPipeline(encoder)
    log = Log()
    for text, at in ((PORT_OLD, T0), (PORT_NEW, T0 + 3 * DAY)):
        message = log.turn(text, at)
        pipeline.publish("acme", message.value)
        pipeline.run()
        pipeline.restart()

    records = {r.content: r for r in pipeline.records().values()}
    assert records[PORT_OLD].status == "superseded"
    assert records[PORT_OLD].superseded_by == records[PORT_NEW].id
    assert pipeline.records() == pipeline.replayed()


def test_a_question_states_no_value() -> None:
    assert slot_of("Is the dev server still on port 8080?").question
    assert reason("Is the dev server on port 8080?", "dev server port is 5173", 0.95) is None


# -- switches: "from <the old value> to <the new one>" ---------------------------------------


@pytest.mark.parametrize(
    ("text", "departed"),
    [
        ("We moved from MySQL to PostgreSQL for billing.", ["name:mysql"]),
        ("我们从MySQL换成了PostgreSQL。", ["name:mysql"]),
        ("I work from 9 to 5.", []),  # a range of numbers, not a switch
        ("We use PostgreSQL now.", []),
    ],
)
def test_a_switch_names_the_value_it_leaves(text: str, departed: list[str]) -> None:
    assert slot_of(text).departed == departed


def test_a_switch_supersedes_the_value_it_leaves_even_when_it_still_names_it() -> None:
    older = "We use MySQL for the billing database."
    newer = "We moved from MySQL to PostgreSQL for billing."
    assert reason(older, newer, 0.61) is not None  # the frames are only near (0.61)
    assert reason(older, "We moved the logs from MySQL to PostgreSQL.", 0.4) is None  # not near
    # Leaving a value the older statement does not hold says nothing about it.
    assert reason(older, "We moved from Oracle to PostgreSQL for billing.", 0.61) is None


# -- grammar that generalises: measure words, clock times, labels, abbreviations ----------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("每天遛狗三趟", "number:3"),
        ("一天喝两杯咖啡", "number:2"),
        ("健身房晚上六点半关门", "number:6:30"),
        ("班车九点十五发车", "number:9:15"),
        ("7点40出门", "number:7:40"),
    ],
)
def test_measure_words_and_clock_times_are_values(text: str, value: str) -> None:
    assert value in slot_of(text).values


def test_a_bit_is_not_one_oclock() -> None:
    assert not [v for v in slot_of("一点也不累").values if v.startswith("number:")]


def test_a_label_value_after_a_colon_is_a_name() -> None:
    assert "name:firefox" in slot_of("Default browser: Firefox.").values


def test_an_abbreviated_attribute_is_the_same_attribute() -> None:
    older, newer = "The build server address is ci-01.corp.", "build srv addr: ci-07.corp"
    assert reason(older, newer, 0.85) is not None
    # A different word in the same place is still another attribute.
    frontend, backend = "The frontend host is fe-01.corp.", "The backend host is be-02.corp."
    assert reason(frontend, backend, 0.9) is None


# -- a task's state moving on ----------------------------------------------------------------


def state_reason(
    older: str, newer: str, cosine: float, *, speaker: str = "ana", frames: float = 0.1
) -> str | None:
    """Whole-statement vectors at ``cosine``; the frames far apart (``frames``)."""
    first_frame, second_frame = frames_at(frames)
    first, second = frames_at(cosine)
    return update_reason(
        Statement("ana", "fact", "semantic", None, slot_of(older), first_frame, first),
        Statement(speaker, "fact", "episodic", None, slot_of(newer), second_frame, second),
        POLICY,
    )


def test_a_task_worded_anew_at_a_later_state_supersedes() -> None:
    older = "About halfway through the thesis draft, the methods part is the slow bit."
    assert state_reason(older, "Handed in the thesis this afternoon, what a relief!", 0.45)
    assert state_reason("驾照正在考，科目二挺难的", "驾照终于拿到了", 0.42)
    assert state_reason("Planning to repaint the fence in spring.", "Fence repaint started.", 0.5)


def test_a_state_that_does_not_move_on_or_another_task_is_no_update() -> None:
    # Nothing shared: two tasks.
    assert state_reason("Working on the garden shed.", "Finished the tax return!", 0.6) is None
    # Back to an earlier state: not a progression (the slot rule decides such cases).
    assert state_reason("The migration is done.", "Started the migration over.", 0.7) is None
    # Two parts of one piece of work, aligned word for word.
    older = "The frontend redesign review is in progress."
    assert state_reason(older, "The backend redesign review is done.", 0.9) is None
    # Too far apart as wholes, another speaker, an addition.
    halfway = "Halfway through the book."
    assert state_reason(halfway, "Finished the book.", 0.2) is None
    assert state_reason(halfway, "Finished the book.", 0.8, speaker="bo") is None
    assert state_reason(halfway, "Also finished the book.", 0.8) is None


def test_a_state_needs_brief_statements_sharing_what_the_task_is() -> None:
    # A long chat line shares a word with many things: no evidence of one task.
    older = (
        "Thanks so much for the tips on the community garden, I'm planning to ask the council, "
        "the neighbours and the school about funding, volunteers and a tool shed next month."
    )
    newer = "Finished the community newsletter today."
    assert state_reason(older, newer, 0.6) is None


# -- a value in plain words after the copula; a new way to reach the same goal ---------------


def test_a_plain_word_after_the_copula_is_a_value_not_an_attribute() -> None:
    assert reason("公司的邮箱是网易的，容量5G。", "公司的邮箱是腾讯的，容量20G。", 0.9) is not None
    # Before the copula the word still names the attribute.
    assert reason("前端框架是React，版本18。", "后端框架是React，版本20。", 0.9) is None


def test_a_goal_reached_another_way_supersedes_the_old_way() -> None:
    older = "To renew the parking permit, mail the green form to the town hall."
    newer = "Parking permits moved online: to renew the parking permit, use the city portal."
    assert state_reason(older, newer, 0.7, frames=0.2) is not None
    assert state_reason("打印机卡纸了就关机重开。", "打印机卡纸了先打开后盖把纸抽出来。", 0.6)
    assert state_reason("报销发票：贴在A4纸上交给前台。", "报销发票现在在钉钉上拍照提交。", 0.6)


def test_the_same_goal_told_the_same_way_or_about_something_else_is_no_update() -> None:
    older = "To renew the parking permit, mail the green form to the town hall."
    # The same way, worded again: a restatement.
    again = "To renew the parking permit, mail the green form to the town hall office."
    assert state_reason(older, again, 0.95) is None
    # Another goal.
    assert state_reason(older, "To book a sports hall, call the leisure centre.", 0.6) is None
    # A past event that opened with a condition is no standing instruction.
    trip = "When we visited Rome, we ate gelato every day."
    assert update_reason_events(trip, "When we visited Rome, we saw the Colosseum.") is None


def test_a_goal_about_another_identifier_or_name_is_another_thing() -> None:
    # "工单…：" reads as a goal opening both; the tickets differ, so neither replaces the other.
    assert state_reason("工单OPS-3307：磁盘告警。", "工单OPS-3370：证书过期。", 0.9) is None
    older, newer = "Ticket OPS-41: restart the cache.", "Ticket OPS-14: rotate the keys."
    assert state_reason(older, newer, 0.9) is None
    # The same ticket given another way is still an update.
    assert state_reason("工单OPS-3307：重启采集器。", "工单OPS-3307：扩容磁盘。", 0.9) is not None


def test_about_two_things_and_adds_a_value() -> None:
    li_na, li_yan = slot_of("李娜负责招聘。"), slot_of("李妍负责新员工培训。")
    assert about_two_things(li_na, li_yan)
    assert not about_two_things(li_na, slot_of("李娜负责招聘和面试。"))
    passport, licence = slot_of("护照到期：2028年6月。"), slot_of("驾照：2030年。")
    assert adds_a_value(passport, licence)
    assert not adds_a_value(passport, slot_of("护照到期是2028年6月"))
    # Relative times frame a statement: they are no new value.
    assert not adds_a_value(slot_of("The demo is ready"), slot_of("The demo is ready today"))


def update_reason_events(older: str, newer: str) -> str | None:
    first, second = frames_at(0.9)
    return update_reason(
        Statement("ana", "fact", "episodic", None, slot_of(older), first, first),
        Statement("ana", "fact", "episodic", None, slot_of(newer), second, second),
        POLICY,
    )


def test_a_person_called_by_surname_and_title_is_a_name() -> None:
    assert "name:陈大夫" in slot_of("我的牙医是口腔医院的陈大夫。").values
    assert "name:小周老师" in slot_of("钢琴课换给小周老师带了").values
    assert not [v for v in slot_of("每周总结发给部门").values if v.startswith("name:")]


def test_still_somewhere_is_a_task_under_way() -> None:
    assert "state:in_progress" in slot_of("The contract is still with the lawyers.").values
    older, newer = "The contract is still with the lawyers.", "Contract signed this morning!"
    assert state_reason(older, newer, 0.55) is not None


def test_a_switch_naming_its_slot_supersedes_the_statement_of_that_slot() -> None:
    assert state_reason("我用的手机一直是苹果", "手机换成小米了，拍照好", 0.5)
    older = "The browser I rely on at work is an old version of Safari."
    assert state_reason(older, "I switched my browser to Firefox last week.", 0.5)
    standup = "Team standup happens at 9:15 in room B."
    assert state_reason(standup, "We moved the standup to 10.", 0.5)


def test_a_switch_of_another_slot_or_to_the_same_value_is_no_update() -> None:
    # The slot it switches is not the older statement's.
    assert state_reason("我用的手机一直是苹果", "电脑换成联想了", 0.6) is None
    # "We switched …" names who switched; 我们换了个房子 names no slot at all.
    assert state_reason("我们住在城西的老小区", "我们换了个新房子", 0.6) is None
    # Switching to what the older statement already says.
    assert state_reason("My browser is Firefox.", "Switched my browser to Firefox.", 0.8) is None


def test_a_task_done_with_another_tool_supersedes_the_old_tool() -> None:
    older = "Back up the laptop with Time Machine."
    assert state_reason(older, "Laptop backups: back up the laptop with restic to the NAS.", 0.6)
    # The same tool again is a restatement.
    assert state_reason(older, "Back up the laptop with Time Machine, weekly.", 0.9) is None


def test_a_plan_to_a_name_is_a_noun_not_a_planned_task() -> None:
    assert "state:planned" not in slot_of("I moved my data plan to Mint Mobile.").values
    assert "state:planned" in slot_of("We plan to move in May.").values


def test_two_parts_of_one_job_swapped_word_for_word_are_two_tasks() -> None:
    older = "The kitchen renovation is in progress."
    assert state_reason(older, "The bathroom renovation is done.", 0.7) is None
    # An adverb is no second task: 论文还在写 → 论文终于交了.
    assert state_reason("论文还在写，第三章卡住了。", "论文终于交了！", 0.6)


def test_a_condition_marker_is_not_part_of_the_goal() -> None:
    older = "如果停电了，先去配电箱把总闸推上去。"
    assert state_reason(older, "停电了现在直接打物业电话，他们会派电工来。", 0.6)


def test_a_slot_that_moved_is_a_switch_but_people_moving_are_not() -> None:
    standup = "Our standup is at 9:30 every morning."
    assert state_reason(standup, "Standup moved to 10:15 from Monday.", 0.6)
    home = "We live in a flat near the station."
    assert state_reason(home, "We moved to a house near the station.", 0.6) is None


def test_a_title_with_a_full_stop_does_not_start_a_sentence() -> None:
    assert "name:okafor" in slot_of("My dentist is Dr. Okafor.").values
    assert not [v for v in slot_of("We met. Later we left.").values if v.startswith("name:")]


# -- a value told in plain words; one entity named alike; an amount of the same thing ---------


def words_reason(
    older: str, newer: str, cosine: float, *, nearest: bool = True, session: str = "s2"
) -> str | None:
    """Whole-statement vectors at ``cosine``; frames far apart; ``nearest`` as the caller says;
    the older said in conversation s1, the newer in ``session``."""
    first_frame, second_frame = frames_at(0.1)
    first, second = frames_at(cosine)
    return update_reason(
        Statement("ana", "fact", "semantic", None, slot_of(older), first_frame, first, "s1"),
        Statement("ana", "fact", "semantic", None, slot_of(newer), second_frame, second, session),
        POLICY,
        nearest=nearest,
    )


def test_a_value_in_plain_words_supersedes_the_nearest_statement_of_its_slot() -> None:
    older = "My go-to editor is Vim, I've been living in it for about ten years."
    newer = "Helix has completely won me over. It's the only editor I open."
    assert words_reason(older, newer, 0.57) is not None
    # A side remark of another class (二十分钟) does not stop the value in words (儿歌 → 故事).
    older_zh = "孩子睡前要听儿歌，一般放二十分钟。"
    assert words_reason(older_zh, "孩子睡前非要听《西游记》的故事，别的都不听。", 0.6)


def test_a_value_in_plain_words_needs_the_nearest_a_change_and_no_restatement() -> None:
    older = "My go-to editor is Vim, I've been living in it for about ten years."
    newer = "Helix has completely won me over. It's the only editor I open."
    # Not the memory the new statement is closest to: another fact about the subject.
    assert words_reason(older, newer, 0.57, nearest=False) is None
    # In the same conversation: a line going on about the topic.
    assert words_reason(older, newer, 0.57, session="s1") is None
    blood, test = "My blood type is B positive.", "Blood test results take three days at my clinic."
    assert words_reason(blood, test, 0.42, session="s1") is None
    # So close as wholes that it says the same thing in other words.
    assert words_reason("I drink my coffee black.", "Black coffee, no sugar, always.", 0.8) is None
    # The topic again, with nothing said of it.
    older = "For the billing migration we decided to use a blue-green deployment."
    assert words_reason(older, "Back on the billing migration.", 0.6) is None
    # Nothing shared, a swapped modifier, an amount said again, an addition.
    assert words_reason("早饭一般喝粥。", "午饭一般在公司食堂吃。", 0.6) is None
    assert (
        words_reason("Breakfast is usually porridge.", "Lunch is usually a sandwich.", 0.6) is None
    )
    assert words_reason("房租每月4500。", "房租一个月四千五，押一付三。", 0.7) is None
    assert words_reason("I like jazz.", "I also like old soul records.", 0.5) is None
    # Values of one class changing in another attribute (住 / 上班).
    assert words_reason("我哥住在南京。", "我哥在苏州上班。", 0.7) is None
    # Where the encoder does not read, one opening word in common is a topic, not a slot.
    assert words_reason("我女儿今年上初二，在实验中学。", "我女儿在读中央美院。", 0.7) is None
    assert words_reason("我每天晚饭后快走一小时。", "我每天早上在公园打太极。", 0.8) is None
    assert words_reason("公司前台密码 7391#", "公司搬家了 累死", 0.86) is None
    assert words_reason("我每周六早上去爬山。", "我每周六上午去上瑜伽课", 0.86) is None
    # Two corrections share only the correcting words; two amounts only their unit (年).
    assert (
        words_reason(
            "我说错了，是2016年领的证，2015是订婚", "我说错了，是1月18号，8号那天是四六级", 0.8
        )
        is None
    )
    assert words_reason("我和老公结婚十年了。", "我男朋友是我大学同学，在一起五年了。", 0.7) is None
    # A task moving on shares what the task is; one character (月) is not that.
    assert words_reason("我打算这个月去做个全身体检。", "项目计划12月上线", 0.7) is None
    assert words_reason("家里装修还在等橱柜到货", "装修终于完工了，通风晾三个月再搬进去", 0.7)


def test_a_statement_that_keeps_its_value_or_weighs_a_change_replaces_nothing() -> None:
    # Each of these superseded the older statement before the keeps / weighs signals (the plain
    # words differ, so value_in_words read a switch).
    older = "My go-to editor is Vim, I've been living in it for about ten years."
    weighed = "Helix might win me over. Wondering if it should be the only editor I open."
    assert slot_of(weighed).weighs
    assert words_reason(older, weighed, 0.57) is None
    hiking = "周末早上都去爬山，一般是北高峰。"
    for newer in ("周末早上可能改去羽毛球馆，还在犹豫。", "周末早上要不要换成游泳，纠结。"):
        assert slot_of(newer).weighs
        assert words_reason(hiking, newer, 0.6) is None
    for older, newer in [
        (hiking, "周末早上照旧爬山，一早就出发。"),
        ("我在平安银行做柜员。", "还是在平安当柜员，越来越忙。"),
        ("我在平安银行做柜员。", "我还在平安做柜员，快五年了。"),
    ]:
        assert slot_of(newer).keeps and not slot_of(newer).weighs
        assert words_reason(older, newer, 0.6) is None
    # Told in plain words with neither, the switch still supersedes.
    assert words_reason(hiking, "周末早上基本泡在羽毛球馆，一打就是一下午。", 0.6)
    # A task still under way has moved on all the same.
    still = "Still working on the nursery, second coat tonight."
    assert slot_of(still).keeps
    assert words_reason("Planning to repaint the nursery.", still, 0.7)


@pytest.mark.parametrize(
    ("signal", "reason", "older", "newer"),
    [
        # What stopped. The Audible, PTA and 美式 pairs superseded nothing before this rule (no
        # changed value's shape is there); all five now end the older statement.
        (
            "ends",
            "ended: ",
            "I do a pottery class every Wednesday evening.",
            "Quit the pottery class, the commute there was killing me.",
        ),
        (
            "ends",
            "ended: ",
            "I pay for Audible every month.",
            "cancelled audible, the library app has most of the same books",
        ),
        (
            "ends",
            "ended: ",
            "I'm on the school PTA committee.",
            "No longer on the PTA committee, handed it over in June.",
        ),
        ("ends", "ended: ", "我每天早上喝一杯美式。", "美式戒了，心慌，现在改喝豆浆"),
        # A habit on a weekday is a state that can end (no past verb: no one-off moment).
        (
            "ends",
            "ended: ",
            "I help out at the food bank on Saturday mornings.",
            "Stopped volunteering at the food bank, my knee can't take the standing.",
        ),
        ("ends", "ended: ", "我在健身房有张年卡。", "健身房年卡退了，搬家以后太远"),
        # A correction. None of these superseded before the rule: the older value is named again.
        (
            "corrects",
            "corrected: ",
            "The team offsite is in Harrogate.",
            "my bad, the offsite is in Ripon, Harrogate was last year",
        ),
        (
            "corrects",
            "corrected: ",
            "我女儿的钢琴课是周三下午。",
            "之前说错了，钢琴课是周四下午四点",
        ),
        ("corrects", "corrected: ", "我家宽带是联通的。", "记错了，宽带其实是电信的，联通是手机卡"),
        # Nothing in common but the value taken back.
        (
            "corrects",
            "corrected: ",
            "My locker is number 17.",
            "ignore what I said, it's 71, not 17",
        ),
        # An amount said to have moved. None of these superseded before the rule: no unit in
        # common, or none at all.
        (
            "amount_moved",
            "amount moved: ",
            "My commute to the depot is about 35 minutes.",
            "roadworks finished, the depot commute is down to 20 now",
        ),
        (
            "amount_moved",
            "amount moved: ",
            "Our choir has 24 members.",
            "choir's gone up to 31 since the Christmas concert",
        ),
        (
            "amount_moved",
            "amount moved: ",
            "我们小区物业费每平米两块五。",
            "物业费涨到三块二了，业主群都炸了",
        ),
    ],
)
def test_a_newer_statement_saying_what_changed_supersedes_the_older(
    signal: str, reason: str, older: str, newer: str
) -> None:
    assert getattr(slot_of(newer), signal)
    found = words_reason(older, newer, 0.6)
    assert found is not None and found.startswith(reason)


def test_an_end_of_something_else_or_of_an_event_replaces_nothing() -> None:
    pottery = "I do a pottery class every Wednesday evening."
    assert words_reason(pottery, "Quit my job at the bank, finally.", 0.6) is None
    assert words_reason("Went to a pottery class yesterday.", "Quit pottery.", 0.6) is None
    assert words_reason(pottery, "Quit the pottery class.", 0.6, nearest=False) is None
    # "stopped by" is a visit, not an end; a negated end is a resolve (LoCoMo's chat lines
    # "Thanks! I won't quit on my dreams" once ended "I'm gonna keep going and never quit").
    assert not slot_of("stopped by the bakery again, the rye was great").ends
    for resolve in ("I won't quit on my dreams.", "Keep going and never give up!", "我不会放弃的"):
        assert not slot_of(resolve).ends
    assert (
        words_reason(
            "Thanks! I'm gonna keep on going and never quit.",
            "Thanks! I won't quit, no matter what.",
            0.8,
        )
        is None
    )


def test_an_apology_or_a_correction_of_something_else_replaces_nothing() -> None:
    flood = "Sorry to hear about the flood at your place."
    assert not slot_of("sorry, that sounds awful about your car too").corrects
    assert words_reason(flood, "sorry, that sounds awful about your car too", 0.6) is None
    offsite = "The team offsite is in Harrogate."
    assert words_reason(offsite, "my bad, the dentist is on Friday, not Thursday", 0.6) is None
    assert words_reason(offsite, "my bad, the offsite is in Ripon", 0.6, nearest=False) is None


def test_an_amount_of_something_else_or_told_as_an_event_replaces_nothing() -> None:
    choir = "Our choir has 24 members."
    assert words_reason(choir, "the orchestra has gone up to 60 players", 0.6) is None
    assert not slot_of("I walked 12000 steps on the hike yesterday").amount_moved
    assert words_reason(choir, "choir's gone up to 31", 0.6, nearest=False) is None
    # "now" and 现在 before a number tell the time, not an amount that moved.
    walk = "我家离地铁站走路10分钟。"
    assert not slot_of("现在下午3点了，等会儿走路去地铁站").amount_moved
    assert words_reason(walk, "现在下午3点了，等会儿走路去地铁站", 0.6) is None
    assert not slot_of("it's now 3pm, I'll walk to the station soon").amount_moved


def test_a_lesson_off_once_or_a_better_way_suggested_is_no_end_and_no_keeping() -> None:
    assert not slot_of("钢琴课今天停了，老师生病").ends  # off today: the lessons go on
    assert words_reason("我女儿每周六上午上钢琴课。", "钢琴课今天停了，老师生病", 0.6) is None
    assert not slot_of("还是用公众号挂号吧，方便多了").keeps  # 还是用…吧: "better use …"


def test_an_entity_named_alike_on_both_sides_is_one_value() -> None:
    older = "My sister Leila lives in Porto, right by the river."
    newer = "Leila lives in Lyon, ten minutes from the old town."
    found = words_reason(older, newer, 0.69)
    assert found is not None and "name:porto" in found and "name:leila" not in found
    # The same entity with another attribute stays apart.
    assert words_reason(older, "Leila works in Lyon these days, at a bank.", 0.69) is None


def test_a_new_amount_of_the_same_thing_in_the_same_unit_supersedes() -> None:
    assert words_reason("我们的跑团微信群有86个人。", "跑团群涨到132个人了，得分个二群。", 0.65)
    older = "AWS每月账单大概1800刀，大头是RDS。"
    assert words_reason(older, "这个月起AWS账单压到1100刀左右。", 0.7, nearest=False)


def test_amounts_of_two_things_or_in_two_units_stay_apart() -> None:
    # What each is about changed with the amount.
    assert words_reason("北京办公室有40个人。", "上海办公室有12个人。", 0.7) is None
    # Nothing shared besides the unit.
    assert words_reason("儿子8岁。", "女儿5岁。", 0.7) is None
    # Grammar after the number is no unit.
    card = "Visa ending 6190 is my personal card."
    assert words_reason(card, "Amex ending 3009 is the business card.", 0.64, session="s1") is None
    # Another unit: another attribute.
    assert words_reason("跑团群有86个人。", "跑团群每周跑3次。", 0.7, nearest=False) is None


def test_a_value_in_words_names_the_attribute_the_older_gives_a_value_to() -> None:
    # "My blood type is …": a later line about blood tests does not name the type.
    blood = "My blood type is B positive."
    assert words_reason(blood, "Blood test results take three days at my clinic.", 0.45) is None
    # No attribute said, one word in common: the value mentioned again, not replaced.
    cilantro = "i hate cilantro, tastes like soap, never put it in my food"
    assert words_reason(cilantro, "the cilantro gene thing is real apparently", 0.49) is None
    # Two words in common with no copula: the meal for bookings.
    older = "When you book flights for me, please always request a vegetarian meal."
    assert words_reason(older, "For future bookings, kindly request the gluten-free meal.", 0.5)


def test_a_preference_gives_way_only_to_another_preference() -> None:
    first_frame, second_frame = frames_at(0.1)
    first, second = frames_at(0.67)
    liking = slot_of("i hate cilantro, tastes like soap, never put it in my food")
    mention = slot_of("cilantro is in like every taco at that place")
    older = Statement("ana", "preference", "semantic", None, liking, first_frame, first, "s1")
    fact = Statement("ana", "fact", "semantic", None, mention, second_frame, second, "s2")
    assert update_reason(older, fact, POLICY, nearest=True) is None


def test_one_shared_word_counts_when_the_newer_gives_it_as_its_value() -> None:
    older = "Whenever I code I put on jazz, mostly old Coltrane records."
    newer = "Lo-fi hip hop playlists are my coding soundtrack at this point, nothing with words."
    assert words_reason(older, newer, 0.54) is not None
    # The same word shared, but not as what the newer's value is: no slot in common.
    assert words_reason(older, "Code review takes me hours on Fridays.", 0.54) is None


def test_a_value_in_words_supersedes_through_the_stages_with_its_history() -> None:
    # The encoder reads English: the new line is nearest the editor statement, not the keyboard.
    vim = "My go-to editor is Vim, I've been living in it for about ten years."
    keyboard = "I'm on a split ergonomic keyboard, my wrists are much happier."
    helix = "Helix has completely won me over. It's the only editor I open."
    encoder = ExactEncoder(
        {vim: [1.0, 0.0, 0.0], keyboard: [0.0, 0.0, 1.0], helix: at_cosine(0.57)}
    )
    stages, log = Stages(encoder), Log()
    stages.process(
        [
            log.turn(vim, T0),
            log.turn(keyboard, T0),
            log.turn(helix, T0 + 20 * DAY, session_id="s2"),
        ]
    )
    records = by_content(stages)
    old, new = records[vim], records[helix]
    assert old.status == "superseded" and old.superseded_by == new.id
    assert old.valid_to == new.valid_from
    assert old.history[-1].detail is not None and "words: editor" in old.history[-1].detail
    assert records[keyboard].status == "active"


def test_in_a_language_the_encoder_does_not_read_the_nearest_is_lexical() -> None:
    # Vectors that put the unrelated line nearest (as the English-only encoder does for Chinese).
    hiking, friday = "周末早上都去爬山，一般是北高峰。", "周五晚上一般不安排事。"
    badminton = "周末早上基本泡在羽毛球馆，一打就是一下午。"
    encoder = ExactEncoder({hiking: [1.0, 0.0], friday: at_cosine(0.9), badminton: [0.6, 0.8]})
    stages, log = Stages(encoder), Log()
    stages.process(
        [
            log.turn(hiking, T0),
            log.turn(friday, T0),
            log.turn(badminton, T0 + 20 * DAY, session_id="s2"),
        ]
    )
    records = by_content(stages)
    assert records[hiking].status == "superseded"
    assert records[hiking].superseded_by == records[badminton].id
    assert records[friday].status == "active"


def test_a_chinese_correction_sharing_no_character_pair_still_finds_its_statement() -> None:
    # Only the value is in common (masked in both frames), yet the one close candidate is the
    # nearest: a correction that names the value it takes back supersedes it.
    badge, hours = "我的工号是3021。", "周五晚上一般不安排事。"
    fixed = "我说错了，是3012，3021是旧的"
    encoder = ExactEncoder({badge: [1.0, 0.0, 0.0], hours: [0.0, 0.0, 1.0], fixed: at_cosine(0.6)})
    stages, log = Stages(encoder), Log()
    stages.process(
        [log.turn(badge, T0), log.turn(hours, T0), log.turn(fixed, T0 + 20 * DAY, session_id="s2")]
    )
    records = by_content(stages)
    assert records[badge].status == "superseded"
    assert records[badge].superseded_by == records[fixed].id
    assert records[hours].status == "active"


def test_chat_lines_sharing_two_words_and_naming_no_value_replace_nothing() -> None:
    older = "Thanks! I'll definitely have a blast. I'll let you know how it goes!"
    newer = "That's cool, I'm gonna give it a shot and see how it goes. Thanks for the tip!"
    assert words_reason(older, newer, 0.6) is None


# -- values the spans used to miss; a value right after the join ------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Mia is five and very proud of it.", "number:5"),
        ("twenty-five minutes on the bike", "number:25"),
        ("api timeout = 90s", "number:90"),
        ("lisinopril 10mg in the morning", "number:10"),
        ("the call is at 10am", "number:10:00"),
        ("asking price is 420k", "number:420000"),
        ("I shop on Saturdays", "date:saturday"),
    ],
)
def test_amounts_in_words_or_with_their_unit_and_plural_weekdays_are_values(
    text: str, value: str
) -> None:
    assert value in slot_of(text).values


def test_a_title_is_no_value_and_one_is_no_amount() -> None:
    assert slot_of("My dentist is Dr. Okafor.").values == ["name:okafor"]
    assert slot_of("It's the only one I open.").values == []
    assert slot_of("I have 2FA on everything.").values == ["identifier:2fa"]


def test_a_value_right_after_the_join_of_one_subject_supersedes() -> None:
    assert words_reason("My daughter Mia is 4.", "Mia is five and very proud of it.", 0.7)
    older = "My son Theo is 11, obsessed with dinosaurs."
    assert words_reason(older, "Theo turned 12 on Saturday, we had a party.", 0.7)
    assert words_reason("the cabin wifi password is fern77", "cabin wifi pw: moss-42 now", 0.6)


def test_a_value_after_the_join_of_another_subject_or_attribute_is_no_update() -> None:
    assert words_reason("My daughter Mia is 4.", "My son Leo is 7.", 0.6) is None
    older, newer = "The API timeout is 30 seconds.", "The DB timeout is 10 seconds."
    assert words_reason(older, newer, 0.8) is None
    # The thing named gave way to a date: the appointment, not the dentist.
    older = "My dentist is Dr. Hughes on Mill Lane."
    assert words_reason(older, "My dentist appointment is on the 3rd at 10am.", 0.6) is None


def test_one_unit_counting_two_things_is_no_new_amount() -> None:
    assert words_reason("公司有120个员工。", "公司有3个会议室。", 0.9) is None
    assert words_reason("I run about 20 km a week.", "I swim about 2 km a week.", 0.75) is None
    assert words_reason("跑团微信群有86个人。", "跑团群涨到132个人了。", 0.7)


def test_a_sentence_worded_anew_swaps_no_attribute_but_a_minimal_pair_does() -> None:
    older, newer = "We pay 60 a month for broadband.", "Broadband costs us 75 a month, prices rose."
    assert reason(older, newer, 0.8)
    assert (
        reason("Our frontend is written in TypeScript.", "Our backend is written in Go.", 0.9)
        is None
    )


DENTIST_OLD, DENTIST_NEW = "My dentist is Dr. Hughes.", "My dentist is Dr. Patel now."


def test_a_triplet_value_said_again_beside_a_new_name_does_not_confirm_the_old_one() -> None:
    # Both triplets read the title ("Dr"); the turn still names a dentist the memory does not.
    encoder = ExactEncoder({DENTIST_OLD: [1.0, 0.0], DENTIST_NEW: at_cosine(0.97)})
    stages, log = Stages(encoder), Log()
    stages.process([log.turn(DENTIST_OLD, T0), log.turn(DENTIST_NEW, T0 + 3 * DAY)])

    records = by_content(stages)
    assert set(records) == {DENTIST_OLD, DENTIST_NEW}
    assert records[DENTIST_OLD].status == "superseded"
    assert records[DENTIST_OLD].superseded_by == records[DENTIST_NEW].id


def test_two_numbers_of_two_phones_are_two_slots_however_alike() -> None:
    older, newer = "My old work phone number is 555-0142.", "My personal phone number is 555-0199."
    assert words_reason(older, newer, 0.8) is None
    assert words_reason(older, "My old work phone number is 555-0177.", 0.8, session="s1") is None


def test_amounts_in_two_units_or_values_of_two_heads_are_two_attributes() -> None:
    assert words_reason("我每天走八千步。", "我每天睡七个小时。", 0.77) is None
    older, newer = "孩子的班主任是王老师。", "孩子的英语老师是李老师。"
    assert words_reason(older, newer, 0.77) is None
    assert words_reason("The team is 9 engineers.", "The team is 3 designers now.", 0.7) is None
    assert words_reason("The team is 9 engineers.", "The team is 12 engineers now.", 0.7)


def test_an_amount_told_with_an_event_beside_it_still_moves_on() -> None:
    older = "We give Ava £5 a week pocket money, paid on Saturdays."
    newer = "Ava turned ten so her pocket money went up to £8 a week, she's saving for a scooter."
    assert words_reason(older, newer, 0.62)
    # A rate ("a month") says how often, not what is counted.
    older, newer = "We pay 60 a month for broadband.", "We pay 40 a month for the phone contract."
    assert words_reason(older, newer, 0.73) is None


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("Dark mode is sitting in code review.", "state:in_progress"),
        ("按摩椅还没发货。", "state:in_progress"),
        ("按摩椅到了！", "state:done"),
    ],
)
def test_states_told_in_other_words_are_states(text: str, state: str) -> None:
    assert state in slot_of(text).values


def test_a_value_kept_with_still_and_that_one_replaces_nothing() -> None:
    assert words_reason("平板是iPad Air，主要看文献。", "平板还是那台。", 0.77) is None


def test_a_long_chat_line_counting_something_holds_no_amount_to_move_on() -> None:
    older = (
        "I'm drawn to turtles. They're unique and their slow pace is a nice change from the rush "
        "of life. Check out this moment I snapped! [image: three turtles on rocks in a pond]"
    )
    newer = "Took my turtles out for a walk. [image: two turtles sitting on a log in a pond]"
    assert words_reason(older, newer, 0.67) is None


# -- amounts and changes told in any words, for the nearest memory -----------------------------


def nearest_reason(older: str, newer: str, *, nearest: bool = True) -> str | None:
    """Statements too far apart as wholes and as frames for the slot rule: only what is told
    in words decides."""
    return words_reason(older, newer, 0.3, nearest=nearest)


@pytest.mark.parametrize(
    ("rule", "older", "newer"),
    [
        # an amount replaced by a nearby one, in any words
        ("amount nearby", "我爸今年63，身体还挺硬朗。", "我爸上周过生日，64了，全家去吃了顿海鲜。"),
        ("amount nearby", "儿子身高118，在班里算矮的，有点愁。", "昨天给儿子量了下，126了！"),
        (
            "amount nearby",
            "Luna weighs about 5kg",
            "vet weighed Luna today, 4.2 kilos, the diet is working",
        ),
        # a verb of change with where it went
        (
            "changed over",
            "Our stand-ups run on Zoom.",
            "We moved the stand-ups over to Google Meet.",
        ),
        (
            "changed over",
            "公司VPN每次都要手动输验证码登录",
            "VPN改成扫码登录了，企业微信扫一下就进",
        ),
        ("changed over", "我们组日报都发在钉钉群里", "日报改成每天填飞书表格了"),
        # what holds now
        (
            "holds now",
            "I buy my coffee beans at the farmers market.",
            "coffee beans come from an online roaster these days",
        ),
        ("holds now", "我买菜都是周末去菜市场。", "现在买菜都在App上下单，半小时送到"),
    ],
)
def test_a_value_told_in_any_words_updates_the_nearest_memory_only(
    rule: str, older: str, newer: str
) -> None:
    found = nearest_reason(older, newer)
    assert found is not None and found.startswith(rule)
    # Of several memories about one subject, only the nearest one is the value it speaks to.
    assert nearest_reason(older, newer, nearest=False) is None


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        # another person's amount
        ("I take a size 11 in trainers", "my brother's a 13, impossible to find anything"),
        ("我手腕细，手链要买15cm的", "我妈手腕粗，上次给她买的17cm都嫌紧"),
        # amounts too far apart to be one amount moving: two attributes
        ("My flat has 2 bedrooms and a tiny garden.", "The flat costs 1450 a month now."),
        # someone else's lesson moved
        ("my piano lesson is Wednesdays at 5", "Ella's piano lesson got moved to Thursdays"),
        # nothing shared: the change is of something else
        ("I keep my savings in a Halifax ISA", "we moved the sofa over to the other wall"),
        # only weighed
        ("Our stand-up is on Zoom", "maybe we should switch to Teams for stand-up"),
        # the time, not a contrast with before
        ("我家离地铁站走路10分钟。", "现在下午3点了，等会儿走路去地铁站"),
        # only amounts changed: the amount rules decide
        ("The team is 9 engineers.", "The team is 3 designers now."),
        # both say what holds now
        ("I'm currently reading a lot of sci-fi.", "these days I'm reading more sci-fi than ever"),
        # someone else's
        ("I take the bus to work.", "my sister takes the bus to work these days"),
    ],
)
def test_a_value_of_someone_else_another_attribute_or_only_weighed_replaces_nothing(
    older: str, newer: str
) -> None:
    assert nearest_reason(older, newer) is None


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("My manager is Priya.", "Priya left in October so I report to Tom now"),
        ("Our stand-ups are run by Kev.", "Aisha runs them since Kev went off on leave"),
        ("我一直在华山医院皮肤科看王主任。", "王主任退休了，以后挂号得重新找大夫"),
    ],
)
def test_a_value_said_to_have_gone_is_superseded(older: str, newer: str) -> None:
    assert words_reason(older, newer, 0.3) == f"value left: {slot_of(older).values[-1][5:]}"
    assert words_reason(older, newer, 0.3, nearest=False) is None


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        # a place left, not the role
        ("My manager is Priya.", "Priya left early, the demo ran long"),
        ("My manager is Priya.", "Priya left early today, the demo ran long"),
        # someone else left
        ("My manager is Priya.", "Tom left the team, Priya is hiring"),
    ],
)
def test_a_name_beside_a_leaving_that_is_not_its_own_stays(older: str, newer: str) -> None:
    assert words_reason(older, newer, 0.3) is None


def test_a_verb_of_change_needs_no_shared_word_where_the_encoder_reads_the_statements() -> None:
    older, newer = (
        "My everyday account is with Barclays.",
        "Moved over to Monzo for day-to-day stuff.",
    )
    # close as wholes (the English encoder reads both): the change is of the older statement
    found = words_reason(older, newer, 0.5)
    assert found is not None and found.startswith("changed over")
    # far apart as wholes, and no word shared: the change is of something else
    assert words_reason(older, newer, 0.2) is None
    # a language the encoder does not read needs the shared words
    assert words_reason("我的工资卡是工行的。", "搬到杭州以后改成骑车上班了", 0.9) is None
