"""The data keys a process knows: a pure fold of the data-key topic (no I/O, thread-safe).

Each key is ``live`` (its wrapped bytes were read and unwrap with this process's key-encryption
key), ``destroyed`` (a tombstone or a ``KeyDestroyed`` record was read — or this process committed
the destruction), or ``unknown`` (not read yet: a stage waits a little, since every key is
written, acks=all, before the first value sealed with it). The ring also keeps the erasure ledger
(``ErasureRecorded``) that replay reads.

Stages open values on executor threads while the follower folds records on the event loop, so
every access takes the ring's lock.
"""

from __future__ import annotations

import base64
import logging
import sys
import threading
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Literal

import orjson

from pipeline.crypto.envelope import DataKey, new_key_id, new_secret
from pipeline.crypto.wrapping import KeyWrapper
from schemas.codec import encode, validate
from schemas.data_keys import (
    DESTROYED_PREFIX,
    ERASURE_PREFIX,
    ROLL_KEY,
    DataKeyCreated,
    ErasureRecorded,
    KeyDestroyed,
    destroyed_key,
    erasure_key,
)
from schemas.errors import HindsightError, InvalidEvent, UnknownDataKey

log = logging.getLogger("hindsight.crypto")

KeyState = Literal["live", "destroyed", "unknown"]
KeyMessage = tuple[bytes, bytes | None]  # (Kafka key, value or None for a tombstone)


class _Entry:
    """A live key as the ring keeps it: every process holds every key, so a few hundred bytes
    instead of a validated model (about 2 KB) per key."""

    __slots__ = ("event_id", "namespace", "wrapped", "wrapper_id")

    def __init__(self, record: DataKeyCreated) -> None:
        self.namespace = sys.intern(record.namespace)
        self.event_id = record.event_id
        self.wrapper_id = sys.intern(record.wrapper_id)
        self.wrapped = base64.b64decode(record.wrapped_b64)


