"""Questions that join two facts, split into the questions for each fact (rules, EN and ZH).

"What have Caroline and Melanie both painted?" needs what Caroline painted and what Melanie
painted: one query vector averages the two and finds neither well. "When did Melanie go hiking
after the road trip?" needs the hike and the road trip, told in different sessions. Each part is
recalled on its own and the parts' best answers are fused with the whole question's.

Rules, not a model: deterministic and replayable (I2), and conservative — a question that names
one fact is left alone (``decompose`` returns ``[]``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from pipeline.recall.temporal import time_references

_ANY_MOMENT = datetime(2000, 1, 1, tzinfo=UTC)

# Two names joined: "Caroline and Melanie", "Jon & Gina", "Tim and John's".
_NAME = r"[A-Z][\w'’-]*(?:\s[A-Z][\w'’-]*)?"
_NAME_PAIR = re.compile(rf"\b(?P<a>{_NAME})\s+(?:and|&)\s+(?P<b>{_NAME})\b")
# A joint reading: "both", "in common", "the same", "together", "each".
_JOINT = re.compile(r"\s*\b(?:both|in common|each|together)\b", re.IGNORECASE)
_JOINT_ANY = re.compile(r"\b(?:both|in common|the same|each)\b", re.IGNORECASE)
# Plain coordination, split only under a joint reading ("What do my cat and dog both eat?").
_AND = re.compile(r"\s+(?:and|&)\s+")
# A clause that anchors the question on another event: "... after the road trip".
_EVENT_JOIN = re.compile(
    r"\s+(?P<link>after|before|since|while|during|because of|right after|just before)\s+"
    r"(?P<event>[^?.!,;]{3,80})",
    re.IGNORECASE,
)
_QUESTION_WORD = re.compile(
    r"^\s*(?:what|which|who|whom|whose|where|when|how|why|did|do|does|is|are|was|were|has|have)\b",
    re.IGNORECASE,
)
_ZH_NAME_PAIR = re.compile(
    r"(?P<a>[\u4e00-\u9fff]{1,4}?)(?:和|跟|与|以及)(?P<b>[\u4e00-\u9fff]{1,4}?)(?=都|一起|共同|分别)"
)
_ZH_JOINT = re.compile(r"都|一起|共同|分别")
_ZH_EVENT_JOIN = re.compile(
    r"(?P<event>[\u4e00-\u9fffA-Za-z0-9]{2,20}?)(?P<link>之后|以后|后来|之前|以前|的时候|期间)"
)


def _clean(text: str) -> str:
    return " ".join(text.split()).strip(" ,;")


def _time_spans(text: str) -> list[tuple[int, int]]:
    """Where the text names a time; the moment is irrelevant, only the spans are used."""
    return [(r.start, r.end) for r in time_references(text, _ANY_MOMENT)]


def _overlaps_time(text: str, start: int, end: int) -> bool:
    """True when a clause is (part of) a time ("before 10 May 2023"): the time parser takes it."""
    return any(s < end and start < e for s, e in _time_spans(text))


def _names(query: str) -> list[str]:
    match = _NAME_PAIR.search(query)
    if match is None or _QUESTION_WORD.match(match.group("a")):
        return []
    parts = []
    for name in ("a", "b"):
        replaced = query[: match.start()] + match.group(name) + query[match.end() :]
        parts.append(_clean(_JOINT.sub("", replaced)))
    return parts


def _coordinated(query: str) -> list[str]:
    """ "What do my cat and dog both eat?" -> the cat's and the dog's question."""
    if not _JOINT_ANY.search(query):
        return []
    match = _AND.search(query)
    if match is None:
        return []
    left, right = query[: match.start()].split(), query[match.end() :].split()
    if not left or not right:
        return []
    # The conjuncts are the words either side of "and": swap each into the other's place.
    first = " ".join([*left, *right[1:]])
    second = " ".join([*left[:-1], *right])
    return [_clean(_JOINT.sub("", first)), _clean(_JOINT.sub("", second))]


def _event_join(query: str) -> list[str]:
    match = _EVENT_JOIN.search(query)
    if match is None or _overlaps_time(query, match.start("link"), match.end("event")):
        return []
    main = _clean(query[: match.start()] + query[match.end() :])
    event = _clean(match.group("event"))
    if len(main.split()) < 3:
        return []
    return [main, event]


def _zh(query: str) -> list[str]:
    match = _ZH_NAME_PAIR.search(query)
    if match is not None:
        rest = query[match.end() :]
        rest = _ZH_JOINT.sub("", rest, count=1)
        head = query[: match.start()]
        return [_clean(head + match.group("a") + rest), _clean(head + match.group("b") + rest)]
    join = _ZH_EVENT_JOIN.search(query)
    if join is not None and not _overlaps_time(query, join.start(), join.end()):
        event = join.group("event")
        main = _clean(query[: join.start()] + query[join.end() :])
        if len(main) >= 3:
            return [main, event]
    return []


def decompose(query: str) -> list[str]:
    """The part questions of a question that joins two facts, or ``[]`` (most questions)."""
    for rule in (_names, _event_join, _coordinated, _zh):
        parts = [part for part in rule(query) if part and part != query]
        if len(parts) >= 2:
            return list(dict.fromkeys(parts))
    return []
