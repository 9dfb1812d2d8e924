"""Query routing: which memory region a question is about, by rules in English and Chinese.

Rules are cheap and deterministic (replayable); the engine falls back to the other regions when
the routed region scores poorly, so a wrong route costs a second pass, not a miss.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from schemas.memory import REGIONS, Region


@dataclass(frozen=True)
class RouteDecision:
    route: Region
    # 0 when no rule matched: the engine then searches every region at once.
    confidence: float
    reason: str
    scores: dict[str, float] = field(default_factory=dict)
    matched: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Rule:
    region: Region
    pattern: re.Pattern[str]
    weight: float
    label: str


def _en(region: Region, pattern: str, weight: float, label: str) -> _Rule:
    return _Rule(region, re.compile(pattern, re.IGNORECASE), weight, label)


# Chinese has no word boundaries, so its rules are plain substrings/alternations.
_zh = _en

_WEEKDAYS_EN = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_MONTHS_EN = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)"
)

_RULES: tuple[_Rule, ...] = (
    # --- episodic: what happened, when ---
    _en("episodic", r"\bwhen (?:did|was|were|have|had|do)\b", 1.0, "when did"),
    _en("episodic", r"\bwhat (?:did|have) (?:i|we|you|they|he|she)\b", 0.9, "what did X"),
    _en(
        "episodic", r"\bdid (?:i|we|you) (?:say|mention|tell|talk|discuss|ask)\b", 0.9, "did X say"
    ),
    _en("episodic", r"\b(?:said|mentioned|told|talked about|discussed)\b", 0.5, "reported speech"),
    _en("episodic", r"\bwhat happened\b", 1.0, "what happened"),
    _en(
        "episodic",
        r"\b(?:last|this|past|previous) (?:week|month|year|night|time|weekend)\b",
        0.8,
        "relative period",
    ),
    _en("episodic", r"\b(?:yesterday|today|tonight|earlier|recently)\b", 0.7, "relative day"),
    _en(
        "episodic",
        r"\b(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten) "
        r"(?:days?|weeks?|months?|years?) ago\b",
        0.9,
        "N ago",
    ),
    _en("episodic", rf"\b(?:on|last) {_WEEKDAYS_EN}\b", 0.7, "weekday"),
    _en("episodic", rf"\b(?:in|on|since) (?:\d{{1,2}} )?{_MONTHS_EN}\b", 0.6, "month"),
    _en("episodic", r"\b(?:in|since|during) (?:19|20)\d\d\b", 0.6, "year"),
    _en("episodic", r"\bremember (?:when|the time|that time)\b", 1.0, "remember when"),
    _en("episodic", r"\b(?:first|last) time\b", 0.6, "first/last time"),
    _zh("episodic", r"什么时候|啥时候|何时|哪天|几号|几月", 1.0, "什么时候"),
    _zh(
        "episodic",
        r"上周|上星期|上个星期|上礼拜|上个礼拜|这周|本周|上个月|上月|去年|前年",
        0.8,
        "相对时段",
    ),
    # 最近 with a span ("最近三天") is a stretch of time; alone ("我最近在学什么？") it asks what
    # holds these days, which is any region's answer (the current-value rule orders it).
    _zh(
        "episodic",
        r"昨天|昨日|前天|今天|今日|刚才|之前"
        r"|最近(?= ?[0-9一二两三四五六七八九十几]+ ?(?:天|周|个星期|个礼拜|个月|年))",
        0.7,
        "相对日期",
    ),
    _zh("episodic", r"[0-9一二两三四五六七八九十几]+ ?(?:天|周|个星期|个月|年)前", 0.9, "N前"),
    _zh("episodic", r"说了什么|说过|提到过|提过|聊过|讲过|谈过|问过", 0.9, "说过"),
    _zh("episodic", r"发生了什么|那次|那天|当时", 0.9, "那次"),
    _zh("episodic", r"\d{4}年|\d{1,2}月\d{1,2}[日号]", 0.6, "日期"),
    # --- semantic: stable facts and preferences ---
    _en("semantic", r"\bwhat (?:is|are|'s) (?:my|our|your|the|his|her|their)\b", 0.7, "what is my"),
    _en(
        "semantic",
        r"\bwhat (?:\w+ )?(?:stack|database|db|language|framework|tool|editor|version"
        r"|name|email|address|city|team|role|job|plan|policy|library|provider|cloud)\b",
        0.9,
        "what <thing>",
    ),
    _en(
        "semantic",
        r"\b(?:do|does) (?:i|we|you|he|she|they) (?:use|prefer|like|love|hate|want"
        r"|need|own|have)\b",
        0.9,
        "do X use/prefer",
    ),
    _en(
        "semantic",
        r"\b(?:prefer(?:s|red|ence)?|favou?rite|likes?|dislikes?|allergic)\b",
        0.8,
        "preference",
    ),
    _en("semantic", r"\b(?:which|who is|who are|where (?:do|does|is|are))\b", 0.5, "which/who"),
    _en("semantic", r"\b(?:we|i) use\b", 0.6, "we use"),
    _zh(
        "semantic",
        r"用什么|用的什么|用哪个|用哪种|什么数据库|什么语言|什么框架|什么技术栈|技术栈",
        0.9,
        "用什么",
    ),
    _zh("semantic", r"喜欢|偏好|爱好|讨厌|不喜欢|习惯|过敏", 0.8, "偏好"),
    _zh("semantic", r"是什么|是谁|是哪|哪个|哪种|叫什么|住在|在哪", 0.6, "是什么"),
    # --- procedural: how-to, steps, fixes ---
    _en(
        "procedural",
        r"\bhow (?:do|did|can|could|should|would|to|does) (?:i |we |you |they )?"
        r"(?:\w+ )?(?:fix|solve|resolve|deploy|install|set ?up|configure|build|run|release|debug"
        r"|migrate|upgrade|roll ?back|restart|handle|make|get)\b",
        1.2,
        "how did we fix",
    ),
    _en(
        "procedural",
        r"\bhow (?:to|do i|do we|did i|did we|can i|can we|should i|should we)\b",
        0.9,
        "how to",
    ),
    _en(
        "procedural",
        r"\b(?:steps?|procedure|process|instructions?|recipe|runbook|playbook"
        r"|checklist|workaround|guide)\b",
        0.9,
        "steps",
    ),
    _en(
        "procedural",
        r"\b(?:fix(?:ed|es)?|solved?|resolved?|deploy(?:ed|ment)?|troubleshoot"
        r"|set ?up|install(?:ed|ation)?|configure[d]?)\b",
        0.5,
        "fix/deploy verb",
    ),
    _zh("procedural", r"怎么|怎样|如何|咋", 0.9, "怎么"),
    _zh("procedural", r"步骤|流程|方法|办法|教程|操作|指南", 0.9, "步骤"),
    _zh("procedural", r"解决|修复|部署|安装|配置|排查|上线|回滚|升级", 0.6, "解决"),
)

# Words asking for what is recent or true now: only such a query gets the full freshness weight
# (``scoring.score_weights``); for the rest recency only breaks ties. "New" before a capitalised
# word is a name ("New York"), not a cue.
_RECENCY = re.compile(
    r"\b(?:new(?!\s+(?-i:[A-Z]))|newer|newest|latest|recent|recently|lately|current|currently|now|nowadays"
    r"|these days|anymore|any more|at the moment|up to date|still)\b"
    r"|最新|最近|近来|近期|现在|目前|如今|这些天|这阵子|还在|仍然|新(?:的|开|买|来|出|上)",
    re.IGNORECASE,
)


def seeks_recency(query: str) -> bool:
    """True when the query asks for recent things ("what's new", "lately", "still", "最近")."""
    return _RECENCY.search(query) is not None


# Words asking for the value that holds now, where an older one may have changed: "now",
# "currently", "these days", "still", "anymore", "at the moment", 现在, 目前, 还…吗. Not "recently"
# or "new": "What forum did Tim join recently?" asks about an event, not a value that changed.
# 最近 counts: without a number after it (a rolling window, "最近三天", which the time window
# parser takes first) it reads "these days" ("我最近在读什么书？"), and newest-first also orders
# a "what did I do recently" list sensibly (docs/BENCHMARKS.md, "Current-value questions").
_NOW_WORDS = (
    r"\b(?:(?<!just )now|right now|currently|nowadays|these days|at the moment|at present"
    r"|at this point(?: in time)?|as of (?:now|today)|as things stand|any ?more|any longer"
    r"|still|from now on)\b"
    # "current" before a noun ("my current job"), not the noun ("the current in the river").
    r"|\bcurrent(?=\s+[a-z])(?!\s+(?:in|of|and|is|was|flows?)\b)"
    # Where a choice came to rest: "the dose I landed on". Not "end up": "what did they end up
    # playing at the charity event?" asks about an event (LoCoMo).
    r"|\b(?:settled on|landed on)\b"
    r"|现在|目前|当前|当下|如今|眼下|此刻|这会儿|现阶段|至今|到现在|截至(?:今天|目前|现在)"
    r"|这些天|这阵子|这段时间|近来|最近(?!一次|的一次)|仍然|依然|依旧|仍旧|最新"
    r"|后来(?:又)?(?:换|改)成|改完之后|调整到"
)
# "The last book I read", "my most recent trip", 最近一次: the newest instance. Not "last
# summer" or "last name": a time of year (not a calendar unit the window parser takes first) or
# a name part. Not "last time" or 上次 either: "how did we fix it last time?" means on the
# earlier occasion, whose fix is wanted, not the newest remark about the problem.
_LATEST_WORDS = (
    r"\b(?:the|my|our|your|his|her|their) (?:last|latest|most recent)\b"
    r"(?!\s+(?:name|summer|winter|spring|autumn|fall|season)\b)"
    r"|最近一次|最后一次"
)
# 还 as "still" up to the question's particle, not 还 as "repay" (还了吗, 还钱) and not the 么 of
# 什么 / 怎么 ("那天我妈还说了什么"); "…了没" asks whether a state has been reached by now.
_CURRENT_VALUE = re.compile(
    rf"{_NOW_WORDS}"
    r"|还(?!记得|了|钱|款|清|贷)[^，。,.？?！!]{0,16}(?:吗|嘛|(?<![什怎多那这])么|没有|不)"
    r"|了没有?(?=[？?！!。]|$)",
    re.IGNORECASE | re.ASCII,
)
_LATEST = re.compile(_LATEST_WORDS, re.IGNORECASE | re.ASCII)
_TIME_CUES = re.compile(rf"{_NOW_WORDS}|{_LATEST_WORDS}", re.IGNORECASE | re.ASCII)
# "Did I still have the flu when…", "Was I still at Google then?": "still" in a past frame asks
# about that time, not now.
_PAST_STILL = re.compile(r"\b(?:did|was|were|had)\b[^,.?!]{0,40}$", re.IGNORECASE | re.ASCII)
_CAPITALISED_NEXT = re.compile(r"\s+[A-Z]", re.ASCII)


def without_time_cues(query: str) -> str:
    """The query without the words that ask *when* ("now", "still", "the last", 最近, 现在).

    They say which of the answers is wanted, not what the answers are about: as keywords they
    match whatever happens to say "still" or "last night" ("Still reporting to Rhodri" for "is
    Rhodri still my boss?"), which is often the old value.
    """
    return _TIME_CUES.sub(" ", query)


def asks_latest(query: str) -> bool:
    """True when the query asks for the newest instance ("the last book I read", 最近一次): the
    newest of the equally good answers comes first, the earlier ones stay (an earlier trip did
    not stop being true, unlike an earlier address)."""
    return _LATEST.search(query) is not None


def asks_current_value(query: str) -> bool:
    """True when the query asks what holds now ("Where do I live now?", "我现在用什么？",
    "你还喜欢咖啡吗？"): the newest of the equally good answers comes first. A cue inside a
    name ("the band Now United", "Still Alice", 《当下的力量》) or "still" in a past frame does not
    count."""
    return any(_counts_as_now(query, match) for match in _CURRENT_VALUE.finditer(query))


def _counts_as_now(query: str, match: re.Match[str]) -> bool:
    word = match.group(0)
    before = query[: match.start()]
    if before.count("《") > before.count("》"):
        return False  # inside a title: 《当下的力量》
    mid_sentence = bool(before.strip()) and before.rstrip()[-1:] not in ".?!"
    if word[:1].isupper() and mid_sentence and _CAPITALISED_NEXT.match(query, match.end()):
        return False  # a capitalised cue mid-sentence before a capitalised word: a name
    return not (word.lower() == "still" and _PAST_STILL.search(before))


# Questions whose answer is a time: the memory that states one ("yesterday", "last May") is the
# better answer than one that only shares the topic.
_ASKS_WHEN = re.compile(
    r"\bwhen\b|\bwhat (?:time|date|day|year|month)\b|\bwhich (?:day|date|year|month|week)\b"
    r"|\bhow long ago\b|\bsince when\b"
    r"|什么时候|啥时候|何时|哪天|哪一天|几号|几月|哪年|哪一年|几点|多久以前|多久之前",
    re.IGNORECASE,
)


def asks_when(query: str) -> bool:
    """True when the question asks for a time ("when did…", "what date…", "什么时候")."""
    return _ASKS_WHEN.search(query) is not None


# A past frame in a how-question: "how did we fix…", "what did I end up doing that time…",
# 上次咋解决的, 那次怎么弄好的. Not a present how-to ("卤牛肉怎么做？"), whose answer is the
# procedure itself rather than what followed a problem.
_PAST_FRAME = re.compile(
    r"\b(?:did|was|were|had|last time|that time|ended up)\b"
    r"|上次|上回|那次|那回|当时|之前|以前|[的了][？?！!。]?\s*$",
    re.IGNORECASE,
)


# "What did I do when the car died?", "what did we end up doing about the leak": what was done
# about a situation, however the routing reads it.
_WHAT_WAS_DONE = re.compile(
    r"\bwhat (?:did|do) (?:i|we) (?:end up )?(?:do|doing) (?:when|about|after|that time|the time)\b"
    r"|当时怎么办|那次怎么办|后来怎么办",
    re.IGNORECASE,
)


def asks_how_it_went(query: str, decision: RouteDecision | None = None) -> bool:
    """True when the question asks how something was done or fixed on a past occasion: a
    how-question (``classify`` routes it to procedures; ``decision`` when the caller has it) in a
    past frame (``_PAST_FRAME``), or a question about what was done about a situation
    (``_WHAT_WAS_DONE``)."""
    if _WHAT_WAS_DONE.search(query):
        return True
    if decision is None:
        decision = classify(query)
    return (
        decision.route == "procedural"
        and decision.confidence > 0
        and bool(_PAST_FRAME.search(query))
    )


def speakers_named(query: str, speakers: Iterable[str]) -> list[str]:
    """The namespace's speakers the query names, by full name or first name ("Caroline",
    "caroline's"), whole words only; Chinese names as substrings."""
    named: list[str] = []
    for speaker in speakers:
        names = {speaker.strip(), speaker.strip().split(" ")[0]} - {""}
        for name in names:
            if _CJK_NAME.search(name):
                found = name in query
            else:
                found = re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", query, re.I) is not None
            if found:
                named.append(speaker)
                break
    return named


_CJK_NAME = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


# Ties go to the more specific region: "how did we fix it last week" is a how-to.
_TIE_ORDER: dict[str, int] = {"procedural": 0, "episodic": 1, "semantic": 2}


def classify(query: str) -> RouteDecision:
    """Route ``query`` to a region; confidence = winner's share of the evidence, saturated."""
    scores: dict[str, float] = dict.fromkeys(REGIONS, 0.0)
    matched: list[str] = []
    for rule in _RULES:
        if rule.pattern.search(query):
            scores[rule.region] += rule.weight
            matched.append(f"{rule.region}:{rule.label}")
    total = sum(scores.values())
    if total == 0.0:
        return RouteDecision("semantic", 0.0, "no rule matched", scores, ())
    best: Region = min(REGIONS, key=lambda region: (-scores[region], _TIE_ORDER[region]))
    # Share of evidence, damped when the only evidence is one weak rule.
    confidence = (scores[best] / total) * min(1.0, scores[best])
    reason = ", ".join(label for label in matched if label.startswith(best))
    return RouteDecision(best, round(confidence, 4), reason, scores, tuple(matched))
