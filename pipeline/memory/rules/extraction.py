"""Extract/encode stage: entities, (subject, attribute, value) triplets and content-addressed ids.

Triplets are only produced where the text states one (a stack choice, a switch "from X to Y",
"my X is Y", "from now on all code in Z"); contradiction detection relies on them, so a
missed triplet costs a supersede while a wrong one could wrongly retire a memory — the patterns
stay conservative (the seeds: "rather miss a conflict than invent one").
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from datetime import datetime, timedelta

from pipeline.memory.rules.text import normalise, strip_edges, without_emoji
from pipeline.recall.temporal import TimeWindow, time_references
from schemas.memory import Triplet

# Categories let "we use MySQL" and "we moved to PostgreSQL" land on the same attribute.
TECH_CATEGORIES: dict[str, tuple[str, ...]] = {
    "database": (
        "mysql",
        "postgresql",
        "postgres",
        "mongodb",
        "sqlite",
        "oracle",
        "mariadb",
        "sql server",
        "cassandra",
        "dynamodb",
        "cockroachdb",
        "tidb",
        "clickhouse",
        "redis",
        "elasticsearch",
    ),
    "programming language": (
        "python",
        "typescript",
        "javascript",
        "golang",
        "go",
        "java",
        "rust",
        "kotlin",
        "ruby",
        "php",
        "c++",
        "c#",
        "swift",
        "scala",
        "elixir",
    ),
    "cloud": ("aws", "gcp", "google cloud", "azure", "alibaba cloud", "阿里云", "腾讯云"),
    "frontend framework": ("react", "vue", "angular", "svelte", "next.js", "nuxt"),
    "message broker": ("kafka", "rabbitmq", "pulsar", "nats", "rocketmq"),
    "vector database": ("milvus", "qdrant", "weaviate", "pinecone", "chroma", "pgvector"),
    "editor": ("vim", "neovim", "emacs", "vscode", "vs code", "intellij", "pycharm"),
    "package manager": ("npm", "yarn", "pnpm", "pip", "poetry", "uv", "conda"),
}

_TECH_LOOKUP = {name: category for category, names in TECH_CATEGORIES.items() for name in names}
# Everyday words that are also technology names only count when written as a product name.
_AMBIGUOUS_TECH = frozenset({"go", "swift", "rust", "java", "ruby", "uv", "pip", "chroma", "nats"})


def _alternation(names: list[str]) -> str:
    return "|".join(sorted((re.escape(name) for name in names), key=len, reverse=True))


# ASCII-only boundaries: CJK characters are \w in Python, and "用的是MySQL" must still match.
_TECH_PATTERN = re.compile(
    r"(?<![A-Za-z0-9_.+#])("
    + _alternation([n for n in _TECH_LOOKUP if n not in _AMBIGUOUS_TECH])
    + r"|"
    + "|".join(f"(?-i:{name.capitalize()})" for name in sorted(_AMBIGUOUS_TECH))
    + r")(?![A-Za-z0-9_+#])",
    re.I,
)

_IDENTIFIER = re.compile(
    r"\b(?=[A-Za-z0-9-]*\d)(?=[A-Za-z0-9-]*[A-Za-z])[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*\b"
)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.-]+\b")
_VERSION = re.compile(r"\bv?\d+\.\d+(?:\.\d+)?\b")
_CAPITALISED = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]+(?:\s[A-Z][a-z]+)*)\b")
_QUOTED = re.compile(r"[\"“”'「」『』《》]([^\"“”'「」『』《》]{2,40})[\"“”'「」『』《》]")
_STOP_CAPITALS = {
    "I",
    "The",
    "A",
    "An",
    "And",
    "But",
    "So",
    "Yes",
    "No",
    "Ok",
    "Okay",
    "Thanks",
    "Hey",
    "Hi",
    "Hello",
    "We",
    "You",
    "It",
    "That",
    "This",
    "My",
    "Our",
    "Oh",
    "Wow",
    "Sure",
    "Well",
    "Also",
    "Just",
    "Really",
    "What",
    "When",
    "Where",
    "Who",
    "Why",
    "How",
    "Let",
    "Please",
    "From",
}

_FIRST_PERSON = r"(?:i|we|our team|the team|our|my)"

_SWITCH_EN = re.compile(
    r"\b(?:we|i|the team|our team)\s+(?:have\s+|had\s+)?(?:moved|switched|migrated|changed)"
    r"\s+(?:\w+\s+){0,3}?from\s+(?P<old>[\w.+#\s-]{1,40}?)\s+to\s+(?P<new>[\w.+#-]+(?:\s[\w.+#-]+)?)",
    re.I,
)
_FROM_NOW_EN = re.compile(
    r"\bfrom now on,?\s+(?:all\s+|every\s+)?(?:(?P<topic>[\w\s-]{1,30}?)\s+)?"
    r"(?:should be |must be |will be |is |are |goes |go )?(?:written\s+)?"
    r"(?:in|with|using|on|uses?)\s+"
    r"(?P<value>[\w.+#-]+(?:\s[\w.+#-]+)?)",
    re.I,
)
_USE_FOR_EN = re.compile(
    rf"\b{_FIRST_PERSON}\s+(?:now\s+|currently\s+|still\s+)?"
    r"(?:use|uses|are using|run|runs|rely on)\s+"
    r"(?P<value>[\w.+#-]+(?:\s[\w.+#-]+)?)\s+(?:for|as)\s+(?:our\s+|the\s+|my\s+)?"
    r"(?P<attr>[\w\s-]{2,30}?)(?:[.,;!]|$)",
    re.I,
)
_USE_EN = re.compile(
    rf"\b{_FIRST_PERSON}\s+(?:now\s+|currently\s+|still\s+)?(?:use|uses|are using|run|runs|"
    r"write (?:everything|all (?:of )?(?:my |our )?code|(?:my |our )?code) in|code in)\s+"
    r"(?P<value>[\w.+#-]+)",
    re.I,
)
_MY_X_IS_EN = re.compile(
    r"\b(?P<who>my|our)\s+(?P<attr>(?:favou?rite\s+)?[a-z][\w\s-]{1,30}?)\s+(?:is|are)\s+(?:now\s+)?"
    r"(?P<value>[^.,;!?]{1,40})",
    re.I,
)
_LIVE_EN = re.compile(
    r"\bi\s+(?:now\s+)?live\s+in\s+(?P<value>[A-Z][\w\s-]{1,30}?)(?:[.,;!?]|$| now| with)", re.I
)
_WORK_EN = re.compile(
    r"\bi\s+(?:now\s+)?work\s+(?:at|for)\s+(?P<value>[A-Z][\w&.\s-]{1,30}?)(?:[.,;!?]|$| as)", re.I
)

_SWITCH_ZH = re.compile(
    r"从\s*(?P<old>[\w.+#-]{1,20}?)\s*(?:迁移|切换|换|改|转)(?:到|成|为)\s*(?P<new>[\w.+#-]{1,20})"
)
_FROM_NOW_ZH = re.compile(
    r"(?:以后|今后|从现在(?:开始|起))[，,]?\s*(?:所有|全部)?(?P<topic>[\u4e00-\u9fff]{0,6}?)(?:都|统一)?(?:用|使用|改用|写成)\s*(?P<value>[\w.+#-]{1,20})"
)
_USE_ZH = re.compile(
    r"(?:我们|我|团队)(?:现在|目前|一直)?(?:用|使用|采用)\s*(?P<value>[A-Za-z][\w.+#-]{0,20})"
)
_MY_X_IS_ZH = re.compile(r"我的(?P<attr>[\u4e00-\u9fff]{1,8}?)是(?P<value>[^，。,.！!？?]{1,20})")
_LIVE_ZH = re.compile(
    r"我(?:现在)?住在(?P<value>[\u4e00-\u9fff]{2,8}?)(?:了|啦|呢)?(?:[，。,.！!]|$)"
)
# A move stated without its origin: "we migrated to PostgreSQL", "已经迁移到PostgreSQL了".
_MOVE_TO_EN = re.compile(
    rf"\b{_FIRST_PERSON}\s+(?:\w+\s+){{0,2}}?(?:have\s+|has\s+|had\s+)?(?:now\s+)?"
    r"(?:moved|switched|migrated|changed|transitioned)\s+(?:over\s+|everything\s+)?to\s+"
    r"(?P<value>[\w.+#-]+(?:\s[\w.+#-]+)?)",
    re.I,
)
_MOVE_TO_ZH = re.compile(
    r"(?:迁移|切换|换|改|转)(?:到|成|为)\s*(?P<value>[A-Za-z][\w.+#-]{0,20})|改用\s*(?P<value2>[A-Za-z][\w.+#-]{0,20})"
)
# A first-person sentence that names a technology with a verb of use ("我写代码一直用Python",
# "我们团队的数据库用的是MySQL", "our stack runs on AWS"): the technology's category is the
# attribute.
_FIRST_PERSON_ANY = re.compile(r"\b(?:i|we|our|my)\b|我|团队|公司", re.I)
_USE_VERB = re.compile(
    r"\b(?:use|uses|using|used|write|writes|written|code|runs? on|built (?:on|with)|rely on|"
    r"deployed on|hosted on)\b|用|使用|采用|基于|跑在|部署在",
    re.I,
)

_ZH_TOPIC_ATTRIBUTES = {
    "代码": "programming language",
    "数据库": "database",
    "前端": "frontend framework",
}
_EN_TOPIC_ATTRIBUTES = {
    "code": "programming language",
    "new code": "programming language",
    "services": "programming language",
    "the code": "programming language",
    "scripts": "programming language",
    "database": "database",
    "data": "database",
    "frontend": "frontend framework",
    "ui": "frontend framework",
}


def tech_category(value: str) -> str | None:
    return _TECH_LOOKUP.get(normalise(value))


# Spellings of one technology, so "postgres" restating "PostgreSQL" is a confirmation, not a change.
_TECH_ALIASES = {
    "postgres": "PostgreSQL",
    "golang": "Go",
    "vs code": "VSCode",
    "google cloud": "GCP",
}


def _canonical_value(value: str) -> str:
    cleaned = strip_edges(value)
    cleaned = _TECH_ALIASES.get(normalise(cleaned), cleaned)
    words = cleaned.split()
    # "PostgreSQL now", "TypeScript please": drop trailing filler words.
    while words and words[-1].lower() in {"now", "please", "instead", "too", "again", "today"}:
        words.pop()
    return " ".join(words)


def _first_tech(text: str) -> str | None:
    match = _TECH_PATTERN.search(text)
    return match.group(1) if match else None


def extract_triplet(text: str, speaker: str) -> Triplet | None:
    """The (subject, attribute, value) this text states, if it clearly states one."""
    subject = normalise(speaker)

    def make(attribute: str, value: str) -> Triplet | None:
        value = _canonical_value(value)
        if not value or len(value) > 40:
            return None
        return Triplet(subject=subject, attribute=normalise(attribute), value=value)

    for pattern in (_SWITCH_EN, _SWITCH_ZH):
        match = pattern.search(text)
        if match:
            new = _first_tech(match.group("new")) or match.group("new")
            category = tech_category(new) or tech_category(match.group("old").strip())
            return make(category or strip_edges(match.group("old")), new)
    match = _FROM_NOW_EN.search(text) or _FROM_NOW_ZH.search(text)
    if match:
        value = _first_tech(match.group("value")) or match.group("value")
        topic = normalise(match.group("topic") or "")
        category = (
            tech_category(value)
            or _EN_TOPIC_ATTRIBUTES.get(topic)
            or _ZH_TOPIC_ATTRIBUTES.get(topic)
        )
        if category or topic:
            return make(category or topic, value)
    match = _MOVE_TO_EN.search(text) or _MOVE_TO_ZH.search(text)
    if match:
        raw = next(v for v in match.groupdict().values() if v)
        value = _first_tech(raw)
        if value and tech_category(value):
            return make(tech_category(value) or "", value)
    match = _USE_FOR_EN.search(text)
    if match:
        value = match.group("value")
        return make(
            tech_category(_first_tech(value) or value) or match.group("attr"),
            _first_tech(value) or value,
        )
    for pattern in (_USE_EN, _USE_ZH):
        match = pattern.search(text)
        if match:
            value = _first_tech(match.group("value")) or ""
            category = tech_category(value) if value else None
            if category:
                return make(category, value)
    techs = {tech_category(m.group(1)): m.group(1) for m in _TECH_PATTERN.finditer(text)}
    if len(techs) == 1 and _FIRST_PERSON_ANY.search(text) and _USE_VERB.search(text):
        ((category, value),) = techs.items()
        if category:
            return make(category, value)
    match = _LIVE_EN.search(text) or _LIVE_ZH.search(text)
    if match:
        return make("home city", match.group("value"))
    match = _WORK_EN.search(text)
    if match:
        return make("employer", match.group("value"))
    match = _MY_X_IS_EN.search(text) or _MY_X_IS_ZH.search(text)
    if match:
        return make(match.group("attr"), match.group("value"))
    return None


def extract_entities(text: str) -> list[str]:
    """Identifiers, names, technologies and quoted titles mentioned in the text (deduplicated)."""
    found: list[str] = []
    found += [m.group(0) for m in _IDENTIFIER.finditer(text)]
    found += [m.group(0) for m in _EMAIL.finditer(text)]
    found += [m.group(0) for m in _VERSION.finditer(text)]
    found += [m.group(1) for m in _TECH_PATTERN.finditer(text)]
    found += [m.group(1).strip() for m in _QUOTED.finditer(text)]
    found += [m.group(1) for m in _CAPITALISED.finditer(text) if m.group(1) not in _STOP_CAPITALS]
    seen: set[str] = set()
    entities: list[str] = []
    for entity in found:
        key = normalise(entity)
        if key and key not in seen and len(key) > 1:
            seen.add(key)
            entities.append(entity)
    return entities[:24]


def memory_id(namespace: str, source_event_ids: Iterable[str], content: str) -> str:
    """Content-addressed id: replay with the same log yields the same id (I2)."""
    digest = hashlib.sha256()
    digest.update(namespace.encode())
    digest.update(b"\x00")
    for event_id in sorted(source_event_ids):
        digest.update(event_id.encode())
        digest.update(b"\x00")
    digest.update(normalise(content).encode())
    return "m_" + digest.hexdigest()[:24]


def segment_id(namespace: str, session_id: str, first_event_id: str) -> str:
    digest = hashlib.sha256(f"{namespace}\x00{session_id}\x00{first_event_id}".encode())
    return "g_" + digest.hexdigest()[:16]


# ---------- dates a turn refers to ----------

_MONTH_NAMES = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_CJK_CHAR = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


def _en_day(moment: datetime) -> str:
    return f"{moment.day} {_MONTH_NAMES[moment.month - 1]} {moment.year}"


def _zh_day(moment: datetime) -> str:
    return f"{moment.year}年{moment.month}月{moment.day}日"


def describe_window(window: TimeWindow, chinese: bool = False) -> str:
    """A window in words, at the granularity it has: "1 May 2022", "week of 25 April 2022",
    "weekend of 30 April 2022", "May 2022", "2022" (or 2022年5月1日, 2022年4月25日那周, …)."""
    start, end = window.start, window.end
    days = (end - start).days
    last = end - timedelta(days=1)
    if days == 1:
        return _zh_day(start) if chinese else _en_day(start)
    if days == 2 and start.weekday() == 5:
        return f"{_zh_day(start)}周末" if chinese else f"weekend of {_en_day(start)}"
    if days == 7 and start.weekday() == 0:
        return f"{_zh_day(start)}那周" if chinese else f"week of {_en_day(start)}"
    if start.day == 1 and end.day == 1 and days in range(28, 32):
        return (
            f"{start.year}年{start.month}月"
            if chinese
            else (f"{_MONTH_NAMES[start.month - 1]} {start.year}")
        )
    if (start.month, start.day, end.month, end.day) == (1, 1, 1, 1) and days in (365, 366):
        return f"{start.year}年" if chinese else str(start.year)
    if chinese:
        return f"{_zh_day(start)}至{_zh_day(last)}"
    return f"{_en_day(start)} to {_en_day(last)}"


def time_note(text: str, event_time: datetime) -> str:
    """The dates a turn's relative time phrases point at, in words ("" when there are none).

    "I went there yesterday" said on 8 May 2023 -> "7 May 2023"; "下个月搬家" said in May 2023
    -> "2023年6月". Phrases that spell their date out, or name the turn's own day, week, month or
    year ("today", "this week"), add nothing and are left out. Pure: text + event time only (I2).
    """
    notes: list[str] = []
    for reference in time_references(text, event_time):
        window = reference.window
        if reference.explicit or window.contains(event_time):
            continue
        phrase = text[reference.start : reference.end]
        described = describe_window(window, chinese=bool(_CJK_CHAR.search(phrase)))
        if described not in notes:
            notes.append(described)
    return "; ".join(notes)


def search_text(speaker: str, text: str, event_time: datetime, *, time_notes: bool = True) -> str:
    """What the indexes see of a turn: the speaker frames the text (pronouns, "my", who said it)
    and, in brackets, the dates its relative time phrases point at ("[7 May 2023]" for
    "yesterday" said on 8 May), so the words of a date match. Emoji are left out
    (``without_emoji``). Pure (I2)."""
    framed = f"{speaker}: {without_emoji(text)}"
    note = time_note(text, event_time) if time_notes else ""
    return f"{framed} [{note}]" if note else framed
