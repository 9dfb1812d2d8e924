"""Exceptions with one root, whose messages name the field, event or namespace."""

from __future__ import annotations


class HindsightError(Exception):
    """Root of every error Hindsight raises on purpose."""


class InvalidEvent(HindsightError):
    """An input event that cannot be accepted; ``field`` names what was wrong when known."""

    def __init__(self, reason: str, field: str | None = None, stage: str = "decode") -> None:
        self.reason = reason
        self.field = field
        self.stage = stage
        super().__init__(f"{field}: {reason}" if field else reason)


class UnknownSchemaVersion(InvalidEvent):
    def __init__(self, event_type: str, version: object) -> None:
        super().__init__(
            f"unknown schema_version {version!r} for {event_type}", "schema_version", "upcast"
        )


class WatermarkTimeout(HindsightError):
    """A read-your-writes wait that the views did not reach in time."""


class MemoryNotFound(HindsightError):
    """No memory with that id in the namespace (or it was erased)."""

    def __init__(self, namespace: str, memory_id: str) -> None:
        self.namespace = namespace
        self.memory_id = memory_id
        super().__init__(f"memory_id: no memory {memory_id!r} in namespace {namespace!r}")
