"""Both halves of the generalisation suite through the real stack, reported as pass rates.

One stack runs every scenario of ``scenarios/generalisation/`` once, the tuning half and the
held-out half together. The test prints the table per suite (and per category and language within
each) and writes the JSON report to ``$HINDSIGHT_REPORT_DIR/generalisation.json`` (default: a
temporary directory): the tuning half with its failures, the held-out half with its counts only.
No held-out failure is printed or written anywhere (docs/SCENARIOS.md, "Generalisation suite").

It asserts only that the suite ran and produced a summary for both halves in both languages.
"""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from pathlib import Path

import pytest

from bench.scenarios.format import load_scenarios
from bench.scenarios.report import LANGUAGES, suite_report, write_report
from bench.scenarios.runner import run_against_stack
from pipeline.runtime.settings import Settings

pytestmark = pytest.mark.integration

HALVES = ("tune", "test")
SUITE = load_scenarios([Path(__file__).resolve().parents[2] / "scenarios" / "generalisation"])
CONCURRENCY = int(os.environ.get("HINDSIGHT_SCENARIO_CONCURRENCY", "4"))
TIMEOUT_S = float(os.environ.get("HINDSIGHT_SCENARIO_TIMEOUT_S", "240"))


async def test_both_halves_run_and_are_summarised(kafka_bootstrap: str, tmp_path: Path) -> None:
    run = uuid.uuid4().hex[:8]
    settings = Settings(
        data_dir=tmp_path / "stack",
        bootstrap=kafka_bootstrap,
        topic_prefix=f"gen{run}.",
        app_id=f"hindsight-generalisation-{run}",
    )
    # echo=False: the per-scenario PASS/FAIL lines would name the held-out half's failures.
    results = await run_against_stack(
        SUITE, settings, concurrency=CONCURRENCY, timeout=TIMEOUT_S, echo=False
    )
    report = Path(os.environ.get("HINDSIGHT_REPORT_DIR") or tmp_path) / "generalisation.json"
    write_report(report, results, withhold={"test"})
    print("\n" + suite_report(results) + f"\n\nreport: {report}")

    # No assertion on the pass rates. The targets (>= 95 % on the held-out half, English and
    # Chinese each) are benchmarks read from the report, not tests: a threshold here would make
    # the held-out half something to tune against until CI turns green.
    payload = json.loads(report.read_text(encoding="utf-8"))
    expected = Counter((item.suite, item.language) for item in SUITE)
    assert payload["withheld_suites"] == ["test"]
    for half in HALVES:
        for language in LANGUAGES:
            counted = payload["summary"][half][language]
            assert counted["total"] == expected[(half, language)] > 0, (half, language)
            assert counted["rate"] is not None, (half, language)
