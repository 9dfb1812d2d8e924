from datetime import UTC, datetime, timedelta, timezone

import pytest

from pipeline.recall.temporal import (
    NaiveTime,
    parse_chinese_number,
    parse_time_window,
    time_references,
)

AT = datetime(2024, 5, 15, 10, 30, tzinfo=UTC)  # Wednesday


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("what did I say yesterday", day(2024, 5, 14), day(2024, 5, 15)),
        ("anything today?", day(2024, 5, 15), day(2024, 5, 16)),
        ("what did I say last week", day(2024, 5, 6), day(2024, 5, 13)),
        ("this week", day(2024, 5, 13), day(2024, 5, 20)),
        ("last month", day(2024, 4, 1), day(2024, 5, 1)),
        ("3 days ago", day(2024, 5, 12), day(2024, 5, 13)),
        ("two weeks ago", day(2024, 4, 29), day(2024, 5, 6)),
        ("in May 2023", day(2023, 5, 1), day(2023, 6, 1)),
        ("May 2023", day(2023, 5, 1), day(2023, 6, 1)),
        ("on 8 May 2023", day(2023, 5, 8), day(2023, 5, 9)),
        ("May 8th, 2023", day(2023, 5, 8), day(2023, 5, 9)),
        ("2023-05-08", day(2023, 5, 8), day(2023, 5, 9)),
        ("what happened in 2023", day(2023, 1, 1), day(2024, 1, 1)),
        ("last year", day(2023, 1, 1), day(2024, 1, 1)),
        ("past 3 days", day(2024, 5, 13), day(2024, 5, 16)),
        ("last friday", day(2024, 5, 10), day(2024, 5, 11)),
        ("in December", day(2023, 12, 1), day(2024, 1, 1)),
        ("上周我说了什么", day(2024, 5, 6), day(2024, 5, 13)),
        ("昨天", day(2024, 5, 14), day(2024, 5, 15)),
        ("今天开会了吗", day(2024, 5, 15), day(2024, 5, 16)),
        ("三天前", day(2024, 5, 12), day(2024, 5, 13)),
        ("十二天前", day(2024, 5, 3), day(2024, 5, 4)),
        ("两个月前", day(2024, 3, 1), day(2024, 4, 1)),
        ("上个月", day(2024, 4, 1), day(2024, 5, 1)),
        ("2023年5月", day(2023, 5, 1), day(2023, 6, 1)),
        ("2023年5月8日", day(2023, 5, 8), day(2023, 5, 9)),
        ("5月8号", day(2024, 5, 8), day(2024, 5, 9)),
        ("上周三", day(2024, 5, 8), day(2024, 5, 9)),
        ("去年", day(2023, 1, 1), day(2024, 1, 1)),
        ("最近七天", day(2024, 5, 9), day(2024, 5, 16)),
    ],
)
def test_windows(query: str, start: datetime, end: datetime) -> None:
    window = parse_time_window(query, AT)
    assert window is not None, query
    assert (window.start, window.end) == (start, end)
    assert window.label


@pytest.mark.parametrize(
    "query", ["what stack do we use", "order SF2023", "upgrade to v2023.1", "we may ship"]
)
def test_no_window(query: str) -> None:
    assert parse_time_window(query, AT) is None


def test_windows_follow_the_timezone_of_at() -> None:
    tokyo = timezone(timedelta(hours=9))
    at = datetime(2024, 5, 15, 1, 0, tzinfo=tokyo)  # still 14 May in UTC
    window = parse_time_window("yesterday", at)
    assert window is not None
    assert window.start == datetime(2024, 5, 14, tzinfo=tokyo)
    assert window.contains(datetime(2024, 5, 14, 12, tzinfo=tokyo))
    assert not window.contains(window.end)


def test_month_arithmetic_crosses_years() -> None:
    window = parse_time_window("last month", datetime(2024, 1, 10, tzinfo=UTC))
    assert window is not None and window.start == day(2023, 12, 1) and window.end == day(2024, 1, 1)


def test_naive_at_is_refused() -> None:
    with pytest.raises(NaiveTime):
        parse_time_window("yesterday", datetime(2024, 5, 15))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("三", 3),
        ("十", 10),
        ("十二", 12),
        ("二十", 20),
        ("二十三", 23),
        ("两", 2),
        ("一百零五", 105),
        ("7", 7),
        ("x", None),
    ],
)
def test_chinese_numbers(text: str, value: int | None) -> None:
    assert parse_chinese_number(text) == value


def test_impossible_date_falls_back_to_its_month() -> None:
    window = parse_time_window("31 February 2023", AT)
    assert window is not None and (window.start, window.end) == (day(2023, 2, 1), day(2023, 3, 1))


