"""Leave-one-conversation-out evaluation: every choice is made on four conversations, scored on
the fifth.

A *candidate* is one complete configuration (weights, thresholds, which paths are on) whose
per-question scores are known for every conversation. For each held-out conversation the
candidate with the best pooled score on the other conversations is chosen (ties: the earlier
candidate, so the baseline wins a tie), and only its score on the held-out conversation counts.
Pure functions over ``QuestionScore`` lists; nothing here reads questions, answers or evidence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.locomo.dataset import ADVERSARIAL, CATEGORY_NAMES
from bench.locomo.metrics import QuestionScore

METRIC = "recall_all@10"


def pooled_mean(
    scored: Sequence[QuestionScore],
    samples: frozenset[str] | set[str],
    metric: str = METRIC,
    exclude: frozenset[int] = frozenset({ADVERSARIAL}),
    category: int | None = None,
) -> tuple[float | None, int]:
    """Mean of ``metric`` over the questions of ``samples`` (pooled), and how many there were."""
    values = [
        s.scores[metric]
        for s in scored
        if s.sample_id in samples
        and s.category not in exclude
        and (category is None or s.category == category)
    ]
    return (sum(values) / len(values) if values else None), len(values)


@dataclass(frozen=True)
class FoldResult:
    held_out: str
    chosen: str
    n: int
    score: float
    # The chosen candidate's pooled score on the other conversations (what it was chosen by).
    train_score: float
    per_category: dict[str, float | None] = field(default_factory=dict)


def samples_of(scored: Sequence[QuestionScore]) -> list[str]:
    return sorted({s.sample_id for s in scored})


def leave_one_out(
    scored: Mapping[str, Sequence[QuestionScore]],
    candidates: Sequence[str],
    metric: str = METRIC,
    exclude: frozenset[int] = frozenset({ADVERSARIAL}),
) -> list[FoldResult]:
    """One fold per conversation: choose on the others, score on it."""
    if not candidates:
        raise ValueError("candidates: at least one configuration is needed")
    missing = [c for c in candidates if c not in scored]
    if missing:
        raise ValueError(f"candidates: no scores for {missing}")
    samples = samples_of(scored[candidates[0]])
    folds: list[FoldResult] = []
    for held_out in samples:
        training = set(samples) - {held_out}
        best_name, best_train = candidates[0], -1.0
        for name in candidates:
            train, _ = pooled_mean(scored[name], training, metric, exclude)
            if train is not None and train > best_train + 1e-12:
                best_name, best_train = name, train
        folds.append(
            fold_result(scored[best_name], held_out, best_name, best_train, metric, exclude)
        )
    return folds


def fold_result(
    scored: Sequence[QuestionScore],
    held_out: str,
    chosen: str,
    train_score: float,
    metric: str = METRIC,
    exclude: frozenset[int] = frozenset({ADVERSARIAL}),
) -> FoldResult:
    """How the configuration chosen for a fold scores on its held-out conversation."""
    score, n = pooled_mean(scored, {held_out}, metric, exclude)
    categories = sorted({s.category for s in scored if s.category not in exclude})
    per_category = {
        str(c): pooled_mean(scored, {held_out}, metric, exclude, c)[0] for c in categories
    }
    return FoldResult(held_out, chosen, n, score or 0.0, round(train_score, 6), per_category)


def _spread(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "min": None, "max": None, "spread": None}
    return {
        "mean": sum(values) / len(values),
        "min": min(values),
        "max": max(values),
        "spread": max(values) - min(values),
    }


def summarise(folds: Sequence[FoldResult]) -> dict[str, Any]:
    """Stable keys: ``folds``, ``mean`` (over folds), ``min``, ``max``, ``spread``, ``pooled``
    (over all held-out questions), ``per_category`` ({category: mean/min/max/spread})."""
    scores = [f.score for f in folds]
    total = sum(f.n for f in folds)
    categories = sorted({c for f in folds for c in f.per_category}, key=int)
    per_category = {
        c: _spread([v for f in folds if (v := f.per_category.get(c)) is not None])
        for c in categories
    }
    return {
        "folds": [
            {
                "held_out": f.held_out,
                "chosen": f.chosen,
                "n": f.n,
                "score": f.score,
                "train_score": f.train_score,
                "per_category": f.per_category,
            }
            for f in folds
        ],
        **_spread(scores),
        "pooled": (sum(f.score * f.n for f in folds) / total) if total else None,
        "per_category": per_category,
    }


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def render_folds(title: str, rows: Mapping[str, Mapping[str, Any]]) -> str:
    """Markdown: one table per method, folds as rows, overall and categories as columns."""
    lines: list[str] = []
    for method, summary in rows.items():
        categories = list(summary["per_category"])
        header = ["held-out", "chosen", "n", f"{METRIC} excl. 5"] + [
            f"{c} {CATEGORY_NAMES.get(int(c), '')}".strip() for c in categories
        ]
        lines += [f"{title}: **{method}**", ""]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join("---" for _ in header) + "|")
        for fold in summary["folds"]:
            lines.append(
                "| "
                + " | ".join(
                    [fold["held_out"], fold["chosen"], str(fold["n"]), _cell(fold["score"])]
                    + [_cell(fold["per_category"].get(c)) for c in categories]
                )
                + " |"
            )
        for stat in ("mean", "min", "spread"):
            lines.append(
                "| "
                + " | ".join(
                    [stat, "", "", _cell(summary[stat])]
                    + [_cell(summary["per_category"][c][stat]) for c in categories]
                )
                + " |"
            )
        lines.append("")
    return "\n".join(lines)
