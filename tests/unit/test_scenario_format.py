"""The scenario format: the bundled suite validates, bad files fail clearly, the runner works.

The runner is exercised against a tiny in-memory backend (word overlap), which checks the
runner's mechanics — namespaces, clocks, waits, forget resolution, reporting — not memory quality.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench.scenarios.checks import Hit, check_recall
from bench.scenarios.cli import main
from bench.scenarios.format import (
    CATEGORIES,
    LoadedScenario,
    ScenarioFormatError,
    load_scenarios,
    parse_scenario_file,
)
from bench.scenarios.report import summary_table
from bench.scenarios.runner import namespace_for, run_scenario, run_suite
from bench.scenarios.steps import AdvanceStep, RecallStep, RetainStep, parse_duration
from bench.scenarios.timeline import timeline

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = ROOT / "scenarios"


# ------------------------------------------------------------------------------------------
# The bundled suite
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundled() -> list[LoadedScenario]:
    return load_scenarios([BUNDLED])


@pytest.mark.parametrize("path", sorted(BUNDLED.glob("*.yaml")), ids=lambda p: p.name)
def test_every_bundled_file_parses(path: Path) -> None:
    loaded = parse_scenario_file(path.read_text(encoding="utf-8"), path)
    assert loaded, f"{path} holds no scenario"


def test_bundled_suite_size_and_coverage(bundled: list[LoadedScenario]) -> None:
    assert len(bundled) >= 60
    by_category_language = Counter((item.category, item.language) for item in bundled)
    for category in CATEGORIES:
        for language in ("en", "zh"):
            assert by_category_language[(category, language)] >= 2, (category, language)
    names = [item.name for item in bundled]
    assert len(names) == len(set(names))


def test_bundled_scenarios_run_in_their_own_category_file(bundled: list[LoadedScenario]) -> None:
    for item in bundled:
        assert item.path.stem == item.category, f"{item.name} is in {item.path.name}"


def test_seed_experiment_is_in_the_suite(bundled: list[LoadedScenario]) -> None:
    """Three preferences still in the top three after 15 noisy turns (the seed's experiment)."""
    experiment = next(i for i in bundled if i.name == "three-preferences-after-15-noisy-turns")
    retained = sum(
        len(step.turns) for step in experiment.scenario.steps if isinstance(step, RetainStep)
    )
    recall = next(step for step in experiment.scenario.steps if isinstance(step, RecallStep))
    assert retained >= 3 + 15
    assert recall.top_k == 3 and len(recall.contains) == 3
    assert all(match.kind == "preference" for match in recall.contains)


def test_chinese_scenarios_are_chinese(bundled: list[LoadedScenario]) -> None:
    cjk = re.compile(r"[\u4e00-\u9fff]")
    for item in bundled:
        queries = [s.query for s in item.scenario.steps if isinstance(s, RecallStep)]
        if item.language == "zh":
            assert any(cjk.search(q) for q in queries), item.name
        else:
            assert not any(cjk.search(q) for q in queries), item.name


def test_validate_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(BUNDLED)]) == 0
    assert "scenarios valid" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------
# Bad files give errors naming the file, the scenario and the step
# ------------------------------------------------------------------------------------------

GOOD_HEAD = """
category: entity_lookup
scenarios:
  - name: first-one
    language: en
    description: fine
    steps:
      - retain: "My order is SF1."
      - recall: {query: "order?", contains: SF1}
  - name: broken-one
    language: en
    description: has a problem
    steps:
      - retain: "hello there"
"""


def _problems(text: str, name: str = "bad.yaml") -> str:
    with pytest.raises(ScenarioFormatError) as caught:
        parse_scenario_file(text, Path("scenarios") / name)
    return str(caught.value)


def test_bad_expectation_value_names_file_scenario_step_and_field() -> None:
    message = _problems(GOOD_HEAD + '      - recall: {query: "x", top_kind: opinion}\n')
    assert "scenarios/bad.yaml" in message
    assert "scenario 'broken-one' (#2)" in message
    assert "step 2 (recall)" in message
    assert "top_kind" in message


def test_unknown_step_is_named() -> None:
    message = _problems(GOOD_HEAD + '      - remember: "x"\n')
    assert "scenario 'broken-one'" in message and "step 2" in message
    assert "unknown step 'remember'" in message


def test_misspelt_key_is_rejected() -> None:
    message = _problems(GOOD_HEAD + '      - recall: {query: "x", contain: "y"}\n')
    assert "step 2 (recall)" in message and "contain" in message


