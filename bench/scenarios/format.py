"""Scenario files: the scenario and file models, loading, validation, and selection.

A file is one category's scenarios; loading validates every file and collects every problem
before raising, each naming the file, the scenario, the step and the field. Pure apart from
reading the files.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from bench.scenarios.steps import (
    STEP_KINDS,
    Duration,
    Language,
    Moment,
    NormalisedStep,
    RecallStep,
    StrictModel,
)
from bench.scenarios.timeline import timeline
from schemas.errors import HindsightError

CATEGORIES: tuple[str, ...] = (
    "cross_session",
    "time_range",
    "entity_lookup",
    "paraphrase",
    "preference_update",
    "forgetting",
    "chit_chat",
    "noise_resilience",
    "procedural",
    "decay",
    "isolation",
)
SCENARIO_SUFFIXES = (".yaml", ".yml")

# Which suite a scenario belongs to follows from where its file sits (``suite_of``): the team's
# suite, or one half of the generalisation suite (``test`` is held out: only its rates are read).
Suite = Literal["team", "tune", "test"]
SUITES: tuple[Suite, ...] = ("team", "tune", "test")
GENERALISATION_DIR = "generalisation"


def suite_of(path: Path | str) -> Suite:
    """The suite of a scenario file, from its place: ``generalisation/tune/<file>`` is ``tune``,
    ``generalisation/test/<file>`` is ``test``, a file outside any ``generalisation/`` folder is
    ``team``. Anywhere else under ``generalisation/`` is an error (``ValueError``)."""
    folder = Path(path).resolve().parent
    if folder.parent.name == GENERALISATION_DIR and folder.name in {"tune", "test"}:
        return "tune" if folder.name == "tune" else "test"
    if GENERALISATION_DIR in folder.parts:
        raise ValueError(
            f"a file under {GENERALISATION_DIR}/ must sit directly in its tune/ or test/ half"
        )
    return "team"


class Scenario(StrictModel):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{2,79}$")
    description: str = Field(min_length=1)
    language: Language
    category: str | None = None  # default: the file's category
    start: Moment = Field(default_factory=lambda: datetime(2024, 5, 6, 9, 0, tzinfo=UTC))
    turn_gap: Duration = Field(default=timedelta(minutes=1))
    steps: list[NormalisedStep] = Field(min_length=1)

    @model_validator(mode="after")
    def _timeline(self) -> Scenario:
        # Walking the timeline validates it: event time never moves backwards.
        list(timeline(self))
        if not any(isinstance(step, RecallStep) for step in self.steps):
            raise ValueError("a scenario needs at least one recall step")
        return self


class ScenarioFile(StrictModel):
    category: str
    description: str = ""
    scenarios: list[Scenario] = Field(min_length=1)

    @field_validator("category")
    @classmethod
    def _known_category(cls, value: str) -> str:
        if value not in CATEGORIES:
            raise ValueError(f"unknown category {value!r}; expected one of {', '.join(CATEGORIES)}")
        return value


@dataclass(frozen=True)
class LoadedScenario:
    """A validated scenario with where it came from."""

    scenario: Scenario
    category: str
    path: Path
    suite: Suite  # from ``path`` (``suite_of``)

    @property
    def name(self) -> str:
        return self.scenario.name

    @property
    def language(self) -> str:
        return self.scenario.language


# --------------------------------------------------------------------------------------------
# Loading with errors that name the file, the scenario and the step
# --------------------------------------------------------------------------------------------


class ScenarioFormatError(HindsightError):
    """One or more scenario files are invalid; ``problems`` holds one line per problem."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__(
            "invalid scenario file(s):\n" + "\n".join(f"  {line}" for line in problems)
        )


