"""Derived records: memory units (the compacted state topic) and the change feed.

These are views (I1): rebuilding from the input log reproduces them. Their JSON is versioned
(``schema_version``) like the input events, never pickled.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

MEMORY_RECORD_VERSION: Final = 2
MEMORY_UPDATE_VERSION: Final = 1
WATERMARK_VERSION: Final = 1
BANK_COUNTERS_VERSION: Final = 1

Region = Literal["episodic", "semantic", "procedural"]
Kind = Literal["preference", "task_state", "fact", "procedure", "decision", "emotion", "chit_chat"]
Status = Literal["active", "superseded", "cold", "forgotten"]
ChangeType = Literal[
    "created",
    "merged",
    "confirmed",
    "linked",
    "superseded",
    "reinforced",
    "cooled",
    "reactivated",
    "pinned",
    "unpinned",
    "forgotten",
    "erased",
]

REGIONS: tuple[Region, ...] = ("episodic", "semantic", "procedural")
KINDS: tuple[Kind, ...] = (
    "preference",
    "task_state",
    "fact",
    "procedure",
    "decision",
    "emotion",
    "chit_chat",
)


class Triplet(BaseModel):
    model_config = ConfigDict(frozen=True)

    subject: str
    attribute: str
    value: str


class AttributeShare(BaseModel):
    """One attribute in the attribute model's distribution for a statement (``Slot``)."""

    model_config = ConfigDict(frozen=True)

    attribute: str
    probability: float
    single_valued: bool  # a person holds one value of it at a time


class Slot(BaseModel):
    """What a statement's slot looks like with its values masked (pipeline/memory/rules/slots.py).

    ``prepare`` computes it and embeds ``frame`` in the same encoder call as the turn; the record
    keeps it, so a restored bank decides updates exactly as the live one did (I2).
    """

    model_config = ConfigDict(frozen=True)

    frame: str  # the statement with its value spans masked
    terms: list[str] = Field(default_factory=list)  # the frame's content words
    values: list[str] = Field(default_factory=list)  # canonical values: "number:4500", "state:done"
    subjects: list[str] = Field(default_factory=list)  # values at the start: what it is about
    # Values the statement says were left ("moved from MySQL to …", 从MySQL换成…): still named,
    # but no longer the value.
    departed: list[str] = Field(default_factory=list)
    moment: bool = False  # told as something that happened at one time (yesterday, 上周…)
    additive: bool = False  # adds to what was said ("also", 也)
    question: bool = False  # asks rather than states
    keeps: bool = False  # says its value holds on ("still", 还在): gives no new one
    weighs: bool = False  # only weighs a change ("might", 考虑): has not made it
    ends: bool = False  # says something stopped ("gave up", 戒了)
    corrects: bool = False  # says what was told before was wrong ("my bad", 说错了)
    amount_moved: bool = False  # a number right after words that say it moved ("up to", 涨到)
    # The masked frame's embedding (float32 little-endian, base64), recorded by builds before
    # 2026-12-03; now None: the slot is compared by the statement's own vector (slots.slot_vector).
    vector_b64: str | None = None
    # The attribute model's answer (pipeline/models/attributes.py): which attribute the statement
    # gives a value of, how sure it is, and whether a person holds one value of it at a time.
    attribute: str | None = None
    attribute_probability: float = 0.0
    single_valued: bool = False
    # The model's most probable attributes, most probable first (the argmax above is the first):
    # two statements are compared by their whole distributions, not two argmaxes
    # (attribute_chance.same_attribute_chance). None in records of builds before it: the argmax
    # rule decides.
    attribute_shares: list[AttributeShare] | None = None
    # The stage model's answer (pipeline/models/stages.py): the stage of a task the statement
    # tells (planned, in_progress, done, or none) and how sure it is. None in records of builds
    # before it, and for statements it does not read: the state patterns decide alone.
    stage: str | None = None
    stage_probability: float = 0.0


class Association(BaseModel):
    model_config = ConfigDict(frozen=True)

    memory_id: str
    relation: Literal["similar", "supersedes", "superseded_by", "merged", "same_segment"]
    weight: float