def test_recall_without_expectation_is_rejected() -> None:
    message = _problems(GOOD_HEAD + '      - recall: "what?"\n')
    assert "step 2 (recall)" in message and "needs at least one expectation" in message


def test_empty_with_contains_is_rejected() -> None:
    message = _problems(GOOD_HEAD + '      - recall: {query: "x", empty: true, contains: "y"}\n')
    assert "cannot be combined" in message


def test_history_needs_include_history() -> None:
    message = _problems(GOOD_HEAD + '      - recall: {query: "x", history_contains: "y"}\n')
    assert "include_history" in message


def test_time_running_backwards_names_the_step() -> None:
    text = GOOD_HEAD + (
        "      - advance: 2d\n"
        '      - retain: {text: "late", at: "2024-01-01T00:00:00Z"}\n'
        '      - recall: {query: "x", contains: "late"}\n'
    )
    message = _problems(text)
    assert "scenario 'broken-one'" in message
    assert "step 3 (retain)" in message and "before the scenario clock" in message


def test_bad_duration_is_explained() -> None:
    message = _problems(GOOD_HEAD + "      - advance: 3 days\n")
    assert "step 2 (advance)" in message and "duration" in message


def test_unknown_category() -> None:
    assert "unknown category 'vibes'" in _problems("category: vibes\nscenarios: []\n")


def test_yaml_syntax_error_names_file_and_line() -> None:
    message = _problems("category: decay\nscenarios:\n  - name: [unclosed\n")
    assert "scenarios/bad.yaml" in message and "line" in message and "YAML" in message


def test_duplicate_names_across_files(tmp_path: Path) -> None:
    body = GOOD_HEAD.split("  - name: broken-one")[0]
    (tmp_path / "a.yaml").write_text(body, encoding="utf-8")
    (tmp_path / "b.yaml").write_text(body, encoding="utf-8")
    with pytest.raises(ScenarioFormatError) as caught:
        load_scenarios([tmp_path])
    assert "name already used" in str(caught.value)


def test_missing_path() -> None:
    with pytest.raises(ScenarioFormatError, match="no such file"):
        load_scenarios([Path("does/not/exist.yaml")])


def test_validate_command_reports_bad_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        GOOD_HEAD + '      - recall: {query: "x", top_region: attic}\n', encoding="utf-8"
    )
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml" in err and "broken-one" in err and "top_region" in err


# ------------------------------------------------------------------------------------------
# Scalars and the timeline
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("3d", timedelta(days=3)),
        ("2h", timedelta(hours=2)),
        ("30m", timedelta(minutes=30)),
        ("1w", timedelta(days=7)),
        ("1d12h", timedelta(days=1, hours=12)),
        ("90s", timedelta(seconds=90)),
    ],
)
def test_parse_duration(raw: str, expected: timedelta) -> None:
    assert parse_duration(raw) == expected


