"""Scenario suite: a YAML format for end-to-end memory behaviour, and its runner.

A scenario is a short scripted conversation (``retain`` turns, ``advance`` of event time,
``forget`` requests) interleaved with ``recall`` questions that carry expectations. Each scenario
runs in a fresh namespace through the public client, so the whole stack (log, stages, views,
recall) is exercised exactly as an agent would use it. The format is documented in
``docs/SCENARIOS.md``; the bundled suite lives in ``scenarios/``.

Everything above ``run_scenario`` is pure (parsing, validation, timeline, expectation checks) and
is unit-tested without a broker; the runner talks to a ``MemoryBackend`` — the real client in
production, a fake in unit tests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import sys
import time
import unicodedata
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from schemas.errors import HindsightError
from schemas.memory import Kind, Region

Language = Literal["en", "zh"]
Role = Literal["user", "assistant", "system", "tool"]

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
DEFAULT_NAMESPACE_ALIAS = "main"
DEFAULT_SESSION = "s1"
SCENARIO_SUFFIXES = (".yaml", ".yml")
MAX_TICKS_PER_ADVANCE = 1_000

# --------------------------------------------------------------------------------------------
# Scalars: durations and times
# --------------------------------------------------------------------------------------------

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(w|d|h|m|s)")
_DURATION_UNITS = {"w": 7 * 86_400.0, "d": 86_400.0, "h": 3_600.0, "m": 60.0, "s": 1.0}


def parse_duration(raw: object) -> timedelta:
    """``"3d"``, ``"2h"``, ``"30m"``, ``"45s"``, ``"1w"`` or combinations like ``"1d12h"``."""
    if isinstance(raw, timedelta):
        return raw
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise ValueError(f"expected a duration like '3d', '2h' or '30m', got {raw!r}")
    if isinstance(raw, int | float):
        raise ValueError(
            f"a duration needs a unit (w, d, h, m, s): got {raw!r}, write e.g. '{raw}d'"
        )
    text = raw.strip().lower().replace(" ", "")
    position = 0
    seconds = 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            break
        seconds += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        position = match.end()
    if not text or position != len(text):
        raise ValueError(f"expected a duration like '3d', '2h', '30m' or '1d12h', got {raw!r}")
    if seconds <= 0:
        raise ValueError(f"a duration must be positive, got {raw!r}")
    return timedelta(seconds=seconds)


def parse_moment(raw: object) -> datetime:
    """An ISO-8601 time (YAML may already have parsed it); naive times and dates mean UTC."""
    if isinstance(raw, datetime):
        moment = raw
    elif isinstance(raw, date):
        moment = datetime(raw.year, raw.month, raw.day)
    elif isinstance(raw, str):
        try:
            moment = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
        except ValueError as error:
            raise ValueError(
                f"expected an ISO-8601 time like 2024-05-06T09:00:00Z, got {raw!r}"
            ) from error
    else:
        raise ValueError(f"expected an ISO-8601 time like 2024-05-06T09:00:00Z, got {raw!r}")
    # The offset is kept: "yesterday" and "this morning" are the user's local days.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]
Moment = Annotated[datetime, BeforeValidator(parse_moment)]
Alias = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,23}$")]


def _string_list(raw: object) -> object:
    return [raw] if isinstance(raw, str) else raw


StringList = Annotated[list[Annotated[str, Field(min_length=1)]], BeforeValidator(_string_list)]

# --------------------------------------------------------------------------------------------
# Format models
# --------------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Turn(_Strict):
    """One conversation turn to retain."""

    text: str = Field(min_length=1, max_length=16_000)
    speaker: str = Field(default="user", min_length=1, max_length=128)
    role: Role | None = None  # default: "assistant" when speaker is assistant/agent, else "user"
    session: str | None = Field(default=None, min_length=1, max_length=128)
    at: Moment | None = None  # absolute event time
    after: Duration | None = None  # event time relative to the scenario clock

    @model_validator(mode="after")
    def _one_time(self) -> Turn:
        if self.at is not None and self.after is not None:
            raise ValueError("give either 'at' or 'after', not both")
        if not self.text.strip():
            raise ValueError("text must not be blank")
        return self

    @property
    def effective_role(self) -> Role:
        if self.role is not None:
            return self.role
        return "assistant" if self.speaker.lower() in {"assistant", "agent", "ai"} else "user"


class Match(_Strict):
    """A result that must be present: its content contains ``text``, optionally of a kind/region."""

    text: str = Field(min_length=1)
    kind: Kind | None = None
    region: Region | None = None

    def describe(self) -> str:
        extras = [part for part in (self.kind, self.region) if part]
        return repr(self.text) + (f" ({'/'.join(extras)})" if extras else "")


def _match_list(raw: object) -> object:
    items = [raw] if isinstance(raw, str | dict) else raw
    if isinstance(items, list):
        return [{"text": item} if isinstance(item, str) else item for item in items]
    return items


MatchList = Annotated[list[Match], BeforeValidator(_match_list)]


class RetainStep(_Strict):
    step: Literal["retain"] = "retain"
    namespace: Alias = DEFAULT_NAMESPACE_ALIAS
    turns: list[Turn] = Field(min_length=1)


class RecallStep(_Strict):
    step: Literal["recall"] = "recall"
    namespace: Alias = DEFAULT_NAMESPACE_ALIAS
    query: str = Field(min_length=1, max_length=4_000)
    at: Moment | None = None  # query time; default: the scenario clock
    top_k: int = Field(default=3, ge=1, le=20)
    regions: list[Region] | None = None
    include_history: bool = False
    # Expectations
    contains: MatchList = Field(default_factory=list)
    contains_any: MatchList = Field(default_factory=list)
    not_contains: StringList = Field(default_factory=list)
    top_contains: str | None = Field(default=None, min_length=1)
    top_kind: Kind | None = None
    top_region: Region | None = None
    empty: bool = False
    history_contains: StringList = Field(default_factory=list)

    @model_validator(mode="after")
    def _coherent(self) -> RecallStep:
        positive = bool(
            self.contains
            or self.contains_any
            or self.top_contains
            or self.top_kind
            or self.top_region
            or self.history_contains
        )
        if self.empty and positive:
            raise ValueError(
                "'empty: true' cannot be combined with expectations that need a result"
            )
        if not (positive or self.empty or self.not_contains):
            raise ValueError(
                "a recall needs at least one expectation (contains, contains_any, not_contains, "
                "top_contains, top_kind, top_region, empty, history_contains)"
            )
        if self.history_contains and not self.include_history:
            raise ValueError("'history_contains' needs 'include_history: true'")
        return self


class ForgetStep(_Strict):
    """Forget by query (the pipeline decides what matches), by content, or the whole namespace.

    ``matching`` makes the runner resolve ids itself: it recalls ``query`` (or ``matching``) and
    forgets every returned memory whose content contains ``matching``; none matching is a failure.
    """

    step: Literal["forget"] = "forget"
    namespace: Alias = DEFAULT_NAMESPACE_ALIAS
    query: str | None = Field(default=None, min_length=1, max_length=4_000)
    matching: str | None = Field(default=None, min_length=1)
    whole_namespace: bool = False
    at: Moment | None = None

    @model_validator(mode="after")
    def _one_mode(self) -> ForgetStep:
        if self.whole_namespace and (self.query or self.matching):
            raise ValueError(
                "'whole_namespace: true' cannot be combined with 'query' or 'matching'"
            )
        if not (self.whole_namespace or self.query or self.matching):
            raise ValueError("forget needs 'query', 'matching' or 'whole_namespace: true'")
        return self


class AdvanceStep(_Strict):
    """Move event time forward, emitting ``ticks`` evenly spaced ticks (the last at the target)."""

    step: Literal["advance"] = "advance"
    namespace: Alias | None = None  # default: every namespace the scenario has used so far
    by: Duration | None = None
    to: Moment | None = None
    ticks: int = Field(default=1, ge=1, le=MAX_TICKS_PER_ADVANCE)

    @model_validator(mode="after")
    def _one_target(self) -> AdvanceStep:
        if (self.by is None) == (self.to is None):
            raise ValueError("advance needs exactly one of 'by' (a duration) or 'to' (a time)")
        return self


Step = Annotated[RetainStep | RecallStep | ForgetStep | AdvanceStep, Field(discriminator="step")]
STEP_KINDS = ("retain", "recall", "forget", "advance")


def _normalise_step(raw: object) -> object:
    """``{retain: ...}`` (with shorthands) → a flat mapping with ``step: retain``."""
    if not isinstance(raw, dict) or len(raw) != 1:
        raise ValueError("each step is a mapping with exactly one key: " + ", ".join(STEP_KINDS))
    ((kind, body),) = raw.items()
    if kind not in STEP_KINDS:
        raise ValueError(f"unknown step {kind!r}; expected one of {', '.join(STEP_KINDS)}")
    if kind == "retain":
        return {"step": "retain", **_normalise_retain(body)}
    if kind == "advance" and isinstance(body, str | int | float):
        return {"step": "advance", "by": body}
    if kind == "forget" and isinstance(body, str):
        return {"step": "forget", "query": body}
    if kind == "recall" and isinstance(body, str):
        return {"step": "recall", "query": body}
    if not isinstance(body, dict):
        raise ValueError(f"{kind}: expected a mapping, got {type(body).__name__}")
    return {"step": kind, **body}


def _normalise_retain(body: object) -> dict[str, Any]:
    if isinstance(body, str):
        return {"turns": [{"text": body}]}
    if isinstance(body, list):
        return {"turns": [{"text": item} if isinstance(item, str) else item for item in body]}
    if not isinstance(body, dict):
        raise ValueError("retain: expected a text, a list of turns or a mapping")
    body = dict(body)
    namespace = body.pop("namespace", DEFAULT_NAMESPACE_ALIAS)
    if "turns" in body:
        # Shared fields (speaker, role, session) apply to every listed turn that lacks them.
        turns = body.pop("turns")
        shared = {key: body.pop(key) for key in ("speaker", "role", "session") if key in body}
        if body:
            raise ValueError(
                "retain with 'turns' accepts only speaker, role, session and namespace; "
                f"got {sorted(body)}"
            )
        if not isinstance(turns, list):
            raise ValueError("retain.turns: expected a list")
        expanded = []
        for item in turns:
            turn = {"text": item} if isinstance(item, str) else item
            if isinstance(turn, dict):
                turn = {**shared, **turn}
            expanded.append(turn)
        return {"namespace": namespace, "turns": expanded}
    return {"namespace": namespace, "turns": [body]}


NormalisedStep = Annotated[Step, BeforeValidator(_normalise_step)]


class Scenario(_Strict):
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


class ScenarioFile(_Strict):
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

    @property
    def name(self) -> str:
        return self.scenario.name

    @property
    def language(self) -> str:
        return self.scenario.language


# --------------------------------------------------------------------------------------------
# Timeline: event times of every step, computed once and validated
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TimedTurn:
    turn: Turn
    at: datetime
    session: str


@dataclass(frozen=True)
class TimedStep:
    index: int  # 1-based, as shown in messages
    step: RetainStep | RecallStep | ForgetStep | AdvanceStep
    at: datetime  # recall/forget time, or the advance target; retain: the last turn's time
    turns: tuple[TimedTurn, ...] = ()
    tick_times: tuple[datetime, ...] = ()
    tick_aliases: tuple[str, ...] = ()


def timeline(scenario: Scenario) -> Iterable[TimedStep]:
    """Event times for each step; raises ``ValueError`` naming the step if time runs backwards.

    Rules: the clock starts at ``start``; a turn without ``at``/``after`` happens ``turn_gap``
    after the clock; a turn's session defaults to the previous turn's session in the same
    namespace (initially ``s1``); ``forget`` happens ``turn_gap`` after the clock unless ``at``
    is given; ``recall`` asks at the clock (or ``at``) without moving it; ``advance`` moves it.
    """
    clock = scenario.start
    sessions: dict[str, str] = {}
    used: list[str] = []

    def note(alias: str) -> None:
        if alias not in used:
            used.append(alias)

    def forward(index: int, kind: str, moment: datetime) -> datetime:
        if moment < clock:
            raise ValueError(
                f"step {index} ({kind}): event time {moment.isoformat()} is before the scenario "
                f"clock {clock.isoformat()}; time only moves forward"
            )
        return moment

    for index, step in enumerate(scenario.steps, start=1):
        if isinstance(step, RetainStep):
            note(step.namespace)
            timed: list[TimedTurn] = []
            for turn in step.turns:
                if turn.at is not None:
                    clock = forward(index, "retain", turn.at)
                elif turn.after is not None:
                    clock = clock + turn.after
                else:
                    clock = clock + scenario.turn_gap
                session = turn.session or sessions.get(step.namespace, DEFAULT_SESSION)
                sessions[step.namespace] = session
                timed.append(TimedTurn(turn, clock, session))
            yield TimedStep(index, step, clock, turns=tuple(timed))
        elif isinstance(step, RecallStep):
            moment = forward(index, "recall", step.at) if step.at is not None else clock
            yield TimedStep(index, step, moment)
        elif isinstance(step, ForgetStep):
            note(step.namespace)
            clock = (
                forward(index, "forget", step.at)
                if step.at is not None
                else clock + scenario.turn_gap
            )
            yield TimedStep(index, step, clock)
        else:
            target = step.to if step.to is not None else clock + (step.by or timedelta(0))
            if target <= clock:
                raise ValueError(
                    f"step {index} (advance): target {target.isoformat()} is not after the "
                    f"scenario clock {clock.isoformat()}"
                )
            span = (target - clock) / step.ticks
            ticks = tuple(clock + span * (number + 1) for number in range(step.ticks))
            aliases = (
                (step.namespace,) if step.namespace else tuple(used or [DEFAULT_NAMESPACE_ALIAS])
            )
            if step.namespace:
                note(step.namespace)
            clock = target
            yield TimedStep(index, step, target, tick_times=ticks, tick_aliases=aliases)


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
        LoadedScenario(scenario, scenario.category or parsed.category, source)
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


# --------------------------------------------------------------------------------------------
# Expectations (pure)
# --------------------------------------------------------------------------------------------

CURRENT_STATUSES = frozenset({"active", "cold"})


@dataclass(frozen=True)
class Hit:
    """What the runner needs from one recalled memory."""

    id: str
    content: str
    kind: str
    region: str
    status: str = "active"
    score: float = 0.0

    @property
    def current(self) -> bool:
        return self.status in CURRENT_STATUSES

    def show(self) -> str:
        return f"[{self.kind}/{self.region} {self.status} {self.score:.3f}] {self.content}"


def fold(text: str) -> str:
    """Case- and width-insensitive form used by every ``contains`` check."""
    return unicodedata.normalize("NFKC", text).casefold()


def _has(hit: Hit, needle: str) -> bool:
    return fold(needle) in fold(hit.content)


def _matches(hit: Hit, wanted: Match) -> bool:
    return (
        _has(hit, wanted.text)
        and (wanted.kind is None or hit.kind == wanted.kind)
        and (wanted.region is None or hit.region == wanted.region)
    )


def check_recall(step: RecallStep, hits: Sequence[Hit]) -> list[str]:
    """Every way ``hits`` falls short of the step's expectations (empty: it passes).

    ``contains``/``contains_any``/``top_*`` look at the first ``top_k`` current results;
    ``not_contains`` looks at the first ``top_k`` results of any status; ``history_contains``
    looks at every returned non-current result. Two invariants hold for every recall: a
    forgotten memory is never returned, and without ``include_history`` only current memories are.
    """
    failures: list[str] = []
    forgotten = [hit for hit in hits if hit.status == "forgotten"]
    if forgotten:
        failures.append(f"a forgotten memory was returned: {forgotten[0].content!r}")
    if not step.include_history:
        stale = [hit for hit in hits if not hit.current and hit.status != "forgotten"]
        if stale:
            failures.append(
                f"a {stale[0].status} memory was returned as current: {stale[0].content!r}"
            )
    current = [hit for hit in hits if hit.current][: step.top_k]
    window = list(hits[: step.top_k])
    if step.empty and hits:
        failures.append(f"expected no result, got {len(hits)}")
    for wanted in step.contains:
        if not any(_matches(hit, wanted) for hit in current):
            failures.append(f"expected some top-{step.top_k} result to contain {wanted.describe()}")
    if step.contains_any and not any(
        _matches(hit, wanted) for hit in current for wanted in step.contains_any
    ):
        options = ", ".join(wanted.describe() for wanted in step.contains_any)
        failures.append(f"expected some top-{step.top_k} result to contain one of {options}")
    for unwanted in step.not_contains:
        offender = next((hit for hit in window if _has(hit, unwanted)), None)
        if offender is not None:
            failures.append(f"expected no top-{step.top_k} result to contain {unwanted!r}")
    top = current[0] if current else None
    if step.top_contains is not None and (top is None or not _has(top, step.top_contains)):
        failures.append(f"expected the top result to contain {step.top_contains!r}")
    if step.top_kind is not None and (top is None or top.kind != step.top_kind):
        failures.append(
            f"expected the top result to be kind {step.top_kind!r}, "
            f"got {top.kind if top else 'nothing'!r}"
        )
    if step.top_region is not None and (top is None or top.region != step.top_region):
        failures.append(
            f"expected the top result in region {step.top_region!r}, got "
            f"{top.region if top else 'nothing'!r}"
        )
    history = [hit for hit in hits if not hit.current]
    for wanted_text in step.history_contains:
        if not any(_has(hit, wanted_text) for hit in history):
            failures.append(f"expected a superseded (history) result containing {wanted_text!r}")
    return failures


# --------------------------------------------------------------------------------------------
# Backend seam: the runner's view of the public client
# --------------------------------------------------------------------------------------------


class MemoryBackend(Protocol):
    """The operations a scenario needs; ``HindsightBackend`` adapts the public client."""

    async def retain(
        self,
        namespace: str,
        text: str,
        *,
        speaker: str,
        role: str,
        session_id: str,
        event_time: datetime,
    ) -> object: ...

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
    ) -> list[Hit]: ...

    async def forget(
        self,
        namespace: str,
        *,
        at: datetime,
        memory_ids: list[str] | None = None,
        query: str | None = None,
        whole_namespace: bool = False,
    ) -> object: ...

    async def advance(self, namespace: str, *, to: datetime) -> object: ...

    async def wait_applied(self, receipt: object) -> None: ...


def _hit_from(memory: Any) -> Hit:
    return Hit(
        id=str(memory.id),
        content=str(memory.content),
        kind=str(memory.kind),
        region=str(memory.region),
        status=str(getattr(memory, "status", "active")),
        score=float(getattr(memory, "score", 0.0) or 0.0),
    )


class HindsightBackend:
    """``MemoryBackend`` over ``pipeline.interfaces.client.Hindsight``."""

    def __init__(self, client: Any) -> None:
        self._client = client

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
        return await self._client.retain(
            namespace,
            text,
            speaker=speaker,
            session_id=session_id,
            event_time=event_time,
            role=role,
        )

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
        result = await self._client.recall(
            namespace,
            query,
            at=at,
            limit=limit,
            wait_for=wait_for,
            include_history=include_history,
            regions=regions,
            reinforce=reinforce,
        )
        return [_hit_from(memory) for memory in result.memories]

    async def forget(
        self,
        namespace: str,
        *,
        at: datetime,
        memory_ids: list[str] | None = None,
        query: str | None = None,
        whole_namespace: bool = False,
    ) -> object:
        if memory_ids:
            return await self._client.forget(namespace, memory_ids=memory_ids, at=at)
        if whole_namespace:
            return await self._client.forget(namespace, whole_namespace=True, at=at)
        return await self._client.forget(namespace, query=query, at=at)

    async def advance(self, namespace: str, *, to: datetime) -> object:
        return await self._client.advance(namespace, to=to)

    async def wait_applied(self, receipt: object) -> None:
        await self._client.wait_applied(receipt)


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


@dataclass
class ScenarioResult:
    name: str
    category: str
    language: str
    path: str
    passed: bool
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    namespaces: dict[str, str] = field(default_factory=dict)


def _slug(name: str, limit: int = 40) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:limit].strip("-") or "scenario"


def namespace_for(name: str, alias: str, run_id: str) -> str:
    """``scn-<slug>-<run id>`` for the main namespace, ``scn-<slug>-<alias>-<run id>`` otherwise."""
    middle = _slug(name) if alias == DEFAULT_NAMESPACE_ALIAS else f"{_slug(name)}-{alias}"
    return f"scn-{middle}-{run_id}"


def _clip(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _recall_label(step: RecallStep) -> str:
    where = "" if step.namespace == DEFAULT_NAMESPACE_ALIAS else f" [{step.namespace}]"
    return f"recall{where} {_clip(step.query, 60)!r}"


class _ScenarioRun:
    """State of one scenario run: namespaces, last receipts, receipts not yet known applied."""

    def __init__(self, backend: MemoryBackend, loaded: LoadedScenario, run_id: str) -> None:
        self.backend = backend
        self.loaded = loaded
        self.run_id = run_id
        self.namespaces: dict[str, str] = {}
        self.last_receipt: dict[str, object] = {}
        self.pending: list[object] = []

    def namespace(self, alias: str) -> str:
        if alias not in self.namespaces:
            self.namespaces[alias] = namespace_for(self.loaded.name, alias, self.run_id)
        return self.namespaces[alias]

    def wrote(self, alias: str, receipt: object) -> None:
        self.last_receipt[alias] = receipt
        self.pending.append(receipt)

    async def settle(self) -> None:
        """Read-your-writes across every namespace of the scenario (isolation needs all of them)."""
        while self.pending:
            await self.backend.wait_applied(self.pending.pop(0))

    async def recall(
        self, step: RecallStep, at: datetime, limit: int, *, reinforce: bool = True
    ) -> list[Hit]:
        await self.settle()
        return await self.backend.recall(
            self.namespace(step.namespace),
            step.query,
            at=at,
            limit=limit,
            include_history=step.include_history,
            regions=list(step.regions) if step.regions else None,
            wait_for=self.last_receipt.get(step.namespace),
            reinforce=reinforce,
        )

    async def execute(self, timed: TimedStep) -> list[str]:
        step = timed.step
        if isinstance(step, RetainStep):
            namespace = self.namespace(step.namespace)
            for item in timed.turns:
                receipt = await self.backend.retain(
                    namespace,
                    item.turn.text,
                    speaker=item.turn.speaker,
                    role=item.turn.effective_role,
                    session_id=item.session,
                    event_time=item.at,
                )
                self.wrote(step.namespace, receipt)
            return []
        if isinstance(step, RecallStep):
            # History recalls ask for a few extra results: superseded memories take slots too.
            limit = step.top_k + (5 if step.include_history else 0)
            hits = await self.recall(step, timed.at, limit)
            failures = check_recall(step, hits)
            if failures:
                shown = hits[: max(limit, step.top_k)]
                listing = [
                    f"{number}. {_clip(hit.show())}" for number, hit in enumerate(shown, start=1)
                ]
                return [
                    f"step {timed.index} {_recall_label(step)}: " + "; ".join(failures),
                    *(
                        ["    results: (none)"]
                        if not listing
                        else [f"    {line}" for line in listing]
                    ),
                ]
            return []
        # Commands travel on their own topic: a command published before the turns it concerns
        # are applied may overtake them, so the runner settles first (as for a recall).
        await self.settle()
        if isinstance(step, ForgetStep):
            namespace = self.namespace(step.namespace)
            if step.whole_namespace:
                receipt = await self.backend.forget(namespace, at=timed.at, whole_namespace=True)
            elif step.matching is not None:
                # Probe with the query and with the text itself (recall may cut its results
                # short); probes do not reinforce: looking something up to forget it is no use.
                ids: list[str] = []
                for probe_query in dict.fromkeys(filter(None, (step.query, step.matching))):
                    probe = RecallStep(namespace=step.namespace, query=probe_query, empty=True)
                    hits = await self.recall(probe, timed.at, 20, reinforce=False)
                    ids += [h.id for h in hits if _has(h, step.matching) and h.id not in ids]
                if not ids:
                    return [
                        f"step {timed.index} forget: no memory recalled for "
                        f"{step.query or step.matching!r} contains {step.matching!r}, "
                        "nothing to forget"
                    ]
                receipt = await self.backend.forget(namespace, at=timed.at, memory_ids=ids)
            else:
                receipt = await self.backend.forget(namespace, at=timed.at, query=step.query)
            self.wrote(step.namespace, receipt)
            return []
        for alias in timed.tick_aliases:
            namespace = self.namespace(alias)
            for moment in timed.tick_times:
                self.wrote(alias, await self.backend.advance(namespace, to=moment))
        return []


async def run_scenario(
    backend: MemoryBackend,
    loaded: LoadedScenario,
    *,
    run_id: str | None = None,
    timeout: float = 180.0,
) -> ScenarioResult:
    """Run one scenario in fresh namespaces; stops at the first failing step."""
    run = _ScenarioRun(backend, loaded, run_id or uuid.uuid4().hex[:8])
    started = time.monotonic()
    failures: list[str] = []
    current = 0
    try:
        async with asyncio.timeout(timeout):
            for timed in timeline(loaded.scenario):
                current = timed.index
                failures = await run.execute(timed)
                if failures:
                    break
    except TimeoutError:
        failures = [f"step {current}: timed out after {timeout:.0f}s"]
    except Exception as error:  # a crash is a failed scenario, reported with its step
        failures = [f"step {current} ({type(error).__name__}): {error}"]
    return ScenarioResult(
        name=loaded.name,
        category=loaded.category,
        language=loaded.language,
        path=str(loaded.path),
        passed=not failures,
        failures=failures,
        seconds=time.monotonic() - started,
        namespaces=dict(run.namespaces),
    )


def format_result(result: ScenarioResult) -> str:
    status = "PASS" if result.passed else "FAIL"
    head = f"{status}  {result.category}/{result.name} [{result.language}] ({result.seconds:.1f}s)"
    return "\n".join([head, *(f"      {line}" for line in result.failures)])


async def run_suite(
    backend: MemoryBackend,
    scenarios: Sequence[LoadedScenario],
    *,
    concurrency: int = 1,
    timeout: float = 180.0,
    echo: bool = True,
) -> list[ScenarioResult]:
    """Run scenarios (each in its own namespaces, ``concurrency`` at a time), in input order."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(loaded: LoadedScenario) -> ScenarioResult:
        async with gate:
            result = await run_scenario(backend, loaded, timeout=timeout)
        if echo:
            print(format_result(result), flush=True)
        return result

    return list(await asyncio.gather(*(one(loaded) for loaded in scenarios)))


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


