"""What ``hindsight keys create | list | revoke`` do, against a running stack's keys topic.

Writing the keys topic needs Kafka rights (with ACLs: the admin principal only), so key
management is not an HTTP route: whoever may run these may mint keys.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pipeline.runtime.settings import Settings
from pipeline.security.keys import AuthenticationFailed
from pipeline.security.ring import KeyRingFollower, following_keys
from pipeline.security.scopes import parse_scope
from pipeline.security.writer import CreatedKey, key_writer
from schemas.errors import HindsightError

log = logging.getLogger("hindsight.keys")


async def create_key(
    settings: Settings,
    scopes: Sequence[str],
    *,
    name: str = "",
    expires_days: float | None = None,
    created_by: str = "hindsight keys create",
) -> CreatedKey:
    parsed = [parse_scope(text) for text in scopes]  # bad input fails before anything is written
    if expires_days is not None and expires_days <= 0:
        raise HindsightError(f"--expires: must be a positive number of days, got {expires_days}")
    now = datetime.now(UTC)
    expires_at = now + timedelta(days=expires_days) if expires_days else None
    async with key_writer(settings) as writer:
        return await writer.create(
            parsed, name=name, expires_at=expires_at, created_by=created_by, now=now
        )


async def list_keys(settings: Settings) -> list[dict[str, Any]]:
    now = datetime.now(UTC)
    async with following_keys(settings) as keys:
        rows = []
        for record in keys.ring.records():
            status = record.status
            if status == "active" and record.expires_at is not None and now >= record.expires_at:
                status = "expired"
            rows.append(
                {
                    "key_id": record.key_id,
                    "name": record.name,
                    "status": status,
                    "scopes": [str(scope) for scope in record.scopes],
                    "created_at": record.created_at,
                    "expires_at": record.expires_at,
                    "revoked_at": record.revoked_at,
                }
            )
        return rows


async def revoke_key(settings: Settings, key_id: str, *, reason: str | None = None) -> None:
    async with following_keys(settings) as keys:
        record = keys.ring.get(key_id)
        if record is None:
            raise HindsightError(f"key_id: no key {key_id!r} (see `hindsight keys list`)")
        if record.revoked_at is not None:
            return  # revoking twice is a no-op, not an error
        async with key_writer(settings) as writer:
            await writer.revoke(record, reason=reason)


ADMIN_KEY_FILE = "admin.key"
LOCAL_ADMIN_NAME = "local admin (hindsight up)"


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` readable by the owner only (0600), atomically (write, then rename)."""
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # the mode given to open() is reduced by the umask; this is not
        os.write(fd, data)
    finally:
        os.close(fd)
    temporary.replace(path)


async def ensure_admin_key(settings: Settings, keys: KeyRingFollower) -> str:
    """The local admin key of ``up``: the saved one while it is valid, else a new one.

    Kept in ``<data_dir>/admin.key`` (0600) so a restart reuses it (the keys topic keeps only the
    hash); ``up`` copies it into ``stack.json`` for the local CLI. A revoked saved key is
    replaced, never revived.
    """
    path = Path(settings.data_dir) / ADMIN_KEY_FILE
    if path.exists():
        token = path.read_text().strip()
        try:
            if (await keys.ring.authenticate(token)).is_admin:
                return token
        except AuthenticationFailed as error:
            log.warning("saved admin key not usable (%s); creating a new one", error.detail)
    async with key_writer(settings) as writer:
        created = await writer.create(
            [parse_scope("*:admin")], name=LOCAL_ADMIN_NAME, created_by="hindsight up"
        )
    await keys.wait_for(0, created.offset, 30.0)  # the API about to serve must accept it
    write_private(path, (created.token + "\n").encode())
    return created.token
