"""Writing key events: ``hindsight keys create | revoke`` and the first admin key of ``up``.

Each event goes to the compacted keys topic keyed by key id, with acks=all and idempotence (I8).
The secret exists only in the return value of ``create``: it is printed once and never stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from aiokafka import AIOKafkaProducer

from pipeline.runtime.settings import Settings
from pipeline.security.hashing import hash_secret
from pipeline.security.keys import KeyRecord
from pipeline.security.scopes import Scope
from pipeline.security.tokens import format_key, new_key_id, new_secret
from pipeline.views.state_topic import make_producer
from schemas.codec import encode
from schemas.errors import HindsightError
from schemas.keys import KeyCreated, KeyRevoked
from topics.catalogue import topic_names


@dataclass(frozen=True)
class CreatedKey:
    """The one moment the full key exists: show ``token`` to the user, then drop it."""

    token: str
    event: KeyCreated
    offset: int

    def __repr__(self) -> str:
        return f"CreatedKey(key_id={self.event.key_id!r}, token=<hidden>)"


class KeyWriter:
    def __init__(self, producer: AIOKafkaProducer, topic: str) -> None:
        self._producer = producer
        self._topic = topic

    async def create(
        self,
        scopes: Sequence[Scope],
        *,
        name: str = "",
        expires_at: datetime | None = None,
        created_by: str | None = None,
        now: datetime | None = None,
    ) -> CreatedKey:
        if not scopes:
            raise HindsightError("scope: a key needs at least one scope, e.g. 'team-a:*:recall'")
        moment = now or datetime.now(UTC)
        if expires_at is not None and expires_at <= moment:
            raise HindsightError("expires_at: must be in the future")
        key_id, secret = new_key_id(), new_secret()
        secret_hash = await asyncio.to_thread(hash_secret, secret)
        event = KeyCreated(
            event_id=f"key-{uuid.uuid4().hex}",
            key_id=key_id,
            name=name,
            scopes=[scope.grant() for scope in sorted(scopes)],
            secret_hash=secret_hash,
            created_at=moment,
            expires_at=expires_at,
            created_by=created_by,
        )
        meta = await self._producer.send_and_wait(
            self._topic, key=key_id.encode(), value=encode(event)
        )
        return CreatedKey(format_key(key_id, secret), event, meta.offset)

    async def revoke(
        self, record: KeyRecord, *, reason: str | None = None, now: datetime | None = None
    ) -> KeyRevoked:
        event = KeyRevoked(
            event_id=f"key-{uuid.uuid4().hex}",
            key_id=record.key_id,
            name=record.name,
            scopes=[scope.grant() for scope in record.scopes],
            revoked_at=now or datetime.now(UTC),
            reason=reason,
        )
        await self._producer.send_and_wait(
            self._topic, key=record.key_id.encode(), value=encode(event)
        )
        return event


@contextlib.asynccontextmanager
async def key_writer(settings: Settings) -> AsyncIterator[KeyWriter]:
    if not settings.bootstrap:
        raise HindsightError("key writer needs settings.bootstrap; start the stack first")
    producer = make_producer(settings.bootstrap, "hindsight-keys", settings.kafka)
    await producer.start()
    try:
        yield KeyWriter(producer, topic_names(settings.topic_prefix)["keys"])
    finally:
        await producer.stop()
