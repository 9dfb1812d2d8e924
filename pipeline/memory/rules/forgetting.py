"""Forget by query: which memories a request like "forget my home address" means.

The one copy of this rule. It runs inside consolidation, at the forget command's place in the log,
against the bank as it stands there, with the query vector that ``prepare`` computed; so a forget
sent right after a retain sees that retain, and replay resolves it identically (I2). Clients,
HTTP and MCP only publish the query.

Relevance mixes meaning and words: 0.6 × cosine + 0.4 × the share of the query's content words
(Chinese: character pairs) the memory contains. A memory that shares none of the query's words
has only the cosine, and it counts as much as the encoder read of the query (``reading``,
``encoders.known_share``): MiniLM reads most Chinese characters as one unknown piece, and its
cosines between Chinese texts that share nothing run 0.6-0.9, so "忘掉我的车牌号", with no plate
stored, forgot every Chinese memory of the bank. Scaling every cosine, or moving its weight to
the words, kept the bank but forgot 2 of the 34 memories meant in the Chinese cases of a fresh probe
(``bench/forget_queries``, tune half): its requests are paraphrases that share a pair or two.
Forgetting is destructive, so it takes the best match when it is relevant at all, and every other
memory close to it — superseded and cold ones too, since an old value is still the thing the
user asked to forget.

A request in other words than the memory's ("please drop my home address" for "I live at 14
Alder Crescent") shares no word with it, and MiniLM's cosine between such paraphrases is low
(0.3), so its relevance stays under the floor although nothing else in the bank comes close.
Such a best match is taken alone when it stands clear of the runner-up among at least two
others: a bank with nothing on the topic has no clear best, and the more memories a bank holds,
the closer its runner-up, so a large bank needs the floor.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pipeline.memory.rules.text import normalise
from schemas.memory import MemoryRecord

DENSE_WEIGHT = 0.6
LEXICAL_WEIGHT = 0.4
MIN_RELEVANCE = 0.3  # below this the best match is not what the user meant: forget nothing
NEAR_BEST = 0.15  # others within this of the best go too
# A best match between these two floors is taken alone when it leads the runner-up by CLEAR_LEAD
# and the bank offers at least CLEAR_AMONG candidates (bench/forget_queries, tune half).
CLEAR_RELEVANCE = 0.2
CLEAR_LEAD = 0.06
CLEAR_AMONG = 3

_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
# Words that say "forget" or "my" rather than what to forget.
_STOPWORDS = frozenset(
    {
        "a",
        "an",
        "the",
        "my",
        "me",
        "i",
        "i'm",
        "im",
        "our",
        "we",
        "you",
        "your",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "am",
        "to",
        "of",
        "in",
        "on",
        "at",
        "for",
        "and",
        "or",
        "it",
        "its",
        "that",
        "this",
        "these",
        "those",
        "please",
        "forget",
        "about",
        "what",
        "which",
        "do",
        "does",
        "did",
        "any",
        "all",
        "remove",
        "delete",
        "erase",
        "的",
        "了",
        "我",
        "我的",
        "请",
        "忘掉",
        "忘记",
        "删除",
        "把",
    }
)


@dataclass(frozen=True)
class ForgetMatch:
    memory_id: str
    relevance: float


def content_terms(text: str) -> set[str]:
    """Lower-case content words, plus character pairs of Chinese runs (no dictionary needed)."""
    folded = normalise(text)
    terms = {w for w in _WORD.findall(folded) if w not in _STOPWORDS}
    for run in _CJK_RUN.findall(folded):
        if len(run) == 1:
            terms.add(run)
        terms.update(run[i : i + 2] for i in range(len(run) - 1))
    return {t for t in terms if t not in _STOPWORDS}


def lexical_overlap(query_terms: set[str], text: str) -> float:
    if not query_terms:
        return 0.0
    return len(query_terms & content_terms(text)) / len(query_terms)


def forget_matches(
    records: Iterable[MemoryRecord],
    query: str,
    similarities: Mapping[str, float],
    *,
    include_forgotten: bool = False,
    reading: float = 1.0,
) -> list[ForgetMatch]:
    """The memories a forget-by-query takes, best first (ties broken by id, so stable).

    ``similarities`` maps memory id to the cosine between the query and the memory's vector;
    ``reading`` is the share of the query the encoder read: the cosine of a memory that shares
    none of the query's words counts that much.
    Forgotten memories are candidates only for an erase (forgetting them again changes nothing).
    """
    terms = content_terms(query)

    def relevance(record: MemoryRecord) -> float:
        words = lexical_overlap(terms, record.content)
        meaning = max(0.0, similarities.get(record.id, 0.0)) * (1.0 if words else reading)
        return DENSE_WEIGHT * meaning + LEXICAL_WEIGHT * words

    scored = sorted(
        (
            ForgetMatch(record.id, relevance(record))
            for record in records
            if include_forgotten or record.status != "forgotten"
        ),
        key=lambda match: (-match.relevance, match.memory_id),
    )
    if not scored:
        return []
    best = scored[0].relevance
    if best >= MIN_RELEVANCE:
        floor = max(MIN_RELEVANCE, best - NEAR_BEST)
        return [match for match in scored if match.relevance >= floor]
    clear = len(scored) >= CLEAR_AMONG and best - scored[1].relevance >= CLEAR_LEAD
    return scored[:1] if clear and best >= CLEAR_RELEVANCE else []
