"""What a scenario step can say: durations and times, turns, and the four steps.

``retain``, ``recall``, ``forget`` and ``advance`` as strict pydantic models (unknown keys are
errors), with the YAML shorthands (``retain: "text"``, ``advance: 3d``) normalised before
validation. Pure: no I/O. The format is documented in ``docs/SCENARIOS.md``.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from schemas.events import Role
from schemas.memory import Kind, Region

Language = Literal["en", "zh"]

DEFAULT_NAMESPACE_ALIAS = "main"
DEFAULT_SESSION = "s1"
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
# Turns, expectations and steps
# --------------------------------------------------------------------------------------------


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Turn(StrictModel):
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


class Match(StrictModel):
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


class RetainStep(StrictModel):
    step: Literal["retain"] = "retain"
    namespace: Alias = DEFAULT_NAMESPACE_ALIAS
    turns: list[Turn] = Field(min_length=1)


class RecallStep(StrictModel):
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


class ForgetStep(StrictModel):
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


class AdvanceStep(StrictModel):
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
