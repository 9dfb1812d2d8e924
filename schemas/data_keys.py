"""The data-key topic ``hindsight.data-keys.v1``: wrapped data keys, their destruction, erasures.

A compacted topic keyed as follows, each record on its namespace's partition:

``<key id>``
    ``DataKeyCreated``: the data key wrapped by the key-encryption key (the master key or a KMS);
    a tombstone once destroyed, so compaction removes the wrapped bytes from the segment files.
``__destroyed__:<key id>``
    ``KeyDestroyed``: that the key was destroyed, by which erase — kept, so a process that starts
    after compaction still tells "destroyed" (shredded) from "not seen yet" (wait for it).
``__erasure__:<namespace>:<erase event id>``
    ``ErasureRecorded``: what an erase took, at which input position; replay puts it back at that
    place even though the erase command itself can no longer be read.

None of these carry content (I8); key ids are random, memory ids are content hashes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.events import EventTime, Namespace
from schemas.prepared import LogPosition
from schemas.sealed import KeyId

DATA_KEY_VERSION: Final = 1
KEY_DESTROYED_VERSION: Final = 1
ERASURE_VERSION: Final = 1

DESTROYED_PREFIX = "__destroyed__:"
ERASURE_PREFIX = "__erasure__:"
ROLL_KEY = "__roll__"  # a later write that rolls the segment holding a tombstone


class DataKeyCreated(BaseModel):
    """A data key, wrapped: only a process holding the key-encryption key can unwrap it."""

    model_config = ConfigDict(frozen=True)

    schema_version: Literal[1] = DATA_KEY_VERSION
    event_type: Literal["DataKeyCreated"] = "DataKeyCreated"
    key_id: KeyId
    namespace: Namespace
    # The one event this key seals (a turn, an erase); None for a namespace's command key.
    event_id: str | None = Field(default=None, max_length=128)
    wrapper_id: str = Field(min_length=1, max_length=256)  # which key-encryption key wrapped it
    wrapped_b64: str = Field(min_length=1, max_length=2048)
    created_at: datetime  # wall clock of the creating client: audit only, never decides


class KeyDestroyed(BaseModel):
    """A data key was destroyed inside the erase's transaction; ``at`` is the erase's event time."""

    model_config = ConfigDict(frozen=True)

    schema_version: Literal[1] = KEY_DESTROYED_VERSION
    event_type: Literal["KeyDestroyed"] = "KeyDestroyed"
    key_id: KeyId
    namespace: Namespace
    cause_event_id: str
    at: EventTime


class ErasureRecorded(BaseModel):
    """An applied erase: what it took, where it sits in the input log, how many keys went.

    Written by ``consolidate`` in the erase's transaction — to the data-key topic (the ledger
    replay reads) and to the state topic (``__erasure__:<namespace>:<cause>``), and by replay into
    its target state topic, so "the namespace was erased" stays an event after the keys are gone.
    """

    model_config = ConfigDict(frozen=True)

    schema_version: Literal[1] = ERASURE_VERSION
    event_type: Literal["ErasureRecorded"] = "ErasureRecorded"
    namespace: Namespace
    cause_event_id: str
    at: EventTime
    whole_namespace: bool
    memory_ids: list[str] = Field(default_factory=list)  # empty for a whole namespace
    keys_destroyed: int = Field(ge=0)
    source: LogPosition


def destroyed_key(key_id: str) -> bytes:
    return f"{DESTROYED_PREFIX}{key_id}".encode()


def erasure_key(namespace: str, cause_event_id: str) -> bytes:
    return f"{ERASURE_PREFIX}{namespace}:{cause_event_id}".encode()
