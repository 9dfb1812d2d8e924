"""Sealed values: content encrypted with a data key before it reaches any topic (I8).

Every value that carries what a user said — input turns, commands and signals, prepared events,
recorded extractions, memory records and change-feed entries — travels as a ``Sealed``
envelope. Only the namespace, the data key's id and (for prepared events) the input position are
readable; the content is AES-256-GCM ciphertext whose associated data binds the namespace, the key
id, the topic role and the position, so an envelope moved to another topic, namespace or position
fails to open. Destroying the data key makes every copy unreadable at once: crypto-shredding
(``pipeline.crypto``, docs/ERASURE.md). Watermarks, bank counters, tombstones and erasure records
carry no content and stay plain.
"""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.events import Namespace
from schemas.prepared import LogPosition

SEALED_SCHEMA_VERSION: Final = 1
KEY_ID_PATTERN = re.compile(r"^dk_[0-9a-f]{32}$")

KeyId = Annotated[str, Field(pattern=KEY_ID_PATTERN.pattern)]


class Sealed(BaseModel):
    """``{"schema_version":1,"event_type":"Sealed","namespace":…,"key_id":…,"nonce":…,…}``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = SEALED_SCHEMA_VERSION
    event_type: Literal["Sealed"] = "Sealed"
    namespace: Namespace
    key_id: KeyId
    nonce: str = Field(min_length=16, max_length=16)  # base64 of 12 bytes
    ciphertext: str = Field(min_length=1)  # base64 of AES-256-GCM ciphertext and tag
    # Prepared events only: where the input event sits, readable so a stage that cannot open the
    # envelope (its key was destroyed) still moves its watermark past it and replay can put a
    # recorded erasure at its place.
    source: LogPosition | None = None