def select(
    scenarios: Sequence[LoadedScenario],
    *,
    names: Sequence[str] = (),
    categories: Sequence[str] = (),
    languages: Sequence[str] = (),
) -> list[LoadedScenario]:
    return [
        item
        for item in scenarios
        if (not names or any(part in item.name for part in names))
        and (not categories or item.category in categories)
        and (not languages or item.language in languages)
    ]


@contextlib.asynccontextmanager
async def hindsight_backend(settings: Any) -> AsyncIterator[HindsightBackend]:
    """The real stack: embedded broker + worker when ``settings.bootstrap`` is None."""
    from pipeline.interfaces.client import Hindsight
    from pipeline.runtime.stack import running_stack

    async with running_stack(settings) as live, Hindsight.connect(live) as client:
        yield HindsightBackend(client)


async def run_against_stack(
    scenarios: Sequence[LoadedScenario],
    settings: Any,
    *,
    concurrency: int = 1,
    timeout: float = 180.0,
    echo: bool = True,
) -> list[ScenarioResult]:
    async with hindsight_backend(settings) as backend:
        return await run_suite(
            backend, scenarios, concurrency=concurrency, timeout=timeout, echo=echo
        )


# --------------------------------------------------------------------------------------------
# CLI: hindsight scenarios run PATH... | hindsight scenarios validate PATH...
# --------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hindsight scenarios", description="Validate or run the scenario suite."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser("validate", help="parse and validate scenario files only")
    validate.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    run = commands.add_parser("run", help="run scenarios against a live stack")
    run.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH", help="scenario files or directories"
    )
    run.add_argument("-k", "--name", action="append", default=[], help="only names containing this")
    run.add_argument("--category", action="append", default=[], choices=CATEGORIES)
    run.add_argument("--language", action="append", default=[], choices=["en", "zh"])
    run.add_argument("--concurrency", type=int, default=1, help="scenarios run at once (default 1)")
    run.add_argument(
        "--timeout", type=float, default=180.0, help="seconds per scenario (default 180)"
    )
    run.add_argument("--data-dir", type=Path, default=None, help="embedded broker/Milvus data dir")
    run.add_argument("--bootstrap", default=None, help="an existing Kafka (default: embedded)")
    run.add_argument("--report", type=Path, default=None, help="write a JSON report here")
    return parser


