"""Suites: derived from where a file sits, selectable, and reported apart (the held-out half by
its rates only). No broker: results are built by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.scenarios.cli import finish
from bench.scenarios.format import (
    ScenarioFormatError,
    load_scenarios,
    parse_scenario_file,
    select,
    suite_of,
)
from bench.scenarios.report import report_payload, suite_report, summarise
from bench.scenarios.runner import ScenarioResult

ROOT = Path(__file__).resolve().parents[2]

ONE_SCENARIO = """
category: {category}
scenarios:
  - name: {name}
    language: {language}
    description: a scenario placed to test suites
    steps:
      - retain: "My locker code is 4417"
      - recall: {{query: "locker code", contains: "4417"}}
"""


def _write(folder: Path, name: str, *, category: str = "decay", language: str = "en") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{category}.yaml"
    path.write_text(
        ONE_SCENARIO.format(category=category, name=name, language=language), encoding="utf-8"
    )
    return path


# ------------------------------------------------------------------------------------------
# Deriving the suite from the path
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "suite"),
    [
        ("scenarios/decay.yaml", "team"),
        ("elsewhere/mine.yaml", "team"),
        ("scenarios/generalisation/tune/decay.yaml", "tune"),
        ("scenarios/generalisation/test/decay.yaml", "test"),
        ("/abs/generalisation/test/x.yml", "test"),
        ("scenarios/generalisation/tune/../test/decay.yaml", "test"),
    ],
)
def test_suite_follows_from_the_path(path: str, suite: str) -> None:
    assert suite_of(path) == suite


@pytest.mark.parametrize(
    "path",
    [
        "scenarios/generalisation/decay.yaml",
        "scenarios/generalisation/held/decay.yaml",
        "scenarios/generalisation/tune/deeper/decay.yaml",
    ],
)
def test_a_file_under_generalisation_outside_both_halves_is_an_error(path: str) -> None:
    with pytest.raises(ValueError, match="tune/ or test/"):
        suite_of(path)


def test_loading_marks_each_scenario_with_its_suite(tmp_path: Path) -> None:
    _write(tmp_path, "team-one")
    _write(tmp_path / "generalisation" / "tune", "g-decay-fresh-en-01")
    _write(tmp_path / "generalisation" / "test", "g-decay-fresh-en-02")
    suites = {item.name: item.suite for item in load_scenarios([tmp_path])}
    assert suites == {
        "team-one": "team",
        "g-decay-fresh-en-01": "tune",
        "g-decay-fresh-en-02": "test",
    }


def test_a_misplaced_generalisation_file_fails_to_load_naming_it(tmp_path: Path) -> None:
    path = _write(tmp_path / "generalisation", "g-decay-fresh-en-01")
    with pytest.raises(ScenarioFormatError) as caught:
        load_scenarios([tmp_path])
    assert str(path) in str(caught.value) and "tune/ or test/" in str(caught.value)


def test_bundled_suites_sit_where_the_docs_say() -> None:
    loaded = load_scenarios([ROOT / "scenarios"])
    for item in loaded:
        expected = item.path.parent.name if item.name.startswith("g-") else "team"
        assert item.suite == expected, item.path
    assert {item.suite for item in loaded} == {"team", "tune", "test"}


# ------------------------------------------------------------------------------------------
# Selecting by suite
# ------------------------------------------------------------------------------------------


def test_select_by_suite_combines_with_the_other_filters(tmp_path: Path) -> None:
    _write(tmp_path, "team-one")
    _write(tmp_path / "generalisation" / "tune", "g-decay-fresh-en-01")
    _write(tmp_path / "generalisation" / "tune", "g-iso-private-zh-01", category="isolation")
    _write(tmp_path / "generalisation" / "test", "g-decay-fresh-en-02", language="zh")
    loaded = load_scenarios([tmp_path])

    def names(**filters: list[str]) -> set[str]:
        return {item.name for item in select(loaded, **filters)}

    assert names(suites=["team"]) == {"team-one"}
    assert names(suites=["tune"]) == {"g-decay-fresh-en-01", "g-iso-private-zh-01"}
    assert names(suites=["tune", "test"]) == names(names=["g-"])
    assert names(suites=["tune"], categories=["isolation"]) == {"g-iso-private-zh-01"}
    assert names(suites=["test"], languages=["en"]) == set()
    assert names() == {item.name for item in loaded}


# ------------------------------------------------------------------------------------------
# The summary per suite, the tables and the report
# ------------------------------------------------------------------------------------------


def _result(
    name: str, suite: str, language: str, category: str = "decay", *, passed: bool = True
) -> ScenarioResult:
    return ScenarioResult(
        name=name,
        category=category,
        language=language,
        suite=suite,
        path=f"{suite}/{category}.yaml",
        passed=passed,
        failures=[] if passed else [f"step 2 recall: the secret reason {name} failed"],
        seconds=1.0,
    )


RESULTS = [
    _result("team-a", "team", "en"),
    _result("tune-a", "tune", "en"),
    _result("tune-b", "tune", "en", passed=False),
    _result("tune-c", "tune", "zh", "time_range"),
    _result("test-a", "test", "en"),
    _result("test-b", "test", "zh", passed=False),
    _result("test-c", "test", "zh", "time_range"),
]


def test_summary_counts_per_suite_language_and_category() -> None:
    summary = summarise(RESULTS)
    assert list(summary) == ["team", "tune", "test"]
    tune, test = summary["tune"], summary["test"]
    assert tune["en"] == {"passed": 1, "total": 2, "rate": 0.5}
    assert tune["zh"] == {"passed": 1, "total": 1, "rate": 1.0}
    assert tune["total"] == {"passed": 2, "total": 3, "rate": 0.6667}
    assert test["zh"] == {"passed": 1, "total": 2, "rate": 0.5}
    assert list(tune["categories"]) == ["time_range", "decay"], "in the categories' own order"
    assert tune["categories"]["decay"]["en"] == {"passed": 1, "total": 2, "rate": 0.5}
    # Every language is a key of every suite and category, even when none of it ran.
    assert summary["team"]["zh"] == {"passed": 0, "total": 0, "rate": None}
    assert tune["categories"]["time_range"]["en"] == {"passed": 0, "total": 0, "rate": None}


def test_suite_report_shows_each_suite_apart() -> None:
    text = suite_report(RESULTS)
    overview = text.split("\n\n")[0].splitlines()
    assert overview[0].split() == ["suite", "en", "zh", "total", "pass", "rate"]
    assert [line.split()[0] for line in overview[2:]] == ["team", "tune", "test"]
    assert overview[3].split() == ["tune", "1/2", "1/1", "2/3", "66.7%"]
    assert "suite test (generalisation, held-out half)" in text
    held_out = text.split("suite test")[1]
    assert held_out.splitlines()[-1].split() == ["TOTAL", "1/1", "1/2", "2/3", "66.7%"]


def test_report_carries_suite_and_summary_and_withholds_outcomes() -> None:
    full = report_payload(RESULTS)
    assert full["summary"] == summarise(RESULTS)
    assert full["withheld_suites"] == []
    assert {entry["name"]: entry["suite"] for entry in full["scenarios"]}["test-b"] == "test"
    assert all("failures" in entry for entry in full["scenarios"])

    kept = report_payload(RESULTS, withhold={"test"})
    assert kept["withheld_suites"] == ["test"]
    for entry in kept["scenarios"]:
        assert ("passed" in entry) == (entry["suite"] != "test"), entry
    assert "secret reason test-b" not in json.dumps(kept)
    assert "secret reason tune-b" in json.dumps(kept)
    assert kept["summary"]["test"]["zh"]["passed"] == 1


def test_summary_only_names_no_failing_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "out" / "report.json"
    assert finish(RESULTS, report=report, summary_only=True) == 1
    printed = capsys.readouterr()
    assert "suite test" in printed.out and "2 of 7 scenarios failed" in printed.err
    for name in ("tune-b", "test-b", "secret reason"):
        assert name not in printed.out + printed.err
    assert "secret reason" not in report.read_text(encoding="utf-8")
    payload = json.loads(report.read_text(encoding="utf-8"))
    assert payload["withheld_suites"] == ["team", "tune", "test"]
    assert not any({"passed", "failures"} & set(entry) for entry in payload["scenarios"])
    assert payload["summary"]["tune"]["total"]["rate"] == 0.6667


def test_parse_without_a_place_is_the_team_suite() -> None:
    text = ONE_SCENARIO.format(category="decay", name="inline-one", language="en")
    (loaded,) = parse_scenario_file(text, "inline.yaml")
    assert loaded.suite == "team"
