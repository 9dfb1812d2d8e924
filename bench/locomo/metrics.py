"""Pure retrieval metrics over ranked dialogue ids; every method is scored by this code."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

KS = (5, 10)
SESSION_K = 5
CONTEXT_K = 10
CONTEXT_TOKENS = f"context_tokens@{CONTEXT_K}"

METRIC_NAMES: tuple[str, ...] = (
    *(f"recall_frac@{k}" for k in KS),
    *(f"recall_all@{k}" for k in KS),
    *(f"recall_any@{k}" for k in KS),
    "ndcg@10",
    f"session_recall_all@{SESSION_K}",
    CONTEXT_TOKENS,
)

TOKENIZER_NOTE = (
    "context tokens: whitespace-separated words, each CJK character counted as one token"
)

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\s{_CJK}]+")


@dataclass(frozen=True)
class RankedResult:
    """What a method returned for one question, mapped to dialogue ids.

    ``dialogue_ids`` is ranked, without repeats; ``context_text`` is the text the method would
    hand to an LLM for its top ``CONTEXT_K`` dialogue ids.
    """

    dialogue_ids: list[str]
    context_text: str = ""


@dataclass(frozen=True)
class QuestionScore:
    sample_id: str
    category: int
    scores: dict[str, float] = field(default_factory=dict)


def flatten_provenance(groups: Iterable[Sequence[str]], k: int | None = None) -> list[str]:
    """Ranked memories -> their source dialogue ids in order, repeats dropped, cut at k.

    A memory built from eight turns takes eight of the k places: a method is not rewarded for
    packing many turns into one memory.
    """
    seen: dict[str, None] = {}
    for group in groups:
        for dia_id in group:
            if k is not None and len(seen) >= k:
                return list(seen)
            seen.setdefault(dia_id, None)
    return list(seen)[:k] if k is not None else list(seen)


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def _hits(ranked: Sequence[str], gold: set[str], k: int) -> int:
    return sum(1 for dia_id in ranked[:k] if dia_id in gold)


def recall_frac(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    gold_set = set(gold)
    return _hits(ranked, gold_set, k) / len(gold_set) if gold_set else 0.0


def recall_all(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    gold_set = set(gold)
    return float(bool(gold_set) and gold_set <= set(ranked[:k]))


def recall_any(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    return float(_hits(ranked, set(gold), k) > 0)


def ndcg(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """Binary relevance; the ideal ranking puts min(|gold|, k) relevant ids first."""
    gold_set = set(gold)
    if not gold_set:
        return 0.0
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:k]) if d in gold_set)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(gold_set), k)))
    return dcg / ideal


def session_of(dia_id: str) -> str:
    """'D3:14' -> 'D3'."""
    return dia_id.split(":", 1)[0]


def session_recall_all(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """All gold sessions among the top-k sessions, sessions ranked by first appearance."""
    sessions = list(dict.fromkeys(session_of(d) for d in ranked))[:k]
    gold_sessions = {session_of(d) for d in gold}
    return float(bool(gold_sessions) and gold_sessions <= set(sessions))


def score_question(result: RankedResult, gold: Sequence[str]) -> dict[str, float]:
    ranked = list(dict.fromkeys(result.dialogue_ids))  # defensive: repeats would inflate hits
    scores: dict[str, float] = {}
    for k in KS:
        scores[f"recall_frac@{k}"] = recall_frac(ranked, gold, k)
        scores[f"recall_all@{k}"] = recall_all(ranked, gold, k)
        scores[f"recall_any@{k}"] = recall_any(ranked, gold, k)
    scores["ndcg@10"] = ndcg(ranked, gold, 10)
    scores[f"session_recall_all@{SESSION_K}"] = session_recall_all(ranked, gold, SESSION_K)
    scores[CONTEXT_TOKENS] = float(count_tokens(result.context_text))
    return scores


def _mean(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    summary: dict[str, float] = {"n": len(rows)}
    for name in METRIC_NAMES:
        values = [row[name] for row in rows if name in row]
        summary[name] = sum(values) / len(values) if values else 0.0
    return summary


def aggregate(scored: Sequence[QuestionScore], adversarial: int = 5) -> dict[str, object]:
    """Average per question: overall, overall without the adversarial category, per category."""
    by_category: dict[str, dict[str, float]] = {}
    for category in sorted({s.category for s in scored}):
        by_category[str(category)] = _mean([s.scores for s in scored if s.category == category])
    return {
        "overall": _mean([s.scores for s in scored]),
        "overall_excl_adversarial": _mean([s.scores for s in scored if s.category != adversarial]),
        "by_category": by_category,
    }