class KeyRing:
    """Known data keys (wrapped, and unwrapped on first use), destroyed keys and erasures."""

    def __init__(self, wrapper: KeyWrapper | None = None) -> None:
        self.wrapper = wrapper
        self._lock = threading.RLock()
        self._created: dict[str, _Entry] = {}
        self._secrets: dict[str, bytes] = {}
        self._destroyed: dict[str, KeyDestroyed | None] = {}  # None: seen as a tombstone only
        self._erasures: dict[tuple[str, str], ErasureRecorded] = {}
        self._by_namespace: defaultdict[str, set[str]] = defaultdict(set)
        self._by_event: defaultdict[tuple[str, str], set[str]] = defaultdict(set)
        self.invalid_records = 0

    # -- folding the topic -----------------------------------------------------------------
    def fold(self, key: bytes | None, value: bytes | None) -> None:
        """Apply one message of the data-key topic (a bad record is counted, never fatal)."""
        text = (key or b"").decode("utf-8", "replace")
        try:
            if text == ROLL_KEY or not text:
                return
            if text.startswith(DESTROYED_PREFIX):
                if value is not None:
                    self._destroy(validate(KeyDestroyed, orjson.loads(value)))
            elif text.startswith(ERASURE_PREFIX):
                if value is not None:
                    erasure = validate(ErasureRecorded, orjson.loads(value))
                    with self._lock:
                        self._erasures[(erasure.namespace, erasure.cause_event_id)] = erasure
            elif value is None:
                with self._lock:
                    self._forget_secret(text)
                    self._destroyed.setdefault(text, None)
            else:
                self.add(validate(DataKeyCreated, orjson.loads(value)))
        except (InvalidEvent, orjson.JSONDecodeError) as error:
            self.invalid_records += 1
            log.warning("data-key record %r is invalid: %s", text, error)

    def add(self, record: DataKeyCreated, secret: bytes | None = None) -> None:
        """A key written to the topic (``secret``: its creator already knows it in the clear)."""
        with self._lock:
            if record.key_id in self._destroyed:
                return  # a destroyed key never comes back
            self._created[record.key_id] = _Entry(record)
            self._by_namespace[record.namespace].add(record.key_id)
            if record.event_id is not None:
                self._by_event[(record.namespace, record.event_id)].add(record.key_id)
            if secret is not None:
                self._secrets[record.key_id] = secret

    def _destroy(self, record: KeyDestroyed) -> None:
        with self._lock:
            self._forget_secret(record.key_id)
            self._destroyed[record.key_id] = record

    def _forget_secret(self, key_id: str) -> None:
        self._secrets.pop(key_id, None)
        created = self._created.pop(key_id, None)
        if created is not None:
            self._by_namespace[created.namespace].discard(key_id)
            if created.event_id is not None:
                self._by_event[(created.namespace, created.event_id)].discard(key_id)

    def mark_destroyed(self, records: Iterable[KeyDestroyed]) -> None:
        """What this process destroyed and committed: forget the keys before the topic says so."""
        for record in records:
            self._destroy(record)

    def record_erasures(self, erasures: Iterable[ErasureRecorded]) -> None:
        with self._lock:
            for erasure in erasures:
                self._erasures[(erasure.namespace, erasure.cause_event_id)] = erasure

    # -- creating --------------------------------------------------------------------------
    def create(
        self, namespace: str, event_id: str | None = None, now: datetime | None = None
    ) -> tuple[DataKey, DataKeyCreated]:
        """A new random data key and its wrapped record (the caller publishes the record)."""
        if self.wrapper is None:
            raise HindsightError("creating data keys needs a key wrapper (the master key)")
        key_id, secret = new_key_id(), new_secret()
        wrapped = self.wrapper.wrap(secret, key_id=key_id, namespace=namespace)
        record = DataKeyCreated(
            key_id=key_id,
            namespace=namespace,
            event_id=event_id,
            wrapper_id=self.wrapper.wrapper_id,
            wrapped_b64=base64.b64encode(wrapped).decode("ascii"),
            created_at=now or datetime.now(UTC),
        )
        return DataKey(key_id, namespace, secret), record

    # -- lookups ---------------------------------------------------------------------------
    def state(self, key_id: str) -> KeyState:
        with self._lock:
            if key_id in self._destroyed:
                return "destroyed"
            return "live" if key_id in self._created else "unknown"

    def key(self, key_id: str) -> bytes | None:
        """The key's bytes; None once destroyed; ``UnknownDataKey`` when never seen."""
        with self._lock:
            if key_id in self._destroyed:
                return None
            secret = self._secrets.get(key_id)
            if secret is not None:
                return secret
            record = self._created.get(key_id)
            if record is None:
                raise UnknownDataKey(key_id)
            if self.wrapper is None:
                raise UnknownDataKey(key_id, "this process has no key-encryption key")
            if record.wrapper_id != self.wrapper.wrapper_id:
                raise UnknownDataKey(
                    key_id,
                    f"it is wrapped by {record.wrapper_id} and this process holds "
                    f"{self.wrapper.wrapper_id} (a different master key or KMS key)",
                )
            secret = self.wrapper.unwrap(record.wrapped, key_id=key_id, namespace=record.namespace)
            self._secrets[key_id] = secret
            return secret

    def data_key(self, key_id: str) -> DataKey:
        """The key with its namespace, for sealing; raises when destroyed or unknown."""
        with self._lock:
            secret = self.key(key_id)
            namespace = self.namespace_of(key_id)
        if secret is None or namespace is None:
            raise HindsightError(
                f"key_id: data key {key_id!r} was destroyed; nothing seals with it"
            )
        return DataKey(key_id, namespace, secret)

    def wrapped(self, key_id: str) -> bytes | None:
        """The wrapped bytes of a live key (None once destroyed or never seen)."""
        with self._lock:
            entry = self._created.get(key_id)
            return None if entry is None else entry.wrapped

    def namespace_of(self, key_id: str) -> str | None:
        with self._lock:
            record = self._created.get(key_id)
            if record is not None:
                return record.namespace
            destroyed = self._destroyed.get(key_id)
            return destroyed.namespace if destroyed is not None else None

    def seals_event(self, key_id: str, event_id: str) -> bool:
        """Whether the key was created for exactly this event (a turn's or an erase's own key)."""
        with self._lock:
            record = self._created.get(key_id)
            return record is not None and record.event_id == event_id

    def keys_of(self, namespace: str) -> set[str]:
        """Every live key of the namespace (a copy)."""
        with self._lock:
            return set(self._by_namespace.get(namespace, ()))

    def keys_for_events(self, namespace: str, event_ids: Iterable[str]) -> set[str]:
        """Live keys created for these events (a turn re-sent by a client has a second key)."""
        with self._lock:
            found: set[str] = set()
            for event_id in event_ids:
                found |= self._by_event.get((namespace, event_id), set())
            return found

    def erasures(self) -> list[ErasureRecorded]:
        with self._lock:
            return sorted(
                self._erasures.values(),
                key=lambda e: (e.source.partition, e.source.offset, e.namespace),
            )

    def erasure(self, namespace: str, cause_event_id: str) -> ErasureRecorded | None:
        with self._lock:
            return self._erasures.get((namespace, cause_event_id))

    def destroyed_count(self) -> int:
        with self._lock:
            return len(self._destroyed)

    def __len__(self) -> int:
        with self._lock:
            return len(self._created)


def destruction_messages(
    destroyed: Iterable[KeyDestroyed], erasures: Iterable[ErasureRecorded] = ()
) -> list[KeyMessage]:
    """What an erase writes to the data-key topic, in order: per key its ``KeyDestroyed`` record
    and then the tombstone (a reader between the two already sees "destroyed"), then the erasures.
    """
    messages: list[KeyMessage] = []
    for record in destroyed:
        messages.append((destroyed_key(record.key_id), encode(record)))
        messages.append((record.key_id.encode(), None))
    for erasure in erasures:
        messages.append((erasure_key(erasure.namespace, erasure.cause_event_id), encode(erasure)))
    return messages