@pytest.mark.parametrize("raw", ["", "3", 3, "3x", "d3", "-1d", "0m", "3 days"])
def test_parse_duration_rejects(raw: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(raw)


def _one(text: str) -> LoadedScenario:
    (loaded,) = parse_scenario_file(text, "inline.yaml")
    return loaded


TIMELINE = """
category: isolation
scenarios:
  - name: clock-rules
    language: en
    description: timeline defaults
    start: 2024-05-06T09:00:00+08:00
    steps:
      - retain: ["one", {text: "two", session: s2}]
      - retain: "three"
      - advance: {by: 1d, ticks: 4}
      - retain: {namespace: other, text: "four", after: 2h}
      - recall: {query: "q", not_contains: "x"}
      - forget: {namespace: other, query: "four"}
      - advance: 1h
"""


def test_timeline_defaults() -> None:
    steps = list(timeline(_one(TIMELINE).scenario))
    start = datetime(2024, 5, 6, 1, 0, tzinfo=UTC)
    one, two = steps[0].turns
    assert one.at == start + timedelta(minutes=1) and one.session == "s1"
    assert two.at == start + timedelta(minutes=2) and two.session == "s2"
    (three,) = steps[1].turns
    assert three.session == "s2", "a turn continues the previous turn's session"
    assert steps[2].tick_times[-1] == three.at + timedelta(days=1)
    assert len(steps[2].tick_times) == 4 and steps[2].tick_aliases == ("main",)
    (four,) = steps[3].turns
    assert four.at == three.at + timedelta(days=1, hours=2) and four.session == "s1"
    assert steps[4].at == four.at, "recall asks at the clock"
    assert steps[5].at == four.at + timedelta(minutes=1)
    assert steps[6].tick_aliases == ("main", "other"), "advance ticks every namespace used"
    assert one.at.utcoffset() == timedelta(hours=8), "the scenario's offset is kept"


def test_shorthand_and_roles() -> None:
    text = """
category: chit_chat
scenarios:
  - name: shorthands
    language: en
    description: shorthand forms
    steps:
      - retain: {speaker: assistant, turns: ["Hello!", {text: "x", speaker: user}]}
      - forget: "some query"
      - recall: {query: "q", empty: true}
"""
    scenario = _one(text).scenario
    retain = scenario.steps[0]
    assert isinstance(retain, RetainStep)
    assert [t.effective_role for t in retain.turns] == ["assistant", "user"]
    assert scenario.steps[1].step == "forget"
    assert isinstance(scenario.steps[2], RecallStep)
    assert not isinstance(scenario.steps[2], AdvanceStep)


def test_namespaces_are_valid_and_distinct() -> None:
    name = "a-very-long-scenario-name-that-goes-on-and-on-and-on-forever"
    main_ns = namespace_for(name, "main", "abcd1234")
    other_ns = namespace_for(name, "other", "abcd1234")
    assert main_ns != other_ns
    pattern = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")
    assert pattern.match(main_ns) and pattern.match(other_ns)


# ------------------------------------------------------------------------------------------
# Expectation checks
# ------------------------------------------------------------------------------------------


def _hit(content: str, kind: str = "fact", region: str = "semantic", status: str = "active") -> Hit:
    return Hit(id=content[:8], content=content, kind=kind, region=region, status=status, score=0.5)


def _recall(**fields: object) -> RecallStep:
    return RecallStep.model_validate({"query": "q", **fields})


def test_contains_is_case_and_width_insensitive() -> None:
    hits = [_hit("Our team uses ＰｏｓｔｇｒｅＳＱＬ now")]
    assert check_recall(_recall(contains="postgresql"), hits) == []


def test_contains_respects_top_k_and_kind() -> None:
    hits = [_hit("a"), _hit("b"), _hit("c"), _hit("I prefer Docker", kind="preference")]
    assert check_recall(_recall(contains="Docker"), hits)
    assert check_recall(_recall(contains="Docker", top_k=4), hits) == []
    wanted = {"text": "Docker", "kind": "emotion"}
    assert check_recall(_recall(contains=[wanted], top_k=4), hits)


def test_not_contains_top_and_empty() -> None:
    hits = [_hit("TypeScript from now on", kind="decision"), _hit("Python before")]
    assert check_recall(_recall(not_contains="python"), hits)
    assert check_recall(_recall(not_contains="python", top_k=1), hits) == []
    assert check_recall(_recall(top_contains="TypeScript", top_kind="decision"), hits) == []
    assert check_recall(_recall(top_region="procedural"), hits)
    assert check_recall(_recall(empty=True), hits)
    assert check_recall(_recall(empty=True), []) == []


def test_superseded_is_history_only() -> None:
    hits = [_hit("TypeScript"), _hit("Python", status="superseded")]
    assert any("returned as current" in f for f in check_recall(_recall(contains="TS"), hits))
    history = _recall(include_history=True, history_contains="python", top_contains="typescript")
    assert check_recall(history, hits) == []
    assert check_recall(_recall(include_history=True, history_contains="TypeScript"), hits)


def test_forgotten_is_never_returned() -> None:
    hits = [_hit("secret 4242", status="forgotten")]
    failures = check_recall(_recall(include_history=True, not_contains="nothing"), hits)
    assert any("forgotten" in f for f in failures)


# ------------------------------------------------------------------------------------------
# The runner against an in-memory backend
# ------------------------------------------------------------------------------------------

_SMALL_TALK = {"hi", "hello", "thanks", "lol", "ok", "bye"}


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


@dataclass
class _Memory:
    id: str
    content: str
    status: str = "active"


@dataclass
class FakeBackend:
    """Stores each non-small-talk turn as a memory; recalls by word overlap."""

    memories: dict[str, list[_Memory]] = field(default_factory=dict)
    log: list[tuple[str, str, datetime]] = field(default_factory=list)
    applied: list[object] = field(default_factory=list)
    counter: int = 0

    def _receipt(self) -> int:
        self.counter += 1
        return self.counter

    async def retain(
        self,
        namespace: str,
        text: str,
        *,
        speaker: str,
        role: str,
        session_id: str,
        event_time: datetime,
    ) -> object:
        self.log.append(("retain", namespace, event_time))
        if not _words(text) <= _SMALL_TALK:
            bank = self.memories.setdefault(namespace, [])
            bank.append(_Memory(f"m{len(bank)}", text))
        return self._receipt()

    async def recall(
        self,
        namespace: str,
        query: str,
        *,
        at: datetime,
        limit: int,
        include_history: bool,
        regions: list[str] | None,
        wait_for: object | None,
        reinforce: bool = True,
    ) -> list[Hit]:
        assert wait_for is None or wait_for in self.applied, "recall before its write was applied"
        wanted = _words(query)
        scored = [
            (len(wanted & _words(memory.content)), memory)
            for memory in self.memories.get(namespace, [])
            if memory.status == "active"
        ]
        ranked = [memory for score, memory in sorted(scored, key=lambda pair: -pair[0]) if score]
        return [Hit(m.id, m.content, "fact", "semantic") for m in ranked[:limit]]

    async def forget(
        self,
        namespace: str,
        *,
        at: datetime,
        memory_ids: list[str] | None = None,
        query: str | None = None,
        whole_namespace: bool = False,
    ) -> object:
        for memory in self.memories.get(namespace, []):
            if whole_namespace or memory.id in (memory_ids or []):
                memory.status = "forgotten"
        return self._receipt()

    async def advance(self, namespace: str, *, to: datetime) -> object:
        self.log.append(("tick", namespace, to))
        return self._receipt()

    async def wait_applied(self, receipt: object) -> None:
        self.applied.append(receipt)


RUNNABLE = """
category: isolation
scenarios:
  - name: runner-pass
    language: en
    description: passes on the fake backend
    steps:
      - retain: ["hi", "My locker code is 4417", "My card number ends with 4242"]
      - retain: {namespace: other, text: "My locker code is 9999"}
      - recall: {query: "locker code", contains: "4417", not_contains: "9999"}
      - forget: {query: "card number", matching: "4242"}
      - recall: {query: "card number", not_contains: "4242"}
      - advance: 3d
      - recall: {namespace: other, query: "locker code", top_contains: "9999"}
  - name: runner-fail
    language: zh
    description: fails on the fake backend
    steps:
      - retain: "My locker code is 4417"
      - recall: {query: "locker code", top_contains: "1234"}
      - recall: {query: "never reached", empty: true}
"""


async def test_runner_passes_and_fails_with_reasons() -> None:
    backend = FakeBackend()
    passing, failing = parse_scenario_file(RUNNABLE, "inline.yaml")
    good = await run_scenario(backend, passing, run_id="r1")
    assert good.passed, good.failures
    assert set(good.namespaces) == {"main", "other"}
    ticks = [entry for entry in backend.log if entry[0] == "tick"]
    assert {namespace for _, namespace, _ in ticks} == set(good.namespaces.values())

    bad = await run_scenario(backend, failing, run_id="r2")
    assert not bad.passed
    assert bad.failures[0].startswith("step 2 recall 'locker code'")
    assert "top result to contain '1234'" in bad.failures[0]
    assert "4417" in bad.failures[1], "the failure lists what was returned"


async def test_forget_matching_nothing_is_a_failure() -> None:
    text = """
category: forgetting
scenarios:
  - name: nothing-to-forget
    language: en
    description: forget by content that was never stored
    steps:
      - retain: "My locker code is 4417"
      - forget: {matching: "zzz"}
      - recall: {query: "locker", contains: "4417"}
"""
    result = await run_scenario(FakeBackend(), _one(text))
    assert not result.passed and "nothing to forget" in result.failures[0]


async def test_backend_errors_become_failures() -> None:
    class Broken(FakeBackend):
        async def wait_applied(self, receipt: object) -> None:
            raise RuntimeError("watermark never came")

    passing, _ = parse_scenario_file(RUNNABLE, "inline.yaml")
    result = await run_scenario(Broken(), passing)
    assert not result.passed
    assert "RuntimeError" in result.failures[0] and "watermark never came" in result.failures[0]


async def test_suite_summary_table(capsys: pytest.CaptureFixture[str]) -> None:
    scenarios = parse_scenario_file(RUNNABLE, "inline.yaml")
    results = await run_suite(FakeBackend(), scenarios, concurrency=2)
    out = capsys.readouterr().out
    assert "PASS  isolation/runner-pass [en]" in out
    assert "FAIL  isolation/runner-fail [zh]" in out
    table = summary_table(results)
    assert "isolation" in table and "1/2" in table and "50.0%" in table
    assert table.splitlines()[-1].startswith("TOTAL")


async def test_suite_run_without_echo_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    scenarios = parse_scenario_file(RUNNABLE, "inline.yaml")
    results = await run_suite(FakeBackend(), scenarios, echo=False)
    assert capsys.readouterr().out == ""
    assert [r.suite for r in results] == ["team", "team"]
    assert [r.passed for r in results] == [True, False]