# ---------- time phrases ahead, weekends, and every reference in a text ----------


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("tomorrow", day(2024, 5, 16), day(2024, 5, 17)),
        ("the day after tomorrow", day(2024, 5, 17), day(2024, 5, 18)),
        ("next week", day(2024, 5, 20), day(2024, 5, 27)),
        ("next month", day(2024, 6, 1), day(2024, 7, 1)),
        ("next year", day(2025, 1, 1), day(2026, 1, 1)),
        ("next friday", day(2024, 5, 17), day(2024, 5, 18)),
        ("next wednesday", day(2024, 5, 22), day(2024, 5, 23)),
        ("three weeks from now", day(2024, 6, 3), day(2024, 6, 10)),
        ("last weekend", day(2024, 5, 11), day(2024, 5, 13)),
        ("this weekend", day(2024, 5, 18), day(2024, 5, 20)),
        ("two weekends ago", day(2024, 5, 4), day(2024, 5, 6)),
        ("明天", day(2024, 5, 16), day(2024, 5, 17)),
        ("后天", day(2024, 5, 17), day(2024, 5, 18)),
        ("下周", day(2024, 5, 20), day(2024, 5, 27)),
        ("下周五", day(2024, 5, 24), day(2024, 5, 25)),
        ("下个月", day(2024, 6, 1), day(2024, 7, 1)),
        ("明年", day(2025, 1, 1), day(2026, 1, 1)),
        ("三天后", day(2024, 5, 18), day(2024, 5, 19)),
        ("上周末", day(2024, 5, 11), day(2024, 5, 13)),
        ("这周末", day(2024, 5, 18), day(2024, 5, 20)),
    ],
)
def test_windows_ahead_and_weekends(query: str, start: datetime, end: datetime) -> None:
    window = parse_time_window(query, AT)
    assert window is not None, query
    assert (window.start, window.end) == (start, end)


@pytest.mark.parametrize(
    "text",
    [
        "I like hiking on weekends",
        "我喜欢周末去爬山",  # habitual, not one weekend
        "然后天气就好了",  # 后天 inside 然后天气
        "I read the whole book in two days",  # a duration, not a date ahead
        "next time we should try it",
    ],
)
def test_no_reference(text: str) -> None:
    assert time_references(text, AT) == []


def test_every_reference_left_to_right_without_overlaps() -> None:
    text = "Last Friday I booked it, and next week I fly; I went there on 8 May 2023 too."
    refs = time_references(text, AT)
    assert [text[r.start : r.end] for r in refs] == ["Last Friday", "next week", "on 8 May 2023"]
    assert [(r.window.start, r.window.end) for r in refs] == [
        (day(2024, 5, 10), day(2024, 5, 11)),
        (day(2024, 5, 20), day(2024, 5, 27)),
        (day(2023, 5, 8), day(2023, 5, 9)),
    ]
    assert [r.explicit for r in refs] == [False, False, True]


def test_references_in_chinese_relative_to_the_turn() -> None:
    refs = time_references("我上周五去了北京，三天前回来的，下个月还要去", AT)
    assert [(r.window.start, r.window.end) for r in refs] == [
        (day(2024, 5, 10), day(2024, 5, 11)),
        (day(2024, 5, 12), day(2024, 5, 13)),
        (day(2024, 6, 1), day(2024, 7, 1)),
    ]


def test_references_need_an_aware_moment() -> None:
    with pytest.raises(NaiveTime):
        time_references("yesterday", datetime(2024, 5, 15))


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("the Sunday before October 25, 2022", day(2022, 10, 23), day(2022, 10, 24)),
        ("the week before 9 June 2023", day(2023, 5, 29), day(2023, 6, 5)),
        ("two weeks before August 11, 2023", day(2023, 7, 24), day(2023, 7, 31)),
        ("last weekend before April 10, 2023", day(2023, 4, 8), day(2023, 4, 10)),
        ("the day before 8 May 2023", day(2023, 5, 7), day(2023, 5, 8)),
        ("the month before 2023-05-08", day(2023, 4, 1), day(2023, 5, 1)),
    ],
)
def test_units_before_a_spelled_out_date_count_back_from_it(
    query: str, start: datetime, end: datetime
) -> None:
    window = parse_time_window(query, AT)
    assert window is not None
    assert (window.start, window.end) == (start, end)
    assert window.label == query


