"""Bytes <-> events with orjson; every failure becomes an ``InvalidEvent`` naming the field."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from schemas.errors import InvalidEvent
from schemas.events import EVENT_TYPES, MAX_EVENT_BYTES, InputEvent
from schemas.upcasting import upcast

if TYPE_CHECKING:
    from schemas.prepared import EventPrepared

ModelT = TypeVar("ModelT", bound=BaseModel)


def encode(model: BaseModel) -> bytes:
    return orjson.dumps(model.model_dump(mode="json"))


def decode_event(raw: bytes | None) -> InputEvent:
    """Parse, upcast and validate one input event."""
    if raw is None:
        raise InvalidEvent("message has no value", None, "decode")
    if len(raw) > MAX_EVENT_BYTES:
        raise InvalidEvent(f"event is {len(raw)} bytes, limit {MAX_EVENT_BYTES}", None, "decode")
    try:
        payload: Any = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise InvalidEvent(f"malformed JSON: {error}", None, "decode") from error
    if not isinstance(payload, dict):
        raise InvalidEvent("event must be a JSON object", None, "decode")
    upcasted = upcast(payload)
    model = EVENT_TYPES.get(upcasted["event_type"])
    if model is None:
        raise InvalidEvent(
            f"{upcasted['event_type']} is not an input event", "event_type", "validate"
        )
    return validate(model, upcasted)  # type: ignore[return-value]


def decode_prepared(raw: bytes | None) -> EventPrepared:
    """Parse, upcast and validate one prepared event (what consolidation and replay read)."""
    from schemas.prepared import EventPrepared

    if raw is None:
        raise InvalidEvent("message has no value", None, "decode")
    try:
        payload: Any = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise InvalidEvent(f"malformed JSON: {error}", None, "decode") from error
    if not isinstance(payload, dict) or payload.get("event_type") != "EventPrepared":
        raise InvalidEvent("expected an EventPrepared object", "event_type", "decode")
    return validate(EventPrepared, upcast(payload))


def validate(model: type[ModelT], payload: dict[str, Any]) -> ModelT:
    try:
        return model.model_validate(payload)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or None
        message = first["msg"]
        if first["type"] == "value_error" and field is None:
            # model_post_init errors carry "field: reason" in the message
            text = str(first.get("ctx", {}).get("error", message))
            if ": " in text:
                field, message = text.split(": ", 1)
        raise InvalidEvent(message, field, "validate") from error


def decode_model(model: type[ModelT], raw: bytes) -> ModelT:
    return model.model_validate(orjson.loads(raw))
