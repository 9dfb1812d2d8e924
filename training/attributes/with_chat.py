"""Statements with chat around them: how the attribute model reads a value said in passing.

Users rarely state a value alone. "ok after that 11h flight I'm done climbing over two strangers
to pee 😂 aisle all the way from here on" gives the seat preference, 之前那个牌子的粮真受不了了，
…，主粮已经全面切到渴望六种鱼了 the cat's food brand; the rest of the turn is chatter or another
event. The model reads one sentence vector per turn, and the chatter moves that vector away from
the value's attribute.

:func:`with_chat` puts each statement of the attribute corpus beside one line that gives no
attribute's value, in the statement's language: two in three beside small talk of the turn
classifier's corpus (small talk, fillers, greetings, thanks, feelings), one in three beside a
``none`` statement of the attribute corpus (a one-off event, an opinion). Which line, which
side, and the joint are drawn from a hash of the statement's id, so the set is the same on
every run. The label stays the statement's attribute: what the turn gives a value of.

``training.attributes.evaluate`` builds it from the held-back quarter of both corpora (neither
the statement nor the chat line was ever trained on) and scores the shipped model on it beside
the plain held-back quarter.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace

from pipeline.models.attributes import NONE_LABEL
from training.attributes.corpus import LANGS, Example
from training.turn_classifier.corpus_stats import Turn

# The turn classifier's labels for lines that give no value of anything.
CHAT_LABELS = frozenset({"small_talk", "filler", "greeting", "thanks", "emotion"})
# How the two lines are run together, as chat messages run them.
_JOINTS = {"en": (", ", " ", ". ", " 😂 ", " - "), "zh": ("，", "。", " ", "～", "！")}


def _draw(key: str) -> int:
    return int.from_bytes(hashlib.sha256(f"hindsight-with-chat/{key}".encode()).digest()[:8])


def chat_lines(turns: Sequence[Turn], statements: Sequence[Example]) -> dict[str, list[list[str]]]:
    """Per language: [small talk lines, ``none`` statements]. Code-switched small talk counts
    for both languages."""
    lines: dict[str, list[list[str]]] = {lang: [[], []] for lang in LANGS}
    for turn in turns:
        if turn.label in CHAT_LABELS:
            for lang in LANGS if turn.lang == "mixed" else (turn.lang,):
                lines[lang][0].append(turn.text)
    for example in statements:
        if example.attribute == NONE_LABEL and example.kind == "statement":
            lines[example.lang][1].append(example.text)
    return lines


def with_chat(statements: Sequence[Example], turns: Sequence[Turn]) -> list[Example]:
    """Every statement that gives an attribute's value, said with one chat line before or after
    it (ids ``<id>+chat``)."""
    lines = chat_lines(turns, statements)
    said: list[Example] = []
    for example in statements:
        if example.kind != "statement" or example.attribute == NONE_LABEL:
            continue
        draw = _draw(example.id)
        pool = lines[example.lang][0 if draw % 3 else 1]
        if not pool:
            continue
        other = pool[(draw // 3) % len(pool)]
        joint = _JOINTS[example.lang][(draw // 9) % len(_JOINTS[example.lang])]
        first, second = (other, example.text) if (draw // 45) % 2 else (example.text, other)
        said.append(replace(example, id=f"{example.id}+chat", text=f"{first}{joint}{second}"))
    return said