def test_an_earlier_date_is_never_the_unit_of_a_later_one() -> None:
    refs = time_references("on 8 May 2023 and the day before 9 May 2023", AT)
    assert [(r.window.start, r.explicit) for r in refs] == [
        (day(2023, 5, 8), True),
        (day(2023, 5, 8), False),
    ]


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("between August 11 and August 15 2023", day(2023, 8, 11), day(2023, 8, 16)),
        ("from 3 May to 9 May", day(2024, 5, 3), day(2024, 5, 10)),
        ("between 28 December and 2 January", day(2023, 12, 28), day(2024, 1, 3)),
        ("in the second week of November 2023", day(2023, 11, 8), day(2023, 11, 15)),
        ("the last week of February 2024", day(2024, 2, 23), day(2024, 3, 1)),
        ("early August, 2023", day(2023, 8, 1), day(2023, 8, 11)),
        ("mid-April", day(2024, 4, 11), day(2024, 4, 21)),
        ("late May", day(2024, 5, 21), day(2024, 6, 1)),
        ("8月11日到15日", day(2023, 8, 11), day(2023, 8, 16)),
        ("2023年8月11日至8月15日", day(2023, 8, 11), day(2023, 8, 16)),
        ("4月的第二个星期", day(2024, 4, 8), day(2024, 4, 15)),
        ("3月初", day(2024, 3, 1), day(2024, 3, 11)),
        ("2月底", day(2024, 2, 21), day(2024, 3, 1)),
    ],
)
def test_calendar_spans(query: str, start: datetime, end: datetime) -> None:
    window = parse_time_window(query, AT)
    assert window is not None, query
    assert (window.start, window.end) == (start, end)


def test_late_may_in_lower_case_is_a_verb() -> None:
    assert parse_time_window("sorry I was late may I come in", AT) is None


def _day_of(day: int, month: int = 5) -> tuple[datetime, datetime]:
    start = datetime(2024, month, day, tzinfo=UTC)
    return start, start + timedelta(days=1)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        # Phrasings the rule table does not list, read by dateparser (AT is Wednesday 15 May).
        ("what did I eat Tuesday night", *_day_of(14)),
        ("what did we do Monday morning", *_day_of(13)),
        ("what did I do sat night", *_day_of(11)),
        ("what did i do last tues", *_day_of(14)),
        ("what did I buy May 9th", *_day_of(9)),
        ("where was I on the 3rd of May", *_day_of(3)),
        ("星期二吃了什么", *_day_of(14)),
        ("礼拜天做了什么", *_day_of(12)),
        # A week reading becomes its Monday-Sunday week.
        (
            "what did i do a fortnight ago",
            datetime(2024, 4, 29, tzinfo=UTC),
            datetime(2024, 5, 6, tzinfo=UTC),
        ),
    ],
)
def test_phrases_outside_the_table_are_read_by_the_library(
    query: str, start: datetime, end: datetime
) -> None:
    window = parse_time_window(query, AT)
    assert window is not None
    assert (window.start, window.end) == (start, end)


@pytest.mark.parametrize(
    "query",
    [
        "What do we use for CI these days?",  # "we": no Wednesday
        "How long have I sat at this desk?",  # "sat": the verb
        "What did Mel say about March for Science?",  # a month reading: the table's, not a day
        "may I ask what my dentist said",
        "Where do I live now?",  # the query moment itself names no window
        "我现在在哪家公司上班？",
        "Which new restaurant did I try?",
    ],
)
def test_the_library_reads_no_window_into_words(query: str) -> None:
    assert parse_time_window(query, AT) is None


