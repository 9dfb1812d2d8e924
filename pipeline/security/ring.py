"""The key ring every API process runs: all key events, followed from the keys topic.

``KeyRing`` is the in-memory state and the authentication check; ``KeyRingFollower`` feeds it
from the compacted keys topic (from the beginning, ``read_committed``), so a key created or
revoked by any process reaches every API process, and a restart rebuilds the same ring (I1).
A follower that fails marks the ring unavailable: requests then get 503, never a silent stale
answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from pipeline.runtime.kafka import client_kwargs, stop_consumer
from pipeline.runtime.settings import KafkaSecurity, Settings
from pipeline.security.hashing import VerifiedCache, verify_secret
from pipeline.security.keys import (
    AuthenticationFailed,
    KeyRecord,
    Principal,
    apply_key_event,
    principal_of,
    usable,
)
from pipeline.security.tokens import MalformedKey, parse_key
from pipeline.views.state_topic import partition_ids
from schemas.errors import HindsightError, InvalidEvent
from schemas.keys import KeyEvent, KeyRevoked, decode_key_event
from topics.catalogue import topic_names

log = logging.getLogger("hindsight.keys")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Argon2id runs at once at most (each takes ~19 MiB and one core for ~40 ms).
CONCURRENT_VERIFICATIONS = 2


class KeyRingUnavailable(HindsightError):
    """The ring cannot answer (its follower failed or has not caught up): HTTP 503."""


class KeyRing:
    """Key state plus ``authenticate``; ``apply`` is the only way state changes."""

    def __init__(self) -> None:
        self._state: dict[str, KeyRecord] = {}
        self._cache = VerifiedCache()
        self._verifying = asyncio.Semaphore(CONCURRENT_VERIFICATIONS)
        self.failure: str | None = None
        self.ready = False
        self.events_applied = 0
        # Set by the follower: read the topic up to its current end (a key created a moment ago).
        self.catch_up: Callable[[], Awaitable[None]] | None = None

    def apply(self, event: KeyEvent) -> None:
        self._state = apply_key_event(self._state, event)
        self.events_applied += 1
        if isinstance(event, KeyRevoked):
            self._cache.forget(event.key_id)

    def get(self, key_id: str) -> KeyRecord | None:
        return self._state.get(key_id)

    def records(self) -> list[KeyRecord]:
        """Oldest first; keys known only from a revocation (after compaction) last, by id."""
        return sorted(
            self._state.values(),
            key=lambda r: (r.created_at is None, r.created_at or _EPOCH, r.key_id),
        )

    async def authenticate(self, token: str | None, now: datetime | None = None) -> Principal:
        """The principal for a presented key, or ``AuthenticationFailed`` (details in logs)."""
        if self.failure is not None:
            raise KeyRingUnavailable(f"key ring unavailable: {self.failure}")
        if not self.ready:
            raise KeyRingUnavailable("key ring is still loading the keys topic")
        if not token:
            raise AuthenticationFailed("no API key presented")
        try:
            presented = parse_key(token)
        except MalformedKey as error:
            raise AuthenticationFailed(str(error)) from None
        moment = now or datetime.now(UTC)
        record = self._state.get(presented.key_id)
        if record is None and self.catch_up is not None:
            # `keys create` then an immediate request: the key may be in the topic but not yet
            # here. One bounded read to the end settles it (concurrent ones queue, one at a time).
            with contextlib.suppress(KeyRingUnavailable):
                await self.catch_up()
            record = self._state.get(presented.key_id)
        reason = usable(record, moment)
        if reason is not None or record is None or record.secret_hash is None:
            raise AuthenticationFailed(reason or "unusable key")
        digest = self._cache.digest(presented.key_id, presented.secret)
        known = self._cache.lookup(presented.key_id, digest)
        if known is None:
            async with self._verifying:
                known = await asyncio.to_thread(verify_secret, presented.secret, record.secret_hash)
            # A revocation may have landed while Argon2id ran: cache only what still stands.
            current = self._state.get(presented.key_id)
            if current is not None and current.secret_hash == record.secret_hash:
                self._cache.remember(presented.key_id, digest, known)
        if not known:
            raise AuthenticationFailed(f"wrong secret for key {presented.key_id}")
        current = self._state.get(presented.key_id)
        if current is None or usable(current, moment) is not None:
            raise AuthenticationFailed(f"key {presented.key_id} was revoked just now")
        return principal_of(current)


class KeyRingFollower:
    """Tails the keys topic into a ``KeyRing`` (assign, from the beginning, no group)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        ring: KeyRing,
        security: KafkaSecurity | None = None,
    ) -> None:
        self._bootstrap = bootstrap
        self._topic = topic
        self.ring = ring
        self._security = security
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._positions: dict[int, int] = {}
        self._changed = asyncio.Condition()
        self._catching_up = asyncio.Lock()

    async def start(self, catch_up_timeout: float = 60.0) -> None:
        partitions = await partition_ids(self._bootstrap, self._topic, self._security)
        if not partitions:
            raise KeyRingUnavailable(f"keys topic {self._topic} does not exist; create topics")
        consumer = AIOKafkaConsumer(
            **client_kwargs(self._security),
            bootstrap_servers=self._bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        )
        await consumer.start()
        self._consumer = consumer
        assignment = [TopicPartition(self._topic, p) for p in partitions]
        consumer.assign(assignment)
        await consumer.seek_to_beginning(*assignment)
        ends = await consumer.end_offsets(assignment)
        self._task = asyncio.create_task(self._run(), name="key-ring-follower")
        self._task.add_done_callback(self._on_done)
        deadline = asyncio.get_running_loop().time() + catch_up_timeout
        for tp, end in ends.items():
            await self.wait_for(tp.partition, end - 1, deadline - asyncio.get_running_loop().time())
        self.ring.ready = True
        self.ring.catch_up = self.catch_up

    async def catch_up(self, timeout: float = 2.0) -> None:
        """Return once the ring has applied everything in the topic as of now."""
        assert self._consumer is not None
        async with self._catching_up:
            assignment = list(self._consumer.assignment())
            try:
                ends = await asyncio.wait_for(self._consumer.end_offsets(assignment), timeout)
            except (TimeoutError, KafkaError) as error:
                raise KeyRingUnavailable(f"keys topic end offsets: {error!r}") from error
            for tp, end in ends.items():
                await self.wait_for(tp.partition, end - 1, timeout)

    def _on_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            # Loud: every request now fails with 503 naming this, instead of using stale keys.
            self.ring.failure = f"{type(error).__name__}: {error}"
            log.error("key ring follower failed: %s", self.ring.failure, exc_info=error)

    async def _run(self) -> None:
        assert self._consumer is not None
        while True:
            batches = await self._consumer.getmany(timeout_ms=500, max_records=1000)
            for messages in batches.values():
                for message in messages:
                    self._apply(message.value, message.offset)
            # The position, not the last message: it also moves past transaction markers and
            # compacted gaps, so "caught up to the end offset" is reachable.
            for tp in self._consumer.assignment():
                self._positions[tp.partition] = await self._consumer.position(tp) - 1
            async with self._changed:
                self._changed.notify_all()

    def _apply(self, value: bytes | None, offset: int) -> None:
        if value is None:
            return  # a tombstone: nothing to grant
        try:
            event = decode_key_event(value)
        except InvalidEvent as error:
            # Fail closed: an event we cannot read grants nothing; say so loudly.
            log.error("keys topic offset %s: unreadable key event: %s", offset, error)
            return
        self.ring.apply(event)

    async def wait_for(self, partition: int, offset: int, timeout: float) -> None:
        """Block until the ring has applied ``offset`` of the keys topic's ``partition``."""

        def reached() -> bool:
            return self._positions.get(partition, -1) >= offset or self.ring.failure is not None

        try:
            async with self._changed:
                await asyncio.wait_for(self._changed.wait_for(reached), max(timeout, 0.01))
        except TimeoutError as error:
            raise KeyRingUnavailable(
                f"key ring did not reach offset {offset} of {self._topic} in {timeout:.0f}s"
            ) from error
        if self.ring.failure is not None:
            raise KeyRingUnavailable(f"key ring unavailable: {self.ring.failure}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._consumer is not None:
            await stop_consumer(self._consumer)


@contextlib.asynccontextmanager
async def following_keys(settings: Settings) -> AsyncIterator[KeyRingFollower]:
    """A caught-up key ring for the block (every API process runs one)."""
    if not settings.bootstrap:
        raise HindsightError("key ring needs settings.bootstrap; start the stack first")
    follower = KeyRingFollower(
        settings.bootstrap,
        topic_names(settings.topic_prefix)["keys"],
        KeyRing(),
        settings.kafka,
    )
    try:
        await follower.start()
        yield follower
    finally:
        await follower.stop()
