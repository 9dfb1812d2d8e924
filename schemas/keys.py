"""API key events: the compacted keys topic, keyed by key id, is the truth about keys (I1).

``KeyCreated`` carries the Argon2id hash of the secret (never the secret); ``KeyRevoked`` carries
the key's name and scopes again, so once compaction keeps only the revocation (the latest value
per key id) ``keys list`` can still say what the key was. Versioned like every event (I6): old
versions go through ``schemas.upcasting`` with this module's version table.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Final, Literal

import orjson
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from schemas.codec import validate
from schemas.errors import InvalidEvent
from schemas.upcasting import upcast

Action = Literal["retain", "recall", "forget", "erase", "admin"]

KEY_CREATED_VERSION: Final = 1
KEY_REVOKED_VERSION: Final = 1
KEY_ID_PATTERN = r"^[0-9a-f]{12}$"


def _require_timezone(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise ValueError("needs a timezone offset, e.g. 2024-05-01T10:00:00+00:00")
    return value


AwareTime = Annotated[datetime, AfterValidator(_require_timezone)]


class ScopeGrant(BaseModel):
    """``actions`` in every namespace ``pattern`` matches (grammar: pipeline.security.scopes)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    pattern: str = Field(min_length=1, max_length=129)
    actions: list[Action] = Field(min_length=1, max_length=5)


class _KeyEvent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    event_id: str = Field(min_length=1, max_length=128)
    key_id: str = Field(pattern=KEY_ID_PATTERN)
    name: str = Field(default="", max_length=200)
    scopes: list[ScopeGrant] = Field(default_factory=list, max_length=100)


class KeyCreated(_KeyEvent):
    schema_version: Literal[1] = KEY_CREATED_VERSION
    event_type: Literal["KeyCreated"] = "KeyCreated"
    secret_hash: str = Field(min_length=20, max_length=512, description="Argon2id PHC string")
    created_at: AwareTime
    expires_at: AwareTime | None = None
    created_by: str | None = Field(default=None, max_length=200)


class KeyRevoked(_KeyEvent):
    schema_version: Literal[1] = KEY_REVOKED_VERSION
    event_type: Literal["KeyRevoked"] = "KeyRevoked"
    revoked_at: AwareTime
    reason: str | None = Field(default=None, max_length=1_000)


KeyEvent = KeyCreated | KeyRevoked

KEY_EVENT_TYPES: dict[str, type[KeyCreated] | type[KeyRevoked]] = {
    "KeyCreated": KeyCreated,
    "KeyRevoked": KeyRevoked,
}
KEY_EVENT_VERSIONS: dict[str, int] = {
    "KeyCreated": KEY_CREATED_VERSION,
    "KeyRevoked": KEY_REVOKED_VERSION,
}


def decode_key_event(raw: bytes) -> KeyEvent:
    """Parse, upcast and validate one keys-topic value; errors name the field."""
    try:
        payload: Any = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise InvalidEvent(f"malformed JSON: {error}", None, "decode") from error
    if not isinstance(payload, dict):
        raise InvalidEvent("key event must be a JSON object", None, "decode")
    upcasted = upcast(payload, versions=KEY_EVENT_VERSIONS)
    return validate(KEY_EVENT_TYPES[upcasted["event_type"]], upcasted)