def _days(first: int, last: int) -> tuple[datetime, datetime]:
    """Days ``first`` to ``last`` of May 2024, both included."""
    return datetime(2024, 5, first, tzinfo=UTC), datetime(2024, 5, last + 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        # "Before last" is two units back, whatever the unit (AT is Wednesday 15 May).
        ("what did we cook the night before last", *_days(13, 13)),
        ("what did I do the weekend before last", *_days(4, 5)),
        # Loose phrases: the week before today; the weekend just gone.
        ("who did I run into the other day", *_days(8, 14)),
        ("what did I read a few days ago", *_days(8, 14)),
        ("前两天我去哪儿吃饭了？", *_days(8, 14)),
        ("what did I do over the weekend", *_days(11, 12)),
        ("周末去哪儿玩了？", *_days(11, 12)),
        ("上个周末去哪儿玩了？", *_days(11, 12)),
        # A day of the month alone, and dates in Chinese numerals.
        ("what did I buy on the 9th?", *_days(9, 9)),
        ("where was I on the 3rd of May", *_days(3, 3)),
        ("我五月三号去了哪里？", *_days(3, 3)),
        ("昨儿个晚上吃的啥", *_days(14, 14)),
        # Phrasings the time-phrase probe's writer used (bench/time_phrases): the forms people
        # type, an English phrase written against Chinese, parts of a month, spans, a bare day.
        ("what was i stressed about yday", day(2024, 5, 14), day(2024, 5, 15)),
        ("yesterday我去的那家咖啡店叫什么", day(2024, 5, 14), day(2024, 5, 15)),
        ("last Friday我在哪吃的饭", day(2024, 5, 10), day(2024, 5, 11)),
        ("on Thurs, what time was my appointment", day(2024, 5, 9), day(2024, 5, 10)),
        ("last sat what did we watch", day(2024, 5, 11), day(2024, 5, 12)),
        ("over the wknd did i mention a cafe?", day(2024, 5, 11), day(2024, 5, 13)),
        ("at the start of the month I set a budget", day(2024, 5, 1), day(2024, 5, 11)),
        ("what did I do at the end of last month", day(2024, 4, 21), day(2024, 5, 1)),
        ("mid last month", day(2024, 4, 11), day(2024, 4, 21)),
        ("at the end of March", day(2024, 3, 21), day(2024, 4, 1)),
        ("from the 3rd to the 7th what did i eat", day(2024, 5, 3), day(2024, 5, 8)),
        ("summarise Apr 10 through Apr 14", day(2024, 4, 10), day(2024, 4, 15)),
        ("from monday through wednesday this week", day(2024, 5, 13), day(2024, 5, 16)),
        ("monday to tuesday last week", day(2024, 5, 6), day(2024, 5, 8)),
        ("上个礼拜的周末我在干嘛", day(2024, 5, 11), day(2024, 5, 13)),
        ("去年12月我去哪旅游了", day(2023, 12, 1), day(2024, 1, 1)),
        ("3月份我读了哪些书", day(2024, 3, 1), day(2024, 4, 1)),
        ("十二月我在忙什么", day(2023, 12, 1), day(2024, 1, 1)),
        ("一月底我说要买什么", day(2024, 1, 21), day(2024, 2, 1)),
        ("五月下旬我去医院了吗", day(2024, 5, 21), day(2024, 6, 1)),  # as "late May" reads
        ("月初买的那笔理财是啥", day(2024, 5, 1), day(2024, 5, 11)),
        ("上个月底交了什么", day(2024, 4, 21), day(2024, 5, 1)),
        ("1号我交房租了吗", day(2024, 5, 1), day(2024, 5, 2)),
        ("二十号去哪了", day(2024, 4, 20), day(2024, 4, 21)),
        ("3号到7号我吃了什么", day(2024, 5, 3), day(2024, 5, 8)),
        # A year in Chinese numerals, digit by digit, names the year (not the latest 八月).
        ("我的护照二零二六年八月到期", day(2026, 8, 1), day(2026, 9, 1)),
        ("二〇二三年五月初我们去了哪", day(2023, 5, 1), day(2023, 5, 11)),
        ("二零二三年我去了哪些地方", day(2023, 1, 1), day(2024, 1, 1)),
        ("明年三月初要做什么", day(2025, 3, 1), day(2025, 3, 11)),
        # A question about a month still ahead this year asks about the last one.
        ("what did I do in October", day(2023, 10, 1), day(2023, 11, 1)),
        ("十一月我在忙什么", day(2023, 11, 1), day(2023, 12, 1)),
    ],
)
def test_more_of_the_calendar(query: str, start: datetime, end: datetime) -> None:
    window = parse_time_window(query, AT)
    assert window is not None, query
    assert (window.start, window.end) == (start, end)


def test_the_week_before_last_crosses_a_month() -> None:
    window = parse_time_window("the week before last", AT)
    assert window is not None
    assert (window.start, window.end) == (
        datetime(2024, 4, 29, tzinfo=UTC),
        datetime(2024, 5, 6, tzinfo=UTC),
    )


def test_loose_phrases_bound_a_question_but_date_no_turn() -> None:
    assert time_references("I saw her the other day, over the weekend, on the 9th.", AT) == []
    assert time_references("我喜欢周末去爬山", AT) == []
    assert parse_time_window("who lives on the 3rd floor", AT) is None


@pytest.mark.parametrize(
    "query",
    [
        "Do I have a morning routine?",
        "我坐几号线去公司？",
        "我住在5号楼几层？",
        "我一个月去几次健身房？",
        "我每月底还信用卡吗？",
    ],
)
def test_words_that_name_no_such_window(query: str) -> None:
    window = parse_time_window(query, AT)
    assert window is None, (query, window)


def test_two_weekdays_joined_by_and_are_two_days_not_a_span() -> None:
    window = parse_time_window("did I go out on monday and wednesday", AT)
    assert window is not None and window.end - window.start == timedelta(days=1)
