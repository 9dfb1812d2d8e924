"""Upcaster registry: old event versions become the current one before any stage sees them.

Each entry maps ``(event_type, version)`` to a pure function returning the next version's dict.
Fixtures for every old version live in ``schemas/fixtures`` and are exercised by the unit tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from schemas.errors import InvalidEvent, UnknownSchemaVersion
from schemas.events import CURRENT_VERSIONS

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


def _turn_v1_to_v2(event: dict[str, Any]) -> dict[str, Any]:
    """v1 turns had ``content``, ``user`` and a ``timestamp`` in epoch seconds, and no session."""
    from datetime import UTC, datetime

    upgraded = {k: v for k, v in event.items() if k not in {"content", "user", "timestamp"}}
    upgraded["text"] = event.get("content", "")
    upgraded["speaker"] = event.get("user", "user")
    upgraded["session_id"] = event.get("session_id") or "default"
    timestamp = event.get("timestamp")
    if not isinstance(timestamp, int | float) or isinstance(timestamp, bool):
        raise InvalidEvent("v1 timestamp must be epoch seconds", "timestamp", "upcast")
    try:
        upgraded["event_time"] = datetime.fromtimestamp(timestamp, UTC).isoformat()
    except (OverflowError, OSError, ValueError) as error:  # a poison value must dead-letter (I7)
        raise InvalidEvent("v1 timestamp is out of range", "timestamp", "upcast") from error
    upgraded["schema_version"] = 2
    return upgraded


UPCASTERS: dict[tuple[str, int], Upcaster] = {
    ("TurnRecorded", 1): _turn_v1_to_v2,
}


def upcast(
    event: dict[str, Any], *, versions: Mapping[str, int] = CURRENT_VERSIONS
) -> dict[str, Any]:
    """Apply upcasters until the event is at its type's current version.

    ``versions`` is the table of event types this stream carries (input events by default; the
    keys topic passes its own), so an event of another stream is refused as an unknown type.
    """
    event_type = event.get("event_type")
    if not isinstance(event_type, str) or event_type not in versions:
        raise InvalidEvent(f"unknown event_type {event_type!r}", "event_type", "upcast")
    version = event.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise InvalidEvent("must be an integer", "schema_version", "upcast")
    current = versions[event_type]
    while version != current:
        step = UPCASTERS.get((event_type, version))
        if step is None:
            raise UnknownSchemaVersion(event_type, version)
        event = step(event)
        version = event["schema_version"]
    return event