def _describe_location(raw: object, loc: Sequence[int | str]) -> tuple[str, str]:
    """(where, field) for a pydantic error location inside a scenario file."""
    parts: list[str] = []
    rest = list(loc)
    scenarios = raw.get("scenarios") if isinstance(raw, dict) else None
    if len(rest) >= 2 and rest[0] == "scenarios" and isinstance(rest[1], int):
        number = rest[1]
        name = None
        if (
            isinstance(scenarios, list)
            and number < len(scenarios)
            and isinstance(scenarios[number], dict)
        ):
            name = scenarios[number].get("name")
        parts.append(f"scenario {name!r} (#{number + 1})" if name else f"scenario #{number + 1}")
        rest = rest[2:]
        if len(rest) >= 2 and rest[0] == "steps" and isinstance(rest[1], int):
            step_number = rest[1]
            kind = rest[2] if len(rest) >= 3 and rest[2] in STEP_KINDS else None
            parts.append(f"step {step_number + 1}" + (f" ({kind})" if kind else ""))
            rest = rest[3:] if kind else rest[2:]
    # Drop pydantic's internal tags (function names of before-validators).
    field_path = ".".join(str(part) for part in rest if not str(part).startswith("function-"))
    return ", ".join(parts), field_path


def parse_scenario_file(text: str, path: Path | str) -> list[LoadedScenario]:
    """Parse and validate one file's text; raises ``ScenarioFormatError`` naming what is wrong."""
    source = Path(path)
    try:
        suite = suite_of(source)
    except ValueError as error:
        raise ScenarioFormatError([f"{source}: {error}"]) from error
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ScenarioFormatError([f"{source}:{where}: YAML syntax error: {problem}"]) from error
    if not isinstance(raw, dict):
        raise ScenarioFormatError(
            [
                f"{source}: expected a mapping with 'category' and 'scenarios', "
                f"got {type(raw).__name__}"
            ]
        )
    try:
        parsed = ScenarioFile.model_validate(raw)
    except ValidationError as error:
        problems = []
        for detail in error.errors():
            where, field_path = _describe_location(raw, detail["loc"])
            message = str(detail["msg"]).removeprefix("Value error, ")
            location = ", ".join(part for part in (where, field_path) if part)
            problems.append(
                f"{source}: {location}: {message}" if location else f"{source}: {message}"
            )
        raise ScenarioFormatError(problems) from error
    loaded = [
        LoadedScenario(scenario, scenario.category or parsed.category, source, suite)
        for scenario in parsed.scenarios
    ]
    problems = [
        f"{source}: scenario {item.name!r}: unknown category {item.category!r}"
        for item in loaded
        if item.category not in CATEGORIES
    ]
    seen: set[str] = set()
    for item in loaded:
        if item.name in seen:
            problems.append(f"{source}: scenario {item.name!r}: duplicate name in this file")
        seen.add(item.name)
    if problems:
        raise ScenarioFormatError(problems)
    return loaded


def scenario_files(paths: Iterable[Path | str]) -> list[Path]:
    """Expand directories to their ``*.yaml``/``*.yml`` files (sorted); files pass through."""
    found: list[Path] = []
    for entry in paths:
        path = Path(entry)
        if path.is_dir():
            found.extend(
                sorted(
                    item
                    for item in path.rglob("*")
                    if item.suffix in SCENARIO_SUFFIXES and item.is_file()
                )
            )
        elif path.is_file():
            found.append(path)
        else:
            raise ScenarioFormatError([f"{path}: no such file or directory"])
    return found


def load_scenarios(paths: Iterable[Path | str]) -> list[LoadedScenario]:
    """Load every file; collects the problems of all files before raising."""
    loaded: list[LoadedScenario] = []
    problems: list[str] = []
    for path in scenario_files(paths):
        try:
            loaded.extend(parse_scenario_file(path.read_text(encoding="utf-8"), path))
        except ScenarioFormatError as error:
            problems.extend(error.problems)
    where: dict[str, Path] = {}
    for item in loaded:
        if item.name in where and where[item.name] != item.path:
            problems.append(
                f"{item.path}: scenario {item.name!r}: name already used in {where[item.name]}"
            )
        where.setdefault(item.name, item.path)
    if problems:
        raise ScenarioFormatError(problems)
    return loaded


def select(
    scenarios: Sequence[LoadedScenario],
    *,
    names: Sequence[str] = (),
    categories: Sequence[str] = (),
    languages: Sequence[str] = (),
    suites: Sequence[str] = (),
) -> list[LoadedScenario]:
    """The scenarios matching every given filter (a filter left empty matches everything); a
    name matches when it contains one of ``names``."""
    return [
        item
        for item in scenarios
        if (not names or any(part in item.name for part in names))
        and (not categories or item.category in categories)
        and (not languages or item.language in languages)
        and (not suites or item.suite in suites)
    ]
