"""Time phrases ("last week", "in May 2023", "next month", "上周", "三天前") as windows relative
to a moment: the window a query names (``parse_time_window``, relative to the query's ``at``) and
every date a turn refers to (``time_references``, relative to the turn's event time).

A rule table first: dateparser resolves one *date* ("last week" → a single instant) rather than
a *window*, and misreads some phrases ("on the 3rd" as March, "5月3日" as December), while a few
dozen regexes are deterministic, cover English and Chinese, and say exactly which window they
mean. A query the table finds nothing in is then read by dateparser (``_library_window``), which
knows the many phrasings no table lists ("Tuesday night", "a fortnight ago", "on Sat", "last
tues", "周二"); its date becomes the calendar day or week it names. Turns are not read by it: at
tens of milliseconds a text it would cost ingest its throughput.

Windows are half-open ``[start, end)`` in the timezone of ``at``. Calendar words mean calendar
units: "last week" is the previous Monday–Sunday week, "last month" the previous calendar month.
Rolling phrases ("past 3 days", "最近三天") end at the end of ``at``'s day. A weekend is Saturday
and Sunday of a Monday-started week. Future phrases ("tomorrow", "next week", "in two weeks",
"下个月", "三天后") count forward the same way. "Next Friday" is the first Friday after ``at``,
mirroring "last Friday" (the last one before it).

One rule table serves queries and turns, so "last Saturday" in a question and in a turn mean the
same day relative to their own moment.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, time, timedelta

from schemas.errors import HindsightError


class NaiveTime(HindsightError):
    pass


@dataclass(frozen=True)
class TimeWindow:
    start: datetime
    end: datetime
    label: str = ""

    def contains(self, moment: datetime) -> bool:
        return self.start <= moment < self.end


# ---------- calendar helpers (all in at's timezone) ----------


def _day_start(moment: datetime) -> datetime:
    return datetime.combine(moment.date(), time(0), tzinfo=moment.tzinfo)


def _day(at: datetime, offset_days: int, label: str) -> TimeWindow:
    start = _day_start(at) + timedelta(days=offset_days)
    return TimeWindow(start, start + timedelta(days=1), label)


def _week(at: datetime, offset_weeks: int, label: str) -> TimeWindow:
    monday = _day_start(at) - timedelta(days=at.weekday()) + timedelta(weeks=offset_weeks)
    return TimeWindow(monday, monday + timedelta(weeks=1), label)


def _month_start(year: int, month: int, tz: object) -> datetime:
    # Normalise month overflow/underflow (month 0 → December of the previous year).
    year += (month - 1) // 12
    month = (month - 1) % 12 + 1
    return datetime(year, month, 1, tzinfo=tz)  # type: ignore[arg-type]


def _month(year: int, month: int, at: datetime, label: str) -> TimeWindow:
    return TimeWindow(
        _month_start(year, month, at.tzinfo), _month_start(year, month + 1, at.tzinfo), label
    )


def _year(year: int, at: datetime, label: str) -> TimeWindow:
    return TimeWindow(
        datetime(year, 1, 1, tzinfo=at.tzinfo), datetime(year + 1, 1, 1, tzinfo=at.tzinfo), label
    )


def _date(year: int, month: int, day: int, at: datetime, label: str) -> TimeWindow | None:
    try:
        start = datetime(year, month, day, tzinfo=at.tzinfo)
    except ValueError:
        return None  # "31 February": not a date, so not a window
    return TimeWindow(start, start + timedelta(days=1), label)


def _rolling(at: datetime, days: int, label: str) -> TimeWindow:
    end = _day_start(at) + timedelta(days=1)
    return TimeWindow(end - timedelta(days=days), end, label)


# ---------- numbers ----------

_EN_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "couple of": 2,
    "a couple of": 2,
}
_ZH_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}


def parse_chinese_number(text: str) -> int | None:
    """Arabic digits or Chinese numerals below 1000 ("三", "十二", "二十三", "一百零五")."""
    if text.isdigit():
        return int(text)
    total, current = 0, 0
    for char in text:
        if char in _ZH_DIGITS:
            current = _ZH_DIGITS[char]
        elif char == "十":
            total += (current or 1) * 10
            current = 0
        elif char == "百":
            total += (current or 1) * 100
            current = 0
        else:
            return None
    return total + current if text else None


def _en_number(text: str) -> int | None:
    text = text.lower().strip()
    return int(text) if text.isdigit() else _EN_NUMBERS.get(text)


_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True))
_WEEKDAYS_EN = {
    "monday": 0,
    "tuesday": 1,
    "wednesday": 2,
    "thursday": 3,
    "friday": 4,
    "saturday": 5,
    "sunday": 6,
}
# Short forms people type. "last sat" is plain; after "on" only the forms that are no other word
# count ("on Thurs", not "on sun cream" or "on Wed…" as a name).
_WEEKDAY_SHORT = {
    "mon": 0,
    "tue": 1,
    "tues": 1,
    "wed": 2,
    "weds": 2,
    "thu": 3,
    "thur": 3,
    "thurs": 3,
    "fri": 4,
    "sat": 5,
    "sun": 6,
}
_WEEKDAY_SHORT_AFTER_ON = r"tues?|weds|thu|thurs?|fri"


def _weekday_en(word: str) -> int:
    word = word.lower().rstrip(".")
    return _WEEKDAYS_EN[word] if word in _WEEKDAYS_EN else _WEEKDAY_SHORT[word]


_WEEKDAYS_ZH = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_ZH_NUM = r"[0-9零〇一二两三四五六七八九十百]+"


def _shift_unit(at: datetime, amount: int, unit: str, label: str) -> TimeWindow:
    """The calendar unit that contains ``at`` moved back ``amount`` units."""
    if unit.startswith(("day", "天", "日")):
        return _day(at, -amount, label)
    if unit.startswith(("week", "周", "星期", "礼拜", "个星期", "个礼拜")):
        return _week(at, -amount, label)
    if unit.startswith(("month", "月", "个月")):
        return _month(at.year, at.month - amount, at, label)
    return _year(at.year - amount, at, label)


def _rolling_unit(at: datetime, amount: int, unit: str, label: str) -> TimeWindow:
    per = {"d": 1, "w": 7, "m": 30, "y": 365}
    key = "d"
    if unit.startswith(("week", "周", "星期", "个星期", "礼拜")):
        key = "w"
    elif unit.startswith(("month", "个月", "月")):
        key = "m"
    elif unit.startswith(("year", "年")):
        key = "y"
    return _rolling(at, amount * per[key], label)


def _latest_month(at: datetime, month: int) -> int:
    """Year of the latest ``month`` not after ``at`` ("in May" asked in March → last year's May)."""
    return at.year if month <= at.month else at.year - 1


def _latest_date_year(at: datetime, month: int, day: int) -> int:
    return at.year if (month, day) <= (at.month, at.day) else at.year - 1


def _weekday_back(at: datetime, weekday: int, strictly_before: bool, label: str) -> TimeWindow:
    back = (at.weekday() - weekday) % 7
    if back == 0 and strictly_before:
        back = 7
    return _day(at, -back, label)


def _weekday_forward(at: datetime, weekday: int, label: str) -> TimeWindow:
    ahead = (weekday - at.weekday()) % 7 or 7
    return _day(at, ahead, label)


def _weekend(at: datetime, offset_weeks: int, label: str) -> TimeWindow:
    """Saturday and Sunday of the week ``offset_weeks`` from ``at``'s week."""
    saturday = _week(at, offset_weeks, "").start + timedelta(days=5)
    return TimeWindow(saturday, saturday + timedelta(days=2), label)


def _span(start: datetime, last_day: datetime, label: str) -> TimeWindow | None:
    """Whole days from ``start`` to ``last_day`` inclusive (None when they are out of order)."""
    if last_day < start:
        return None
    return TimeWindow(start, last_day + timedelta(days=1), label)


def _calendar_date(year: int, month: int, day: int, at: datetime) -> datetime | None:
    try:
        return datetime(year, month, day, tzinfo=at.tzinfo)
    except ValueError:
        return None


_DAY_OF_MONTH = re.compile(r"(\d{1,2})")
_MONTH_WORD = re.compile(rf"\b(?:{_MONTH_RE})\b", re.IGNORECASE | re.ASCII)


def _month_day(text: str) -> tuple[int, int] | None:
    """August 11 / 11th of August -> (8, 11)."""
    month = _MONTH_WORD.search(text)
    day = _DAY_OF_MONTH.search(text)
    return (_MONTHS[month[0].lower()], int(day[1])) if month and day else None


def _range(m: re.Match[str], at: datetime) -> TimeWindow | None:
    """Between August 11 and August 15 2023, from 3 May to 9 May: both days included."""
    first = _month_day(m[1])
    if first is None:
        return None
    bare_day = _DAY_OF_MONTH.search(m[3])
    second = _month_day(m[3]) or ((first[0], int(bare_day[1])) if bare_day else None)
    if second is None:
        return None
    year = int(m[4] or m[2]) if (m[4] or m[2]) else _latest_date_year(at, *first)
    start = _calendar_date(year, first[0], first[1], at)
    end_year = year + 1 if second[0] < first[0] else year
    last = _calendar_date(end_year, second[0], second[1], at)
    return _span(start, last, _label(m)) if start and last else None


_ORDINAL_WEEK = {
    "first": 0,
    "second": 1,
    "third": 2,
    "fourth": 3,
    "1st": 0,
    "2nd": 1,
    "3rd": 2,
    "4th": 3,
}
_ZH_ORDINAL = {"一": 0, "二": 1, "三": 2, "四": 3, "1": 0, "2": 1, "3": 2, "4": 3}


def _year_of(explicit: str | None, at: datetime, month: int) -> int:
    return int(explicit) if explicit else _latest_month(at, month)


def _week_of_month(year: int, month: int, which: str, at: datetime, label: str) -> TimeWindow:
    """The n-th seven days of a month (days 1-7, 8-14, ...); "last" is its final seven days."""
    month_window = _month(year, month, at, label)
    if which == "last":
        return TimeWindow(month_window.end - timedelta(days=7), month_window.end, label)
    start = month_window.start + timedelta(
        days=7 * _ORDINAL_WEEK.get(which, _ZH_ORDINAL.get(which, 0))
    )
    return TimeWindow(start, start + timedelta(days=7), label)


def _part_of_month(year: int, month: int, part: str, at: datetime, label: str) -> TimeWindow:
    """``part`` early: days 1-10, mid: 11-20, late: 21 to the end (月初 / 月中 / 月底; the rules
    name the part in their own words, ``_PART_OF_MONTH`` says which)."""
    month_window = _month(year, month, at, label)
    start = month_window.start
    if part == "early":
        return TimeWindow(start, start + timedelta(days=10), label)
    if part == "mid":
        return TimeWindow(start + timedelta(days=10), start + timedelta(days=20), label)
    return TimeWindow(start + timedelta(days=20), month_window.end, label)


# ---------- rules ----------

Matcher = Callable[[re.Match[str], datetime], TimeWindow | None]


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    build: Matcher
    # The phrase spells the date out ("8 May 2023", "2023年5月"): nothing to resolve in a turn.
    explicit: bool = False
    # A loose phrase ("the other day", "over the weekend", 前几天): it bounds what a question
    # asks about, but is too vague (or, in a turn, too often ahead: "over the weekend I'll...")
    # to note as the date a turn refers to.
    query_only: bool = False
    # A month named without its year ("in October", 十月, 十一月初) is read as the latest one. When
    # that is last year's (the month is still ahead this year), a turn may as well mean the next
    # one ("my lease ends in October", 孩子预计十一月出生): no note then. The groups that, when
    # matched, give the year (2023年, 去年); None: not such a rule.
    year_groups: tuple[int | str, ...] | None = None


def _rule(
    pattern: str,
    build: Matcher,
    *,
    explicit: bool = False,
    query_only: bool = False,
    year_groups: tuple[int | str, ...] | None = None,
) -> _Rule:
    # ASCII classes: ``\b`` and ``\w`` see a Chinese character as a non-word, so an English
    # phrase written straight against Chinese ("yesterday我去的那家店") still has its edges.
    return _Rule(
        re.compile(pattern, re.IGNORECASE | re.ASCII), build, explicit, query_only, year_groups
    )


def _ahead_this_year(rule: _Rule, match: re.Match[str], window: TimeWindow, at: datetime) -> bool:
    """A month named without its year that is still ahead this year (``_Rule.year_groups``)."""
    if rule.year_groups is None or any(match[group] for group in rule.year_groups):
        return False
    return window.start.year < at.year


def _days_before(at: datetime, days: int, label: str) -> TimeWindow:
    """The ``days`` whole days before ``at``'s own day ("the other day": not today)."""
    end = _day_start(at)
    return TimeWindow(end - timedelta(days=days), end, label)


def _latest_weekend(at: datetime, label: str) -> TimeWindow:
    """The weekend ``at`` is in, else the one just gone ("what did I do over the weekend")."""
    return _weekend(at, 0 if at.weekday() >= 5 else -1, label)


def _before_last(at: datetime, unit: str, label: str) -> TimeWindow:
    """Two units back: "the week before last", "the night before last"."""
    unit = unit.lower()
    if unit == "weekend":
        return _weekend(at, -2, label)
    return _shift_unit(at, 2, "day" if unit == "night" else unit, label)


# "The other day", 前几天: somewhere in the last week, not today.
_RECENT_DAYS = 7


_EN_COUNT = r"(\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a couple of)"
_EN_WEEKDAY = r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_EN_WEEKEND = r"(?:weekend|wknd|wkend)"
_ZH_WEEK = r"(?:周|星期|个星期|礼拜|个礼拜)"
_EN_MONTH_DAY = (
    rf"(?:(?:{_MONTH_RE})\.? \d{{1,2}}(?:st|nd|rd|th)?"
    rf"|\d{{1,2}}(?:st|nd|rd|th)? (?:of )?(?:{_MONTH_RE}))"
)


def _zh_range(m: re.Match[str], at: datetime) -> TimeWindow | None:
    """8月11日到15日, 2023年8月11日至8月15日: both days included."""
    first_month, first_day = int(m[2]), int(m[3])
    second_month = int(m[4]) if m[4] else first_month
    year = int(m[1]) if m[1] else _latest_date_year(at, first_month, first_day)
    end_year = year + 1 if second_month < first_month else year
    start = _calendar_date(year, first_month, first_day, at)
    last = _calendar_date(end_year, second_month, int(m[5]), at)
    return _span(start, last, _label(m)) if start and last else None


def _day_of_latest_month(at: datetime, day: int, label: str) -> TimeWindow | None:
    if not 1 <= day <= 31:
        return None
    year, month = at.year, at.month
    for _ in range(3):  # a 31st may need to go back past shorter months
        if (day <= at.day or (year, month) != (at.year, at.month)) and (
            window := _date(year, month, day, at, label)
        ):
            return window
        year, month = (year - 1, 12) if month == 1 else (year, month - 1)
    return None


def _zh_month_day(m: re.Match[str], at: datetime) -> TimeWindow | None:
    """五月三号, 十二月二十五日: a date in Chinese numerals, the latest one not after ``at``."""
    month, day = parse_chinese_number(m[1]), parse_chinese_number(m[2])
    if month is None or day is None:
        return None
    return _date(_latest_date_year(at, month, day), month, day, at, _label(m))


_PART_OF_MONTH = {
    "start": "early",
    "beginning": "early",
    "middle": "mid",
    "end": "late",
    "early": "early",
    "mid": "mid",
    "late": "late",
    "初": "early",
    "上旬": "early",
    "中": "mid",
    "中旬": "mid",
    "底": "late",
    "末": "late",
    "下旬": "late",
}
_MONTH_OFFSET = {"this": 0, "the": 0, "last": -1, "next": 1}
_ZH_MONTH_OFFSET = {
    "这个": 0,
    "本": 0,
    "上": -1,
    "上个": -1,
    "上上": -2,
    "上上个": -2,
    "下": 1,
    "下个": 1,
}
_ZH_YEAR_OFFSET = {"今年": 0, "去年": -1, "前年": -2, "明年": 1, "后年": 2}
# A year before 年: in digits (2023年) or digit by digit in Chinese numerals (二零二六年,
# 一九九八年), which a bare-month rule would otherwise read as the latest 八月.
_ZH_YEAR = r"((?:19|20)\d\d|(?:一九|二[〇零])[〇零一二三四五六七八九]{2})"


def _zh_year_number(text: str) -> int:
    """2023 from "2023" or from "二零二三" / "二〇二三"."""
    return int("".join(str(_ZH_DIGITS.get(char, char)) for char in text))


_ZH_MONTH_NUMBER = r"(\d{1,2}|十[一二]?|[一二三四五六七八九])"


def _part_of_relative_month(at: datetime, offset: int, part: str, label: str) -> TimeWindow:
    """Early / mid / late part of the month ``offset`` months from ``at``'s ("月初", "end of last
    month")."""
    year, month = at.year, at.month + offset
    return _part_of_month(year, month, _PART_OF_MONTH[part], at, label)


# "At the start of", "the end of": the part of a month told in words.
_PART_IN_WORDS = r"(?:at |in |during |towards? )?(?:the )?(?P<word>start|beginning|middle|end)"


def _part_of_named_month(m: re.Match[str], at: datetime) -> TimeWindow:
    """Mid-March, late May 2023, the end of March: a part of a month named in English."""
    month = _MONTHS[m["month"].lower()]
    part = _PART_OF_MONTH[(m["part"] or m["word"]).lower()]
    return _part_of_month(_year_of(m["year"], at, month), month, part, at, _label(m))


def _zh_month_year(m_year: str | None, m_word: str | None, month: int, at: datetime) -> int:
    """The year of a Chinese month: spelled out (2023年), a year word (去年), else the latest."""
    if m_year:
        return _zh_year_number(m_year)
    if m_word:
        return at.year + _ZH_YEAR_OFFSET[m_word]
    return _latest_month(at, month)


def _zh_month(m: re.Match[str], at: datetime) -> TimeWindow | None:
    """3月份, 十二月, 去年12月: the whole month (the latest one not after ``at`` unless a year is
    named)."""
    month = parse_chinese_number(m[3])
    if month is None or not 1 <= month <= 12:
        return None
    return _month(_zh_month_year(m[1], m[2], month, at), month, at, _label(m))


def _zh_month_part(m: re.Match[str], at: datetime) -> TimeWindow | None:
    """一月底, 五月下旬, 2023年8月初: the early / mid / late part of a named month."""
    month = parse_chinese_number(m[3])
    if month is None or not 1 <= month <= 12:
        return None
    year = _zh_month_year(m[1], m[2], month, at)
    return _part_of_month(year, month, _PART_OF_MONTH[m[4]], at, _label(m))


def _days_of_latest_month(at: datetime, first: int, last: int, label: str) -> TimeWindow | None:
    """From the 3rd to the 7th, 3号到7号: both days, in the latest month the first has passed in."""
    start = _day_of_latest_month(at, first, label)
    if start is None or last < first:
        return None
    end = _calendar_date(start.start.year, start.start.month, last, at)
    return _span(start.start, end, label) if end else None


def _weekday_span(m: re.Match[str], at: datetime) -> TimeWindow | None:
    """ "From Monday through Wednesday (this week / last week)": both days; without a week, the
    latest such span that has begun."""
    first, last = _weekday_en(m[1]), _weekday_en(m[2])
    week = (m[3] or "").lower()
    if week:
        monday = _week(at, -1 if week.startswith(("last", "previous")) else 0, "").start
        start = monday + timedelta(days=first)
    else:
        start = _weekday_back(at, first, False, "").start
    return _span(start, start + timedelta(days=(last - first) % 7), _label(m))


def _label(match: re.Match[str]) -> str:
    return match.group(0).strip()


_RULES: tuple[_Rule, ...] = (
    # ----- English: explicit dates first (most specific) -----
    _rule(
        r"\b((?:19|20)\d\d)-(\d{1,2})-(\d{1,2})\b",
        lambda m, at: _date(int(m[1]), int(m[2]), int(m[3]), at, _label(m)),
        explicit=True,
    ),
    _rule(
        r"\b((?:19|20)\d\d)/(\d{1,2})/(\d{1,2})\b",
        lambda m, at: _date(int(m[1]), int(m[2]), int(m[3]), at, _label(m)),
        explicit=True,
    ),
    _rule(
        rf"\b(?:on )?(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?({_MONTH_RE})\.?,? ((?:19|20)\d\d)\b",
        lambda m, at: _date(int(m[3]), _MONTHS[m[2].lower()], int(m[1]), at, _label(m)),
        explicit=True,
    ),
    _rule(
        rf"\b(?:on )?({_MONTH_RE})\.? (\d{{1,2}})(?:st|nd|rd|th)?,? ((?:19|20)\d\d)\b",
        lambda m, at: _date(int(m[3]), _MONTHS[m[1].lower()], int(m[2]), at, _label(m)),
        explicit=True,
    ),
    _rule(
        rf"\b(?:in |during )?({_MONTH_RE}),? ((?:19|20)\d\d)\b",
        lambda m, at: _month(int(m[2]), _MONTHS[m[1].lower()], at, _label(m)),
        explicit=True,
    ),
    _rule(
        rf"\bon (?:the )?(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?({_MONTH_RE})\b",
        lambda m, at: _date(
            _latest_date_year(at, _MONTHS[m[2].lower()], int(m[1])),
            _MONTHS[m[2].lower()],
            int(m[1]),
            at,
            _label(m),
        ),
    ),
    _rule(
        rf"\bon ({_MONTH_RE}) (\d{{1,2}})(?:st|nd|rd|th)?\b",
        lambda m, at: _date(
            _latest_date_year(at, _MONTHS[m[1].lower()], int(m[2])),
            _MONTHS[m[1].lower()],
            int(m[2]),
            at,
            _label(m),
        ),
    ),
    # "What did I do on the 3rd?": that day of the latest month it has passed in. Only when no
    # word follows ("on the 3rd floor" is a place).
    _rule(
        r"\bon the (\d{1,2})(?:st|nd|rd|th)\b(?!\s*\w)",
        lambda m, at: _day_of_latest_month(at, int(m[1]), _label(m)),
        query_only=True,
    ),
    # Calendar spans: a range of days, the n-th week of a month, the early/mid/late part of one.
    _rule(
        r"\b(?:from|between) the (\d{1,2})(?:st|nd|rd|th)?\s+(?:and|to|until|till|through|thru|-)"
        r"\s+(?:the )?(\d{1,2})(?:st|nd|rd|th)\b",
        lambda m, at: _days_of_latest_month(at, int(m[1]), int(m[2]), _label(m)),
    ),
    _rule(
        rf"\b(?:from |between )?{_EN_WEEKDAY}\s+(?:to|until|till|through|thru|-)\s+{_EN_WEEKDAY}"
        r"(?:\s+(?:of\s+)?(this week|last week|previous week))?\b",
        _weekday_span,
    ),
    # "Aug 10 through Aug 14" needs no "from": the connective says it is a span ("and" would
    # not: "on May 3 and May 5" are two days).
    _rule(
        rf"\b({_EN_MONTH_DAY})(?:,? ((?:19|20)\d\d))?\s+(?:to|until|till|through|thru|-|–)\s+"
        rf"({_EN_MONTH_DAY}|\d{{1,2}}(?:st|nd|rd|th)?)(?:,? ((?:19|20)\d\d))?\b",
        _range,
    ),
    _rule(
        rf"\b(?:{_PART_IN_WORDS} of (?P<which>this|last|the|next)"
        r"|(?P<part>early|mid|late)[- ](?P<which_after_part>this|last|next)) month\b",
        lambda m, at: _part_of_relative_month(
            at,
            _MONTH_OFFSET[(m["which"] or m["which_after_part"]).lower()],
            (m["word"] or m["part"]).lower(),
            _label(m),
        ),
    ),
    _rule(
        rf"\b(?:between|from) ({_EN_MONTH_DAY})(?:,? ((?:19|20)\d\d))?\s+"
        rf"(?:and|to|until|till|through)\s+({_EN_MONTH_DAY}|\d{{1,2}}(?:st|nd|rd|th)?)"
        r"(?:,? ((?:19|20)\d\d))?\b",
        _range,
    ),
    _rule(
        rf"\b(?:the |in the |during the )?(first|second|third|fourth|1st|2nd|3rd|4th|last) week "
        rf"of ({_MONTH_RE})(?:,? ((?:19|20)\d\d))?\b",
        lambda m, at: _week_of_month(
            _year_of(m[3], at, _MONTHS[m[2].lower()]),
            _MONTHS[m[2].lower()],
            m[1].lower(),
            at,
            _label(m),
        ),
        year_groups=(3,),
    ),
    _rule(
        # "late may" in lower case is the verb ("I was late, may I ..."): May needs its capital.
        rf"\b(?:(?P<part>early|mid|late)[- ](?!(?-i:may)\b)|{_PART_IN_WORDS} of )"
        rf"(?P<month>{_MONTH_RE})(?:,? (?P<year>(?:19|20)\d\d))?\b",
        _part_of_named_month,
        year_groups=("year",),
    ),
    # "in May" needs the preposition: a bare "may" is usually the verb.
    _rule(
        rf"\b(?:in|during|since) ({_MONTH_RE})\b",
        lambda m, at: _month(
            _latest_month(at, _MONTHS[m[1].lower()]), _MONTHS[m[1].lower()], at, _label(m)
        ),
        year_groups=(),
    ),
    # ----- English: relative -----
    _rule(r"\bday before yesterday\b", lambda m, at: _day(at, -2, _label(m))),
    _rule(
        r"\b(?:the )?(night|week|weekend|month|year) before last\b",
        lambda m, at: _before_last(at, m[1], _label(m)),
    ),
    _rule(
        r"\b(?:the other day|a few days ago|(?:the )?(?:past|last) few days)\b",
        lambda m, at: _days_before(at, _RECENT_DAYS, _label(m)),
        query_only=True,
    ),
    _rule(
        rf"\b(?:over|at|on|during) the {_EN_WEEKEND}\b",
        lambda m, at: _latest_weekend(at, _label(m)),
        query_only=True,
    ),
    _rule(r"\b(?:yesterday|yday|last night|last nite)\b", lambda m, at: _day(at, -1, _label(m))),
    _rule(
        r"\b(?:today|tonight|this morning|this afternoon|this evening)\b",
        lambda m, at: _day(at, 0, _label(m)),
    ),
    _rule(
        r"\b(?:past|last|previous) (\d+|two|three|four|five|six|seven|eight|nine|ten|"
        r"eleven|twelve|couple of) (days?|weeks?|months?|years?)\b",
        lambda m, at: _rolling_unit(at, _en_number(m[1]) or 1, m[2].lower(), _label(m)),
    ),
    _rule(
        r"\b(?:the )?past (day|week|month|year)\b",
        lambda m, at: _rolling_unit(at, 1, m[1].lower(), _label(m)),
    ),
    _rule(
        r"\b(\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
        r"a couple of) (days?|weeks?|months?|years?) ago\b",
        lambda m, at: _shift_unit(at, _en_number(m[1]) or 1, m[2].lower(), _label(m)),
    ),
    _rule(r"\b(?:last|previous) week\b", lambda m, at: _week(at, -1, _label(m))),
    _rule(r"\bthis week\b", lambda m, at: _week(at, 0, _label(m))),
    _rule(
        r"\b(?:last|previous) month\b", lambda m, at: _month(at.year, at.month - 1, at, _label(m))
    ),
    _rule(r"\bthis month\b", lambda m, at: _month(at.year, at.month, at, _label(m))),
    _rule(r"\b(?:last|previous) year\b", lambda m, at: _year(at.year - 1, at, _label(m))),
    _rule(r"\bthis year\b", lambda m, at: _year(at.year, at, _label(m))),
    _rule(
        rf"\b(?:last|previous|this past|the past) {_EN_WEEKEND}\b",
        lambda m, at: _weekend(at, -1, _label(m)),
    ),
    _rule(rf"\bthis {_EN_WEEKEND}\b", lambda m, at: _weekend(at, 0, _label(m))),
    _rule(rf"\bnext {_EN_WEEKEND}\b", lambda m, at: _weekend(at, 1, _label(m))),
    _rule(
        rf"\b{_EN_COUNT} weekends? ago\b",
        lambda m, at: _weekend(at, -(_en_number(m[1]) or 1), _label(m)),
    ),
    # ----- English: ahead -----
    _rule(r"\bday after tomorrow\b", lambda m, at: _day(at, 2, _label(m))),
    _rule(r"\btomorrow\b", lambda m, at: _day(at, 1, _label(m))),
    _rule(r"\bnext week\b", lambda m, at: _week(at, 1, _label(m))),
    _rule(r"\bnext month\b", lambda m, at: _month(at.year, at.month + 1, at, _label(m))),
    _rule(r"\bnext year\b", lambda m, at: _year(at.year + 1, at, _label(m))),
    _rule(
        rf"\bnext {_EN_WEEKDAY}\b",
        lambda m, at: _weekday_forward(at, _WEEKDAYS_EN[m[1].lower()], _label(m)),
    ),
    # Not "in two weeks": in a turn it is as often a duration ("read it in two days").
    _rule(
        rf"\b{_EN_COUNT} (days?|weeks?|months?|years?) from now\b",
        lambda m, at: _shift_unit(at, -(_en_number(m[1]) or 1), m[2].lower(), _label(m)),
    ),
    _rule(
        r"\blast (monday|tuesday|wednesday|thursday|friday|saturday|sunday"
        r"|mon|tues?|weds?|thu|thurs?|fri|sat|sun)\b\.?",
        lambda m, at: _weekday_back(at, _weekday_en(m[1]), True, _label(m)),
    ),
    _rule(
        rf"\bon (monday|tuesday|wednesday|thursday|friday|saturday|sunday"
        rf"|{_WEEKDAY_SHORT_AFTER_ON})\b\.?",
        lambda m, at: _weekday_back(at, _weekday_en(m[1]), False, _label(m)),
    ),
    # A bare year, not part of an identifier or version ("SF2023", "v2023.1", "2023-05").
    _rule(
        r"(?<![\w.\-/])((?:19|20)\d\d)(?![\w.\-/年])",
        lambda m, at: _year(int(m[1]), at, _label(m)),
        explicit=True,
    ),
    # ----- Chinese: explicit dates -----
    _rule(
        r"((?:19|20)\d\d)年(\d{1,2})月(\d{1,2})[日号]",
        lambda m, at: _date(int(m[1]), int(m[2]), int(m[3]), at, _label(m)),
        explicit=True,
    ),
    _rule(
        r"((?:19|20)\d\d)年(\d{1,2})月",
        lambda m, at: _month(int(m[1]), int(m[2]), at, _label(m)),
        explicit=True,
    ),
    _rule(
        r"(?<![\d〇一二两三四五六七八九十])([一二三四五六七八九十]{1,2})月"
        r"([一二三四五六七八九十]{1,3}|\d{1,2})[日号]",
        lambda m, at: _zh_month_day(m, at),
    ),
    _rule(
        r"(?<!\d)(\d{1,2})月(\d{1,2})[日号]",
        lambda m, at: _date(
            _latest_date_year(at, int(m[1]), int(m[2])), int(m[1]), int(m[2]), at, _label(m)
        ),
    ),
    _rule(
        r"(?:((?:19|20)\d\d)年)?(\d{1,2})月(\d{1,2})[日号]?(?:到|至|~|～|-|—)"
        r"(?:(\d{1,2})月)?(\d{1,2})[日号]",
        _zh_range,
    ),
    _rule(
        r"(?:((?:19|20)\d\d)年)?(\d{1,2})月(?:的)?第([一二三四1-4])(?:周|个星期|个礼拜)",
        lambda m, at: _week_of_month(_year_of(m[1], at, int(m[2])), int(m[2]), m[3], at, _label(m)),
    ),
    _rule(
        rf"(?:{_ZH_YEAR}年|(去年|今年|前年|明年|后年))?{_ZH_MONTH_NUMBER}月份?(初|上旬|中旬|下旬|中|底|末)",
        _zh_month_part,
        year_groups=(1, 2),
    ),
    # 3月份, 十二月, 去年12月: a whole month. Not "三个月" (a duration) nor a date (5月3号, the
    # longer match).
    _rule(
        rf"(?:{_ZH_YEAR}年|(去年|今年|前年|明年|后年))?(?<![\d〇一二两三四五六七八九十百个第每])"
        rf"{_ZH_MONTH_NUMBER}月份?(?![\d〇一二两三四五六七八九十])",
        _zh_month,
        year_groups=(1, 2),
    ),
    _rule(
        r"(这个|本|上上个?|上个?|下个?)月(初|上旬|中旬|下旬|中|底|末)",
        lambda m, at: _part_of_relative_month(at, _ZH_MONTH_OFFSET[m[1]], m[2], _label(m)),
    ),
    _rule(
        r"(?<![\d〇一二两三四五六七八九十百个年这本上下每])月(初|上旬|中旬|下旬|底|末)",
        lambda m, at: _part_of_relative_month(at, 0, m[1], _label(m)),
    ),
    # 3号到7号: both days, in the latest month the first has passed in.
    _rule(
        r"(?<![\d月])(\d{1,2})[号日]?(?:到|至|~|～|-|—)(\d{1,2})[号日]",
        lambda m, at: _days_of_latest_month(at, int(m[1]), int(m[2]), _label(m)),
    ),
    # "1号我交房租了吗": a day of the latest month it has passed in. Not a line, a building, a
    # bed or a seat ("3号线", "5号楼").
    _rule(
        r"(?<![\d月〇一二两三四五六七八九十几第])(\d{1,2}|[一二三四五六七八九十]{1,3})号"
        r"(?!线|楼|床|门|口|位|房|桌|厅|窗|馆|机|车|柜|台|码|球|店|院|仓|包|选手|文件|电池|字|站)",
        lambda m, at: _day_of_latest_month(at, parse_chinese_number(m[1]) or 0, _label(m)),
        query_only=True,
    ),
    _rule(
        rf"{_ZH_YEAR}年", lambda m, at: _year(_zh_year_number(m[1]), at, _label(m)), explicit=True
    ),
    # ----- Chinese: relative -----
    _rule(r"大前天", lambda m, at: _day(at, -3, _label(m))),
    _rule(r"前天", lambda m, at: _day(at, -2, _label(m))),
    _rule(r"昨天|昨日|昨晚|昨儿", lambda m, at: _day(at, -1, _label(m))),
    _rule(
        r"前几天|前两天|前些天|几天前|前些日子",
        lambda m, at: _days_before(at, _RECENT_DAYS, _label(m)),
        query_only=True,
    ),
    _rule(r"今天|今日|今早|今晚", lambda m, at: _day(at, 0, _label(m))),
    _rule(
        rf"(?:最近|过去|近)({_ZH_NUM})(天|周|个星期|个礼拜|个月|年)",
        lambda m, at: _rolling_unit(at, parse_chinese_number(m[1]) or 1, m[2], _label(m)),
    ),
    _rule(
        rf"({_ZH_NUM})(天|日|周|个星期|个礼拜|星期|个月|年)(?:以)?前",
        lambda m, at: _shift_unit(at, parse_chinese_number(m[1]) or 1, m[2], _label(m)),
    ),
    _rule(
        r"上(?:周|星期|个星期|礼拜|个礼拜)([一二三四五六日天])",
        lambda m, at: _day(_week(at, -1, "").start, _WEEKDAYS_ZH[m[1]], _label(m)),
    ),
    _rule(
        r"(?:这|本)(?:周|星期|个星期|礼拜)([一二三四五六日天])",
        lambda m, at: _day(_week(at, 0, "").start, _WEEKDAYS_ZH[m[1]], _label(m)),
    ),
    _rule(rf"上个?{_ZH_WEEK}的?(?:周)?末", lambda m, at: _weekend(at, -1, _label(m))),
    _rule(rf"(?:这|本)个?{_ZH_WEEK}末", lambda m, at: _weekend(at, 0, _label(m))),
    # A bare "周末" is habitual as often as not in a turn ("我喜欢周末去爬山"); in a question it
    # is the weekend just gone, as "over the weekend" is.
    _rule(
        rf"(?<![上下这本个]){_ZH_WEEK}末",
        lambda m, at: _latest_weekend(at, _label(m)),
        query_only=True,
    ),
    _rule(rf"下个?{_ZH_WEEK}末", lambda m, at: _weekend(at, 1, _label(m))),
    _rule(r"上上(?:周|星期|个星期|礼拜|个礼拜)", lambda m, at: _week(at, -2, _label(m))),
    _rule(r"上(?:周|星期|个星期|礼拜|个礼拜)", lambda m, at: _week(at, -1, _label(m))),
    _rule(r"(?:这|本)(?:周|星期|个星期|礼拜|个礼拜)", lambda m, at: _week(at, 0, _label(m))),
    _rule(r"上上个月", lambda m, at: _month(at.year, at.month - 2, at, _label(m))),
    _rule(r"上个?月", lambda m, at: _month(at.year, at.month - 1, at, _label(m))),
    _rule(r"(?:这个|本)月", lambda m, at: _month(at.year, at.month, at, _label(m))),
    _rule(r"前年", lambda m, at: _year(at.year - 2, at, _label(m))),
    _rule(r"去年", lambda m, at: _year(at.year - 1, at, _label(m))),
    _rule(r"今年", lambda m, at: _year(at.year, at, _label(m))),
    # ----- Chinese: ahead -----
    _rule(r"大后天", lambda m, at: _day(at, 3, _label(m))),
    _rule(r"(?<!以|之|然|最|落|午)后天", lambda m, at: _day(at, 2, _label(m))),
    _rule(r"明天|明日|明早|明晚", lambda m, at: _day(at, 1, _label(m))),
    _rule(
        rf"({_ZH_NUM})(天|日|周|个星期|个礼拜|星期|个月|年)(?:以|之)?后",
        lambda m, at: _shift_unit(at, -(parse_chinese_number(m[1]) or 1), m[2], _label(m)),
    ),
    _rule(
        rf"下{_ZH_WEEK}([一二三四五六日天])",
        lambda m, at: _day(_week(at, 1, "").start, _WEEKDAYS_ZH[m[1]], _label(m)),
    ),
    _rule(rf"下下{_ZH_WEEK}", lambda m, at: _week(at, 2, _label(m))),
    _rule(rf"下{_ZH_WEEK}", lambda m, at: _week(at, 1, _label(m))),
    _rule(r"下个?月", lambda m, at: _month(at.year, at.month + 1, at, _label(m))),
    _rule(r"明年", lambda m, at: _year(at.year + 1, at, _label(m))),
    _rule(r"后年", lambda m, at: _year(at.year + 2, at, _label(m))),
)


@dataclass(frozen=True)
class TimeReference:
    """A time phrase found in a text and the window it names, relative to the text's moment."""

    window: TimeWindow
    start: int  # character span of the phrase
    end: int
    # The phrase spells the date out ("8 May 2023"): a reader needs no resolution.
    explicit: bool


# "the Sunday before 25 October 2022", "two weeks before 11 August", "last weekend before 10
# April": a unit counted back from a date the text spells out, not from the text's own moment.
_UNIT_BEFORE = re.compile(
    rf"\b(?:(?:the|last)\s+)?(?:{_EN_COUNT}\s+)?"
    r"(days?|weeks?|weekends?|months?|years?|monday|tuesday|wednesday|thursday|friday|saturday"
    r"|sunday)\s+(?:before|prior to)\s+$",
    re.IGNORECASE | re.ASCII,
)


def _before(anchor: datetime, count: int, unit: str, label: str) -> TimeWindow:
    unit = unit.lower()
    if unit in _WEEKDAYS_EN:
        back = (anchor.weekday() - _WEEKDAYS_EN[unit]) % 7 or 7
        return _day(anchor, -back - 7 * (count - 1), label)
    if unit.startswith("weekend"):
        # The weekend before a Sunday is the one of the week before.
        return _weekend(anchor, -count, label)
    return _shift_unit(anchor, count, unit, label)


def time_references(text: str, at: datetime, *, query: bool = False) -> list[TimeReference]:
    """Every time phrase in ``text`` resolved against ``at``, left to right, none overlapping.

    Where phrases overlap the leftmost wins, then the longest ("last Friday" over "Friday"), then
    the earlier rule. A unit "before" a spelled-out date counts back from that date ("the week
    before 9 June 2023"). Loose phrases ("the other day") count only in a ``query``. Pure: the
    same text and moment always give the same references (I2).
    """
    if at.tzinfo is None:
        raise NaiveTime("at: a timezone-aware datetime is required")
    if not _may_name_a_time(text):
        return []  # most texts name no time: one scan instead of every rule's
    found: list[tuple[int, int, int, TimeReference]] = []
    for order, rule in enumerate(_RULES):
        if rule.query_only and not query:
            continue
        for match in rule.pattern.finditer(text):
            window = rule.build(match, at)
            if window is None or (not query and _ahead_this_year(rule, match, window, at)):
                continue
            reference = TimeReference(window, match.start(), match.end(), rule.explicit)
            found.append((match.start(), -(match.end() - match.start()), order, reference))
    found.sort(key=lambda item: item[:3])
    chosen: list[TimeReference] = []
    for _, _, _, reference in found:
        if chosen and reference.start < chosen[-1].end:
            continue
        chosen.append(reference)
    return _anchored(text, chosen)


# Every rule's phrase contains one of these (a digit, a Chinese time character, a time noun, a
# month or weekday name), so a text without any names no time. A set lookup per word: one big
# case-insensitive alternation would cost more than the rules it saves.
_TRIGGER_CHARS = re.compile(r"[\d天日周星期礼拜月年昨今明号]")
_TRIGGER_WORDS = frozenset(
    {
        "yesterday",
        "today",
        "tonight",
        "tomorrow",
        "ago",
        "night",
        "morning",
        "afternoon",
        "evening",
        *(
            f"{unit}{plural}"
            for unit in ("day", "week", "weekend", "month", "year")
            for plural in ("", "s")
        ),
        *_MONTHS,
        *_WEEKDAYS_EN,
        *_WEEKDAY_SHORT,
        "yday",
        "nite",
        "wknd",
        "wkend",
    }
)
_WORD = re.compile(r"[A-Za-z]+")


def _may_name_a_time(text: str) -> bool:
    if _TRIGGER_CHARS.search(text):
        return True
    return not _TRIGGER_WORDS.isdisjoint(word.lower() for word in _WORD.findall(text))


def _anchored(text: str, references: list[TimeReference]) -> list[TimeReference]:
    """Fold "<unit> before <spelled-out date>" into one reference counted back from the date."""
    result: list[TimeReference] = []
    for reference in references:
        if reference.explicit:
            # The unit may be a relative phrase already found ("last weekend"), never an
            # earlier spelled-out date.
            floor = max((r.end for r in result if r.explicit), default=0)
            match = _UNIT_BEFORE.search(text, floor, reference.start)
            if match is not None:
                # A relative phrase the unit belonged to ("last weekend") is replaced.
                while result and result[-1].end > match.start():
                    result.pop()
                anchor = reference.window.start
                count = _en_number(match[1]) if match[1] else 1
                window = _before(anchor, count or 1, match[2], text[match.start() : reference.end])
                result.append(TimeReference(window, match.start(), reference.end, False))
                continue
        result.append(reference)
    return result


def parse_time_window(query: str, at: datetime) -> TimeWindow | None:
    """The window the query names, relative to ``at``; the leftmost (then longest) phrase wins.

    The rule table decides when it finds a phrase; otherwise dateparser may (``_library_window``).
    """
    references = time_references(query, at, query=True)
    if references:
        return references[0].window
    return _library_window(query, at)


_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
# The parts of dateparser's own locale data that name a day, a week or a span of them: a query
# with none of their words (or a digit) gives it nothing to read.
_DATE_WORD_KEYS = (
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "week",
    "day",
    "fortnight",
    "morning",
    "afternoon",
    "evening",
    "night",
    "ago",
)


@functools.cache
def _date_words(language: str) -> frozenset[str]:
    """Date words of dateparser's ``language`` locale (loaded once, on first use: ~2 s)."""
    from dateparser.languages.loader import default_loader

    info = default_loader.get_locale(language).info
    words = {word.lower() for key in _DATE_WORD_KEYS for word in info.get(key, [])}
    for phrases in info.get("relative-type", {}).values():
        words.update(phrase.lower() for phrase in phrases)
    return frozenset(word for word in words if word.strip())


_LATIN_WORD = re.compile(r"[a-z]+")


@functools.cache
def _skip_words(language: str) -> frozenset[str]:
    from dateparser.languages.loader import default_loader

    return frozenset(default_loader.get_locale(language).info.get("skip", []))


def _meaningful(phrase: str, language: str) -> str:
    """The phrase without the words dateparser itself skips ("sat at" → "sat", "on Sat" → "Sat")."""
    skip = _skip_words(language)
    return " ".join(word for word in phrase.split() if word.lower() not in skip)


def _has_date_word(query: str, language: str) -> bool:
    if any(char.isdigit() for char in query):
        return True
    words = _date_words(language)
    if language == "zh":
        return any(word in query for word in words)
    lowered = query.lower()
    tokens = set(_LATIN_WORD.findall(lowered))
    # Single words by lookup; the library's few multi-word phrases ("till date") by search.
    return any((word in tokens) if " " not in word else (word in lowered) for word in words)


_TIMES_OF_DAY = frozenset({"morning", "afternoon", "evening", "night", "noon", "midnight"})


def _only_a_time_of_day(phrase: str) -> bool:
    words = [word for word in phrase.lower().split() if word not in {"a", "an", "the"}]
    return bool(words) and set(words) <= _TIMES_OF_DAY


# A Latin phrase this short, less the words dateparser skips, is as often a word as a date ("we"
# read as Wednesday, "sat at" as Saturday); "last sat" and "Tuesday" are long enough.
_MIN_LATIN_PHRASE = 4


def _library_window(query: str, at: datetime) -> TimeWindow | None:
    """The past day or week dateparser finds in ``query``, relative to ``at``, else None.

    Only day and week readings count: month and year names are the table's, and dateparser's
    month readings are where it errs ("about March" in "March for Science", "may I ask"). A date
    that is the query moment itself is "now" or "现在", no window. Dates are read in ``at``'s
    own timezone and preferred in the past, as a question about what happened is.
    """
    if at.tzinfo is None:
        raise NaiveTime("at: a timezone-aware datetime is required")
    language = "zh" if _CJK.search(query) else "en"
    if not _has_date_word(query, language):
        return None  # most queries name no date: a set lookup instead of a ~20 ms search
    from dateparser.date import DateDataParser
    from dateparser.search import search_dates

    languages = [language]
    local = at.replace(tzinfo=None)
    settings = {"RELATIVE_BASE": local, "PREFER_DATES_FROM": "past"}
    found = search_dates(query, languages=languages, settings=settings) or []
    reader = DateDataParser(languages=languages, settings=settings)
    for phrase, moment in found:
        text = phrase.strip()
        if not _CJK.search(text) and len(_meaningful(text, language)) < _MIN_LATIN_PHRASE:
            continue
        if _only_a_time_of_day(_meaningful(text, language)):
            continue  # "a morning routine", "evening classes": a time of day, not a day
        if moment == local or moment > local:
            continue
        period = reader.get_date_data(text).period
        label = text
        if period == "day":
            return _day(at, (moment.date() - local.date()).days, label)
        if period == "week":
            day = _day(at, (moment.date() - local.date()).days, label)
            return _week(day.start, 0, label)
    return None
