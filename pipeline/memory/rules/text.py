"""Text helpers shared by the decision logic: language, sentences, normalisation."""

from __future__ import annotations

import functools
import re
import unicodedata

import regex

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？；;])\s+|(?<=[。！？；])")
_SPACES = re.compile(r"\s+")
_WHITESPACE = re.compile(r"\s")  # what str.isspace() calls a space, one per match
_PUNCT_EDGES = re.compile(r"^[\W_]+|[\W_]+$", re.UNICODE)
_LATIN_WORD_OR_NUMBER = re.compile(r"[^\W\d_\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+(?:'\w+)?|\d+")


def cjk_ratio(text: str) -> float:
    """The share of CJK characters among the non-space ones (counted by the regex engine)."""
    letters = len(text) - len(_WHITESPACE.findall(text))
    if not letters:
        return 0.0
    return len(_CJK.findall(text)) / letters


# Emoji, with their skin tones, flags, keycaps and joiners. The encoder's vocabulary has none of
# them (each is one [UNK] token), and the turn classifier's corpus has five, all small talk: an
# emoji added to a statement ("climbing course wrapped up yesterday, got my belay certificate 🙌")
# read as chatter, and the gate filtered 11 of the update-pair corpus' 12 statements with one
# (tune part). The memory keeps them; the encoders and the classifier's features do not read them.
_EMOJI = regex.compile(
    r"[\p{Emoji_Presentation}\p{Emoji_Modifier}\p{Regional_Indicator}]"
    r"|\p{Extended_Pictographic}\ufe0f|[\u200d\ufe0f\u20e3]"
)


def without_emoji(text: str) -> str:
    """``text`` with its emoji taken out (and the spaces they leave closed up)."""
    cleaned = _EMOJI.sub("", text)
    return text if cleaned == text else " ".join(cleaned.split())


@functools.lru_cache(maxsize=8192)
def language_of(text: str) -> str:
    """'zh' when a meaningful share of the characters are CJK, else 'en'.

    Cached: the update rule asks it of the same memories' frames for every new statement.
    """
    return "zh" if cjk_ratio(text) >= 0.2 else "en"


def word_count(text: str) -> int:
    """Words in a turn: Latin-script words and numbers, and a word per two CJK characters
    (a Chinese word is about two characters long), so both languages count alike."""
    folded = unicodedata.normalize("NFKC", text)
    return len(_LATIN_WORD_OR_NUMBER.findall(folded)) + (len(_CJK.findall(folded)) + 1) // 2


def sentences(text: str) -> list[str]:
    parts = [part.strip() for part in _SENTENCE_END.split(text)]
    return [part for part in parts if part]


def normalise(text: str) -> str:
    """Canonical form for content addressing and duplicate checks."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _SPACES.sub(" ", folded).strip()


def strip_edges(text: str) -> str:
    return _PUNCT_EDGES.sub("", text).strip()


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)].rstrip() + "…"
