"""Reporting a run: pass-rate tables per suite and the JSON report.

Every figure is passed scenarios over a selection (suite, category, language), counted from the
same results, so the printed tables and the report's ``summary`` always agree. Pure apart from
writing the report file.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, TypedDict, get_args

from bench.scenarios.format import CATEGORIES, SUITES
from bench.scenarios.runner import ScenarioResult
from bench.scenarios.steps import Language

# Every suite's summary carries every language, so its keys are the same whatever ran.
LANGUAGES: tuple[str, ...] = get_args(Language)
SUITE_LABELS = {
    "team": "the team's suite, scenarios/*.yaml",
    "tune": "generalisation, tuning half",
    "test": "generalisation, held-out half",
}


class PassCount(TypedDict):
    passed: int
    total: int
    rate: float | None  # passed / total to 4 places; None when no scenario of the kind ran


def pass_count(results: Sequence[ScenarioResult]) -> PassCount:
    passed = sum(result.passed for result in results)
    total = len(results)
    return {"passed": passed, "total": total, "rate": round(passed / total, 4) if total else None}


def _in_order(found: Collection[str], known: Sequence[str]) -> list[str]:
    """``found`` in the order of ``known``, then any unknown ones sorted."""
    return [item for item in known if item in found] + sorted(set(found) - set(known))


def _by_language(results: Sequence[ScenarioResult]) -> dict[str, PassCount]:
    counts = {
        language: pass_count([r for r in results if r.language == language])
        for language in LANGUAGES
    }
    return {**counts, "total": pass_count(results)}


def summarise(results: Sequence[ScenarioResult]) -> dict[str, dict[str, Any]]:
    """Pass counts per suite that ran: ``summary[suite][language]``, ``summary[suite]["total"]``
    and ``summary[suite]["categories"][category][language | "total"]``, each a ``PassCount``."""
    summary: dict[str, dict[str, Any]] = {}
    for suite in _in_order({r.suite for r in results}, SUITES):
        chosen = [r for r in results if r.suite == suite]
        categories = _in_order({r.category for r in chosen}, CATEGORIES)
        summary[suite] = {
            **_by_language(chosen),
            "categories": {
                category: _by_language([r for r in chosen if r.category == category])
                for category in categories
            },
        }
    return summary


def _cell(results: Sequence[ScenarioResult]) -> str:
    return f"{sum(r.passed for r in results)}/{len(results)}" if results else "-"


def _rate(results: Sequence[ScenarioResult]) -> str:
    if not results:
        return "    -"
    return f"{100.0 * sum(r.passed for r in results) / len(results):5.1f}%"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], total: Sequence[str]) -> str:
    """Columns aligned (the first to the left), a rule under the header, the total row last."""
    every = [header, *rows, total] if total else [header, *rows]
    widths = [max(len(row[i]) for row in every) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        first = row[0].ljust(widths[0])
        rest = (value.rjust(width) for value, width in zip(row[1:], widths[1:], strict=True))
        return "  ".join([first, *rest])

    rule = "-" * len(line(header))
    lines = [line(header), rule, *(line(row) for row in rows)]
    return "\n".join([*lines, rule, line(total)] if total else lines)


def _row(label: str, results: Sequence[ScenarioResult], languages: Sequence[str]) -> list[str]:
    by_language = [_cell([r for r in results if r.language == lang]) for lang in languages]
    return [label, *by_language, _cell(results), _rate(results)]


def summary_table(results: Sequence[ScenarioResult]) -> str:
    """Pass rate per category, split by language, with a total row."""
    languages = sorted({result.language for result in results})
    categories = _in_order({r.category for r in results}, CATEGORIES)
    rows = [_row(c, [r for r in results if r.category == c], languages) for c in categories]
    header = ["category", *languages, "total", "pass rate"]
    return _table(header, rows, _row("TOTAL", results, languages))


def suite_table(results: Sequence[ScenarioResult]) -> str:
    """Pass rate per suite, split by language (no total: the halves are read apart)."""
    languages = sorted({result.language for result in results})
    suites = _in_order({r.suite for r in results}, SUITES)
    rows = [_row(s, [r for r in results if r.suite == s], languages) for s in suites]
    return _table(["suite", *languages, "total", "pass rate"], rows, ())


def suite_report(results: Sequence[ScenarioResult]) -> str:
    """The table per suite, then each suite's table by category and language."""
    blocks = [suite_table(results)]
    for suite in _in_order({r.suite for r in results}, SUITES):
        label = SUITE_LABELS.get(suite)
        heading = f"suite {suite}" + (f" ({label})" if label else "")
        blocks.append(heading + "\n" + summary_table([r for r in results if r.suite == suite]))
    return "\n\n".join(blocks)


def report_payload(
    results: Sequence[ScenarioResult], *, withhold: Collection[str] = ()
) -> dict[str, Any]:
    """The JSON report: totals, ``summary`` (see ``summarise``) and one entry per scenario.

    Scenarios of a suite in ``withhold`` are listed without their outcome (no ``passed``, no
    ``failures``): a held-out half is reported by its rates only, never by which scenario failed.
    """
    withheld = _in_order({r.suite for r in results} & set(withhold), SUITES)
    scenarios: list[dict[str, Any]] = []
    for r in results:
        entry: dict[str, Any] = {
            "name": r.name,
            "suite": r.suite,
            "category": r.category,
            "language": r.language,
            "path": r.path,
        }
        if r.suite not in withheld:
            entry |= {"passed": r.passed, "failures": r.failures}
        scenarios.append(entry | {"seconds": round(r.seconds, 3)})
    return {
        "passed": sum(r.passed for r in results),
        "total": len(results),
        "summary": summarise(results),
        "withheld_suites": withheld,
        "scenarios": scenarios,
    }


def write_report(
    path: Path, results: Sequence[ScenarioResult], *, withhold: Collection[str] = ()
) -> None:
    payload = report_payload(results, withhold=withhold)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
