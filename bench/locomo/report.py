"""Render results.json content as markdown: a side-by-side summary and full per-scope tables."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.locomo.dataset import CATEGORY_NAMES
from bench.locomo.metrics import CONTEXT_TOKENS, METRIC_NAMES, TOKENIZER_NOTE

SUMMARY_METRICS = ("recall_frac@10", "recall_all@5", "recall_all@10", "ndcg@10", CONTEXT_TOKENS)


def _format(name: str, value: object) -> str:
    if not isinstance(value, int | float):
        return "-"
    if name == "n":
        return str(int(value))
    if name == CONTEXT_TOKENS:
        return f"{value:.1f}"
    return f"{value:.3f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _scopes(results: Mapping[str, Any]) -> list[tuple[str, str, str | None]]:
    """(title, scope key, category key) for every block present in the results."""
    scopes: list[tuple[str, str, str | None]] = [
        ("Overall excluding adversarial (category 5)", "overall_excl_adversarial", None),
        ("Overall", "overall", None),
    ]
    categories: set[str] = set()
    for method in results["methods"].values():
        categories |= set(method.get("by_category", {}))
    for category in sorted(categories, key=int):
        name = CATEGORY_NAMES.get(int(category), "unknown")
        scopes.append((f"Category {category} ({name})", "by_category", category))
    return scopes


def _block(method: Mapping[str, Any], scope: str, category: str | None) -> Mapping[str, Any]:
    block = method.get(scope, {})
    return block.get(category, {}) if category is not None else block


def render_summary(results: Mapping[str, Any]) -> str:
    """Methods as rows, headline metrics as columns, excluding and including category 5."""
    methods: Mapping[str, Any] = results["methods"]
    lines: list[str] = []
    for title, scope in (
        ("excluding adversarial", "overall_excl_adversarial"),
        ("all categories", "overall"),
    ):
        lines.append(f"LoCoMo retrieval, {title}:")
        rows = [
            [name, _format("n", block.get("n"))]
            + [_format(metric, block.get(metric)) for metric in SUMMARY_METRICS]
            for name, method in methods.items()
            for block in [_block(method, scope, None)]
        ]
        lines += [*_table(["method", "n", *SUMMARY_METRICS], rows), ""]
    categories = [s for s in _scopes(results) if s[2] is not None]
    lines.append("recall_all@10 by category:")
    rows = [
        [name]
        + [
            _format("recall_all@10", _block(method, scope, cat).get("recall_all@10"))
            for _, scope, cat in categories
        ]
        for name, method in methods.items()
    ]
    lines += _table(["method"] + [f"cat {cat}" for _, _, cat in categories], rows)
    return "\n".join(lines)


def render_markdown(results: Mapping[str, Any]) -> str:
    methods: Mapping[str, Any] = results["methods"]
    meta: Mapping[str, Any] = results.get("meta", {})
    lines = ["# LoCoMo retrieval evaluation", ""]
    if meta:
        lines.append(
            f"Data: `{meta.get('data')}` — {meta.get('conversations')} conversations, "
            f"{meta.get('turns')} turns, {meta.get('questions')} questions "
            f"({meta.get('skipped_questions')} skipped for empty evidence)."
        )
        seconds = meta.get("seconds", {})
        if seconds:
            lines.append(
                "Runtime (s): " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()) + "."
            )
        lines.append("")
    lines += [
        "Baselines index each turn as `speaker: text` (image captions included), like Hindsight. "
        "Memories are flattened into their source dialogue ids in rank order, repeats dropped, "
        "then cut at k. nDCG uses binary relevance; session recall ranks sessions by first "
        f"appearance. {TOKENIZER_NOTE.capitalize()}, over the text a method returns for its "
        "top-10 dialogue ids.",
        "",
        "## Summary",
        "",
        render_summary(results),
        "",
    ]
    for title, scope, category in _scopes(results):
        rows = [
            [metric]
            + [_format(metric, _block(m, scope, category).get(metric)) for m in methods.values()]
            for metric in ("n", *METRIC_NAMES)
        ]
        lines += [f"## {title}", "", *_table(["metric", *methods], rows), ""]
    return "\n".join(lines)
