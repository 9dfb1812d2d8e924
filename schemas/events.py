"""Input events: the only source of truth (invariant I1).

Every event carries ``schema_version`` and ``event_type``; old versions are upcast by
``schemas.upcasting`` before any stage sees them (I6). Times are event times, ISO-8601 with an
offset on the wire and timezone-aware UTC datetimes in Python.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal

import orjson
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from schemas.memory import Kind, Triplet
from schemas.policy import RedactionSettings

NAMESPACE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")
MAX_TURN_CHARS = 16_000
MAX_METADATA_BYTES = 16 * 1024
MAX_EVENT_BYTES = 256 * 1024
# Who said a turn: prepare keeps anything but the user's own words as second-hand.
Role = Literal["user", "assistant", "system", "tool"]

TURN_SCHEMA_VERSION: Final = 2
COMMAND_SCHEMA_VERSION: Final = 1
SIGNAL_SCHEMA_VERSION: Final = 1
EXTRACTION_SCHEMA_VERSION: Final = 1
PREPARED_SCHEMA_VERSION: Final = 1  # schemas.prepared.EventPrepared


def _check_namespace(value: str) -> str:
    if not NAMESPACE_PATTERN.match(value):
        raise ValueError(
            "namespace must be 1-128 characters of letters, digits and . _ : @ -, "
            "starting with a letter or digit"
        )
    return value


def _require_timezone(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError("event_time needs a timezone offset, e.g. 2024-05-01T10:00:00+00:00")
    try:
        return value.astimezone(UTC)
    except OverflowError as error:  # e.g. 0001-01-01T00:00:00+05:00: pydantic only maps ValueError
        raise ValueError("event_time is out of range once converted to UTC") from error


def check_namespace(value: str) -> str:
    """Validate a namespace outside an event (recall, inspect), naming the field on failure."""
    from schemas.errors import InvalidEvent

    try:
        return _check_namespace(value)
    except ValueError as error:
        raise InvalidEvent(str(error), "namespace", "validate") from error


def _check_metadata(value: dict[str, Any]) -> dict[str, Any]:
    """Metadata must travel as JSON (orjson: integers within 64 bits) and stay small."""
    try:
        size = len(orjson.dumps(value))
    except TypeError as error:
        raise ValueError(f"must be JSON with 64-bit integers at most ({error})") from error
    if size > MAX_METADATA_BYTES:
        raise ValueError(f"is {size} bytes as JSON, limit {MAX_METADATA_BYTES}")
    return value


Namespace = Annotated[str, AfterValidator(_check_namespace)]
Metadata = Annotated[dict[str, Any], AfterValidator(_check_metadata)]
EventTime = Annotated[datetime, AfterValidator(_require_timezone)]
EventId = Annotated[str, Field(min_length=1, max_length=128)]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", strict=False)

    event_id: EventId
    namespace: Namespace
    event_time: EventTime


class TurnRecorded(_Event):
    """One conversation turn published by an agent."""

    schema_version: Literal[2] = TURN_SCHEMA_VERSION
    event_type: Literal["TurnRecorded"] = "TurnRecorded"
    session_id: str = Field(min_length=1, max_length=128)
    speaker: str = Field(min_length=1, max_length=128)
    role: Role = "user"
    text: str = Field(max_length=MAX_TURN_CHARS)
    metadata: Metadata = Field(default_factory=dict)

    def model_post_init(self, __context: Any) -> None:
        if not self.text.strip():
            raise ValueError("text: must not be empty or whitespace")


CommandName = Literal["forget", "erase", "pin", "unpin", "tick", "feedback", "set_policy"]


class CommandIssued(_Event):
    """A command against a namespace's memory.

    ``forget`` marks memories forgotten (kept for audit, never recalled); ``erase`` is the hard
    erase; ``tick`` advances event time so idle consolidation and cooling happen on replay too;
    ``feedback`` carries a usefulness score for memories an answer used; ``set_policy`` sets the
    namespace's redaction from this position on (schemas/policy.py).
    """

    schema_version: Literal[1] = COMMAND_SCHEMA_VERSION
    event_type: Literal["CommandIssued"] = "CommandIssued"
    command: CommandName
    memory_ids: list[str] = Field(default_factory=list, max_length=10_000)
    whole_namespace: bool = False
    query: str | None = Field(default=None, max_length=4_000)
    reason: str | None = Field(default=None, max_length=1_000)
    score: float | None = None
    redaction: RedactionSettings | None = None  # set_policy only

    def model_post_init(self, __context: Any) -> None:
        if (self.command == "set_policy") != (self.redaction is not None):
            raise ValueError("redaction: required with set_policy and only there")


class RecallHit(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    memory_id: str
    rank: int = Field(ge=0)
    score: float


class MemoriesRecalled(_Event):
    """Reinforcement signal: which memories a recall returned (the activation table reads it)."""

    schema_version: Literal[1] = SIGNAL_SCHEMA_VERSION
    event_type: Literal["MemoriesRecalled"] = "MemoriesRecalled"
    query: str = Field(default="", max_length=4_000)
    hits: list[RecallHit] = Field(default_factory=list, max_length=1_000)


class ExtractorInfo(BaseModel):
    """Which extractor produced a record: the model and the prompt it was asked with."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    model: str = Field(min_length=1, max_length=256)
    prompt_version: str = Field(min_length=1, max_length=64)


class Extraction(BaseModel):
    """What an extractor decided about one turn (the LLM's answer, or the rules' on fallback)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    remember: bool
    kind: Kind
    importance: float = Field(ge=0.0, le=1.0)
    triplet: Triplet | None = None
    entities: list[str] = Field(default_factory=list, max_length=64)
    # When set, the memory's content instead of the turn text (e.g. pronouns resolved).
    content: str | None = Field(default=None, max_length=MAX_TURN_CHARS)


class ExtractionRecorded(_Event):
    """A non-deterministic extraction, recorded before it is used so replay reads it (I2).

    ``event_time`` is the turn's. ``source`` says whether the LLM answered or the rules' result
    stood in (with ``error`` saying why). A turn's extraction is the first record of its highest
    ``revision``: live records are revision 0 and an explicit re-extract replay writes a higher one.
    """

    schema_version: Literal[1] = EXTRACTION_SCHEMA_VERSION
    event_type: Literal["ExtractionRecorded"] = "ExtractionRecorded"
    turn_event_id: EventId
    extractor: ExtractorInfo
    extraction: Extraction
    source: Literal["llm", "rules_fallback"] = "llm"
    error: str | None = Field(default=None, max_length=2_000)
    revision: int = Field(default=0, ge=0)


InputEvent = TurnRecorded | CommandIssued | MemoriesRecalled

EVENT_TYPES: dict[str, type[_Event]] = {
    "TurnRecorded": TurnRecorded,
    "CommandIssued": CommandIssued,
    "MemoriesRecalled": MemoriesRecalled,
    "ExtractionRecorded": ExtractionRecorded,
}

CURRENT_VERSIONS: dict[str, int] = {
    "TurnRecorded": TURN_SCHEMA_VERSION,
    "CommandIssued": COMMAND_SCHEMA_VERSION,
    "MemoriesRecalled": SIGNAL_SCHEMA_VERSION,
    "ExtractionRecorded": EXTRACTION_SCHEMA_VERSION,
    "EventPrepared": PREPARED_SCHEMA_VERSION,
}


def iso(moment: datetime) -> str:
    """Wire format of an event time."""
    return moment.astimezone(UTC).isoformat()