class HistoryEntry(BaseModel):
    """One change to a memory, with the input event that caused it (for audit)."""

    model_config = ConfigDict(frozen=True)

    at: datetime
    change: ChangeType
    cause_event_id: str
    detail: str = ""


class SourceTurn(BaseModel):
    """Provenance: a turn this memory came from, and where it sits in the input log."""

    model_config = ConfigDict(frozen=True)

    event_id: str
    session_id: str
    speaker: str
    event_time: datetime
    dialogue_id: str | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    # The data key that sealed the turn (None for plain input): erasing the memory destroys it,
    # and the record itself is sealed with its first source's key (docs/ERASURE.md).
    key_id: str | None = None


class MemoryRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    schema_version: Literal[2] = MEMORY_RECORD_VERSION
    id: str
    namespace: str
    region: Region
    kind: Kind
    content: str
    # Text the indexes see: content plus speaker and segment context (for pronouns and ellipsis).
    search_text: str
    entities: list[str] = Field(default_factory=list)
    triplet: Triplet | None = None
    slot: Slot | None = None  # for updates by slot; None for records made before it existed
    base_importance: float
    confirmations: int = 0
    importance: float
    created_at: datetime
    valid_from: datetime
    valid_to: datetime | None = None
    updated_at: datetime
    status: Status = "active"
    pinned: bool = False
    superseded_by: str | None = None
    associations: list[Association] = Field(default_factory=list)
    provenance: list[SourceTurn] = Field(default_factory=list)
    segment_id: str
    access_count: int = 0
    last_access: datetime | None = None
    activation: float
    activation_at: datetime
    history: list[HistoryEntry] = Field(default_factory=list)
    vector: list[float] = Field(default_factory=list)
    # Input-log offset of the turn that created it: a bank restored from the state topic orders
    # its records exactly as the live bank inserted them (tie-breaks and segments depend on it).
    origin_offset: int = -1

    @property
    def source_event_ids(self) -> list[str]:
        return [turn.event_id for turn in self.provenance]


class MemoryChanged(BaseModel):
    """One entry of the memory-updates change feed (documented in docs/MEMORY_UPDATES.md)."""

    model_config = ConfigDict(frozen=True)

    schema_version: Literal[1] = MEMORY_UPDATE_VERSION
    event_type: Literal["MemoryChanged"] = "MemoryChanged"
    namespace: str
    memory_id: str
    change: ChangeType
    event_time: datetime
    cause_event_id: str
    related_ids: list[str] = Field(default_factory=list)
    status: Status
    region: Region
    kind: Kind
    content: str
    importance: float
    activation: float


class Watermark(BaseModel):
    """How far consolidation has applied an input partition (I5); lives in the state topic.

    ``input_timestamp_ms`` is the broker timestamp of the input event at ``offset``, so a follower
    can tell how long a turn took to become recallable.
    """

    model_config = ConfigDict(frozen=True)

    schema_version: Literal[1] = WATERMARK_VERSION
    event_type: Literal["Watermark"] = "Watermark"
    topic: str
    partition: int
    offset: int
    input_timestamp_ms: int | None = None


class BankCounters(BaseModel):
    """A namespace's consolidation schedule, kept beside its records in the state topic.

    Restoring a partition's tables reads these back, so "light consolidation every N turns" and
    idle detection fall on the same events after a restart or a rebalance as in a replay (I2).
    """

    model_config = ConfigDict(frozen=True)

    schema_version: Literal[1] = BANK_COUNTERS_VERSION
    event_type: Literal["BankCounters"] = "BankCounters"
    namespace: str
    turns_seen: int = 0
    turns_since_consolidation: int = 0
    last_turn_at: datetime | None = None


class DeadLetter(BaseModel):
    """A rejected input, kept with its original bytes (I7)."""

    model_config = ConfigDict(frozen=True)

    schema_version: Literal[1] = 1
    event_type: Literal["DeadLetter"] = "DeadLetter"
    stage: str
    reason: str
    field: str | None = None
    source_topic: str
    source_partition: int
    source_offset: int
    original_key_b64: str | None = None
    original_value_b64: str
