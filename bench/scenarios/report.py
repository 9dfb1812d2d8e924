"""Reporting a run: the pass-rate table and the JSON report. Pure apart from writing the file."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from bench.scenarios.format import CATEGORIES
from bench.scenarios.runner import ScenarioResult


def summary_table(results: Sequence[ScenarioResult]) -> str:
    """Pass rate per category, split by language, with a total row."""
    languages = sorted({result.language for result in results})
    categories = [c for c in CATEGORIES if any(r.category == c for r in results)]
    categories += sorted({r.category for r in results} - set(categories))

    def cell(selected: Sequence[ScenarioResult]) -> str:
        return f"{sum(r.passed for r in selected)}/{len(selected)}" if selected else "-"

    def rate(selected: Sequence[ScenarioResult]) -> str:
        return (
            f"{100.0 * sum(r.passed for r in selected) / len(selected):5.1f}%"
            if selected
            else "    -"
        )

    header = ["category", *languages, "total", "pass rate"]
    rows = []
    for category in [*categories, "TOTAL"]:
        chosen = [r for r in results if category in {"TOTAL", r.category}]
        by_language = [cell([r for r in chosen if r.language == lang]) for lang in languages]
        rows.append([category, *by_language, cell(chosen), rate(chosen)])
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        first = row[0].ljust(widths[0])
        return "  ".join(
            [first, *(value.rjust(width) for value, width in zip(row[1:], widths[1:], strict=True))]
        )

    rule = "-" * len(line(header))
    return "\n".join([line(header), rule, *(line(row) for row in rows[:-1]), rule, line(rows[-1])])


def write_report(path: Path, results: Sequence[ScenarioResult]) -> None:
    payload = {
        "passed": sum(r.passed for r in results),
        "total": len(results),
        "scenarios": [
            {
                "name": r.name,
                "category": r.category,
                "language": r.language,
                "path": r.path,
                "passed": r.passed,
                "failures": r.failures,
                "seconds": round(r.seconds, 3),
            }
            for r in results
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
