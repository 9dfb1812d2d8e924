"""Prepared events: what the ``prepare`` stage decided about each input event (I1, I2).

``hindsight.prepared.v1`` carries one ``EventPrepared`` per input event, on the same key and
partition, in the same order: the decoded event itself, what the classifier and extractor made of
a turn, and the vectors with the id of the encoder that computed them. Consolidation and replay
read only this topic and never load a model; a reindex with another encoder writes a prepared
topic of its own. Rejected input passes through as a marker (its dead letter went to the
dead-letter topic), so the views' watermarks still move past it.
"""

from __future__ import annotations

import base64
from typing import Annotated, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from schemas.events import (
    PREPARED_SCHEMA_VERSION,
    CommandIssued,
    ExtractorInfo,
    MemoriesRecalled,
    TurnRecorded,
)
from schemas.memory import Kind, Region, Slot, Triplet

Vector = npt.NDArray[np.float32]


def encode_vector(vector: Vector) -> str:
    """float32 little-endian bytes, base64: exact, and a quarter of a JSON float list."""
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(text: str) -> Vector:
    return np.frombuffer(base64.b64decode(text), dtype="<f4").astype(np.float32)


class LogPosition(BaseModel):
    """Where the input event sits in ``hindsight.events.v1``."""

    model_config = ConfigDict(frozen=True)

    topic: str
    partition: int = Field(ge=0)
    offset: int = Field(ge=0)
    timestamp_ms: int = -1  # the broker's timestamp of the input event (freshness metrics)


class ModelIds(BaseModel):
    """The models whose output an event carries (recorded so replay knows what it replays)."""

    model_config = ConfigDict(frozen=True)

    encoder: str
    classifier: str
    extractor: ExtractorInfo | None = None  # set when a recorded LLM extraction was used
    attributes: str | None = None  # the slot-attribute model, when it read the batch's statements
    stages: str | None = None  # the task-stage model, when it read them too


class TurnAnalysis(BaseModel):
    """The cheap deterministic work on a turn plus its embedding (or the LLM's recorded answer)."""

    model_config = ConfigDict(frozen=True)

    remember: bool
    kind: Kind
    region: Region
    base_importance: float = Field(ge=0.0, le=1.0)
    reason: str = ""
    content: str  # the memory's content: the turn text, or the extractor's rewrite
    search_text: str  # what the indexes see
    triplet: Triplet | None = None
    entities: list[str] = Field(default_factory=list)
    vector_b64: str | None = None  # only for remembered turns
    slot: Slot | None = None  # the slot signal with its frame's vector (remembered statements)
    # The learned classifier's probability that the turn is a memory, when it judged the turn
    # (consolidate's echo rule reads it; replay reads it from here, never from the model).
    keep_probability: float | None = Field(default=None, ge=0.0, le=1.0)

    def vector(self) -> Vector:
        if self.vector_b64 is None:
            raise ValueError("this turn was not remembered and has no vector")
        return decode_vector(self.vector_b64)


class Rejected(BaseModel):
    """Why the input event could not be used (the dead letter holds its bytes)."""

    model_config = ConfigDict(frozen=True)

    stage: str
    reason: str
    field: str | None = None
    # The input's data key was destroyed: it was erased, not bad (no dead letter, I8).
    shredded: bool = False


InputEventUnion = Annotated[
    TurnRecorded | CommandIssued | MemoriesRecalled, Field(discriminator="event_type")
]


class EventPrepared(BaseModel):
    model_config = ConfigDict(frozen=True)

    schema_version: Literal[1] = PREPARED_SCHEMA_VERSION
    event_type: Literal["EventPrepared"] = "EventPrepared"
    source: LogPosition
    models: ModelIds
    event: InputEventUnion | None = None  # None when rejected
    rejected: Rejected | None = None
    analysis: TurnAnalysis | None = None  # turns only
    query_vector_b64: str | None = None  # commands that carry a query (forget by query)
    # How much of that query the encoder reads (``encoders.known_share``): the cosine of a
    # memory that shares none of its words counts that much (forgetting.forget_matches). Events
    # prepared before it was recorded read 1.0, which is how they were judged then.
    query_known_share: Annotated[float, Field(ge=0.0, le=1.0)] = 1.0

    @property
    def namespace(self) -> str | None:
        return None if self.event is None else self.event.namespace

    def query_vector(self) -> Vector | None:
        return None if self.query_vector_b64 is None else decode_vector(self.query_vector_b64)
