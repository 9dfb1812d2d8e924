from datetime import UTC, datetime, timedelta, timezone

import pytest

from pipeline.recall.temporal import NaiveTime, parse_chinese_number, parse_time_window

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