def _write_report(path: Path, results: Sequence[ScenarioResult]) -> None:
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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``hindsight scenarios``; exit 0 when every selected scenario passes."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in and args_in[0] not in {"run", "validate", "-h", "--help"}:
        args_in.insert(0, "run")  # ``hindsight scenarios PATH`` means run
    args = _parser().parse_args(args_in)
    try:
        scenarios = load_scenarios(args.paths)
    except ScenarioFormatError as error:
        print(str(error), file=sys.stderr)
        return 2
    if args.command == "validate":
        counts: dict[tuple[str, str], int] = {}
        for item in scenarios:
            counts[(item.category, item.language)] = (
                counts.get((item.category, item.language), 0) + 1
            )
        print(f"{len(scenarios)} scenarios valid")
        for (category, language), count in sorted(counts.items()):
            print(f"  {category:<20} {language}  {count}")
        return 0
    chosen = select(scenarios, names=args.name, categories=args.category, languages=args.language)
    if not chosen:
        print("no scenario matches the selection", file=sys.stderr)
        return 2
    from pipeline.runtime.settings import Settings

    settings = Settings.from_env().with_overrides(data_dir=args.data_dir, bootstrap=args.bootstrap)
    results = asyncio.run(
        run_against_stack(chosen, settings, concurrency=args.concurrency, timeout=args.timeout)
    )
    print()
    print(summary_table(results))
    if args.report is not None:
        _write_report(args.report, results)
    failed = [r for r in results if not r.passed]
    if failed:
        print(f"\n{len(failed)} of {len(results)} scenarios failed", file=sys.stderr)
        return 1
    print(f"\nall {len(results)} scenarios passed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
