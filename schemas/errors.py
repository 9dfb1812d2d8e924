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


class UnknownDataKey(HindsightError):
    """A sealed value names a data key this process has not seen (yet): wait for it, or it never
    existed (a foreign producer, or keys wrapped under another master key)."""

    def __init__(self, key_id: str, detail: str = "") -> None:
        self.key_id = key_id
        super().__init__(f"key_id: unknown data key {key_id!r}{'; ' + detail if detail else ''}")


class DataKeyDestroyed(HindsightError):
    """The data key of a sealed value was destroyed by an erase: the content is gone for good."""

    def __init__(self, key_id: str) -> None:
        self.key_id = key_id
        super().__init__(f"key_id: data key {key_id!r} was destroyed (the content was erased)")
