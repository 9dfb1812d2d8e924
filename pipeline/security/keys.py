"""The state of every key, folded from key events; authorisation decisions (pure, no I/O).

The fold keeps, per key id, what the latest event says, like compaction does: replaying a
compacted topic and replaying the full history give the same state. ``now`` is a parameter:
expiry is checked at the request boundary, where the wall clock is the right clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from pipeline.security.scopes import Action, Scope, ScopeError, is_global_admin, permits
from schemas.errors import HindsightError
from schemas.keys import KeyCreated, KeyEvent, KeyRevoked


class AuthenticationFailed(HindsightError):
    """No usable key was presented (HTTP 401). ``detail`` is for logs, never for the caller."""

    PUBLIC_MESSAGE = "authorization: a valid API key is required (Authorization: Bearer hs_...)"

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(self.PUBLIC_MESSAGE)


class Forbidden(HindsightError):
    """The key is valid but its scopes do not allow this (HTTP 403).

    The message names the action and the key, never the namespace: a caller must not learn
    from an error which namespaces exist or whose they are.
    """

    def __init__(self, key_id: str, action: Action) -> None:
        self.key_id = key_id
        self.action = action
        super().__init__(f"key {key_id} is not allowed to {action} in this namespace")


@dataclass(frozen=True)
class KeyRecord:
    key_id: str
    name: str
    scopes: tuple[Scope, ...]
    secret_hash: str | None  # None once revoked: nothing can verify against it any more
    created_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None = None
    revoke_reason: str | None = None
    invalid: str | None = None  # a stored scope broke the grammar: the key is refused (fail closed)

    @property
    def status(self) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.invalid is not None:
            return "invalid"
        return "active"


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key id, its name and what it may do."""

    key_id: str
    name: str
    scopes: tuple[Scope, ...]

    def permits(self, namespace: str, action: Action) -> bool:
        return permits(self.scopes, namespace, action)

    def require(self, namespace: str, action: Action) -> None:
        if not self.permits(namespace, action):
            raise Forbidden(self.key_id, action)

    @property
    def is_admin(self) -> bool:
        return is_global_admin(self.scopes)


# With auth turned off (loopback only, `--no-auth`): every action everywhere, and it says so.
UNAUTHENTICATED = Principal("no-auth", "auth disabled", (Scope("*", frozenset({"admin"})),))


def _scopes(event: KeyEvent) -> tuple[tuple[Scope, ...], str | None]:
    try:
        return tuple(sorted(Scope.from_grant(g) for g in event.scopes)), None
    except ScopeError as error:
        return (), str(error)


def apply_key_event(state: Mapping[str, KeyRecord], event: KeyEvent) -> dict[str, KeyRecord]:
    """A new state with ``event`` applied (the input is not changed)."""
    updated = dict(state)
    scopes, invalid = _scopes(event)
    if isinstance(event, KeyCreated):
        updated[event.key_id] = KeyRecord(
            key_id=event.key_id,
            name=event.name,
            scopes=scopes,
            secret_hash=event.secret_hash,
            created_at=event.created_at,
            expires_at=event.expires_at,
            invalid=invalid,
        )
    elif isinstance(event, KeyRevoked):
        known = updated.get(event.key_id)
        base = known or KeyRecord(event.key_id, event.name, scopes, None, None, None)
        updated[event.key_id] = replace(
            base,
            secret_hash=None,
            revoked_at=event.revoked_at,
            revoke_reason=event.reason,
            name=base.name or event.name,
            scopes=base.scopes or scopes,
        )
    return updated


def usable(record: KeyRecord | None, now: datetime) -> str | None:
    """Why the key cannot be used now, or None when it can (the reason is for logs)."""
    if record is None:
        return "unknown key id"
    if record.revoked_at is not None or record.secret_hash is None:
        return f"key {record.key_id} is revoked"
    if record.invalid is not None:
        return f"key {record.key_id} has an invalid scope: {record.invalid}"
    if record.expires_at is not None and now >= record.expires_at:
        return f"key {record.key_id} expired at {record.expires_at.isoformat()}"
    return None


def principal_of(record: KeyRecord) -> Principal:
    return Principal(record.key_id, record.name, record.scopes)
