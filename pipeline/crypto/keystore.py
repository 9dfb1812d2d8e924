"""The data-key store: one interface, and its embedded default on a compacted Kafka topic.

``DataKeyStore`` is what clients and stages use: ``new_key`` (create, wrap, publish acks=all and
only then hand the key out), ``key`` (the bytes, None once destroyed), ``wait_for`` (a key not
seen yet) and ``catch_up``. Destruction is not a method: it must commit in the same transaction
as the erase that causes it, so ``consolidate`` writes ``keyring.destruction_messages`` through
its one commit path (``pipeline.ingest.commit``) and then ``mark_destroyed``s them here.

``TopicKeyStore`` follows ``hindsight.data-keys.v1`` from the beginning (read_committed) into a
``KeyRing`` — every process that seals or opens runs one. The key-encryption key is a
``KeyWrapper`` (the local master key, or a KMS adapter).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Sequence
from typing import Protocol

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from pipeline.crypto.envelope import DataKey, sealed_envelope
from pipeline.crypto.keyring import KeyRing
from pipeline.crypto.wrapping import KeyWrapper, wrapper_from_settings
from pipeline.runtime.kafka import client_kwargs, stop_consumer
from pipeline.runtime.settings import KafkaSecurity, Settings
from pipeline.views.state_topic import (
    committed_consumer,
    partition_for,
    partition_ids,
    read_until_end,
)
from schemas.codec import encode
from schemas.errors import HindsightError, InvalidEvent, WatermarkTimeout
from topics.catalogue import topic_names

log = logging.getLogger("hindsight.crypto")


class DataKeyStore(Protocol):
    ring: KeyRing

    async def new_key(self, namespace: str, event_id: str | None = None) -> DataKey: ...

    def key(self, key_id: str) -> bytes | None: ...

    async def wait_for(self, key_id: str, timeout: float) -> bool: ...

    async def catch_up(self, timeout: float = 60.0) -> None: ...


class KeyStoreFailed(HindsightError):
    """The data-key follower stopped on an error: sealed values can no longer be opened."""


class TopicKeyStore:
    """Data keys in a compacted topic, wrapped by a key-encryption key (the embedded default)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        wrapper: KeyWrapper | None,
        *,
        producer: AIOKafkaProducer | None = None,
        security: KafkaSecurity | None = None,
    ) -> None:
        self._bootstrap = bootstrap
        self._security = security
        self.topic = topic
        self.ring = KeyRing(wrapper)
        self._producer = producer
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._partitions: list[int] = []
        self._positions: dict[int, int] = {}
        self._changed = asyncio.Condition()
        self.failure: BaseException | None = None

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self, timeout: float = 120.0) -> None:
        """Read the whole topic (committed records only), then follow it in the background."""
        self._partitions = await partition_ids(self._bootstrap, self.topic, self._security)
        if not self._partitions:
            raise HindsightError(
                f"data-key topic {self.topic} does not exist; create the catalogue's topics "
                "(`hindsight topics create`) first"
            )
        consumer = committed_consumer(
            bootstrap_servers=self._bootstrap, group_id=None, **client_kwargs(self._security)
        )
        await consumer.start()
        tps = [TopicPartition(self.topic, p) for p in self._partitions]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        self._consumer = consumer
        await read_until_end(
            consumer, tps, lambda _tp, key, value: self.ring.fold(key, value), timeout
        )
        await self._note_positions()
        self._task = asyncio.create_task(self._run(), name="data-key-follower")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
        if self._consumer is not None:
            await stop_consumer(self._consumer)
            self._consumer = None

    async def _fetch_once(self) -> bool:
        assert self._consumer is not None
        batches = await self._consumer.getmany(timeout_ms=200, max_records=5000)
        for messages in batches.values():
            for message in messages:
                self.ring.fold(message.key, message.value)
        return bool(batches)

    async def _note_positions(self) -> None:
        assert self._consumer is not None
        for p in self._partitions:
            self._positions[p] = await self._consumer.position(TopicPartition(self.topic, p))
        async with self._changed:
            self._changed.notify_all()

    async def _run(self) -> None:
        try:
            while True:
                if await self._fetch_once():
                    await self._note_positions()
        except asyncio.CancelledError:
            raise
        except BaseException as error:
            log.exception("data-key follower of %s failed; sealed values stop opening", self.topic)
            self.failure = error
            async with self._changed:
                self._changed.notify_all()
            raise

    def check(self) -> None:
        if self.failure is not None:
            raise KeyStoreFailed(
                f"the data-key follower of {self.topic} failed: {self.failure!r}"
            ) from self.failure

    # -- reading ---------------------------------------------------------------------------
    def key(self, key_id: str) -> bytes | None:
        return self.ring.key(key_id)

    def namespace_of(self, key_id: str) -> str | None:
        return self.ring.namespace_of(key_id)

    async def wait_for_all(self, key_ids: Iterable[str], timeout: float) -> set[str]:
        """Wait until every key is live or destroyed; returns the ones still unknown."""
        wanted = {k for k in key_ids if self.ring.state(k) == "unknown"}
        if not wanted:
            return set()
        self.check()

        def settled() -> bool:
            wanted.difference_update({k for k in wanted if self.ring.state(k) != "unknown"})
            return not wanted or self.failure is not None

        with contextlib.suppress(TimeoutError):
            async with self._changed:
                await asyncio.wait_for(self._changed.wait_for(settled), timeout)
        self.check()
        return wanted

    async def wait_for(self, key_id: str, timeout: float) -> bool:
        return not await self.wait_for_all([key_id], timeout)

    async def wait_for_values(self, values: Iterable[bytes | None], timeout: float) -> set[str]:
        """Wait for the keys of every sealed value among ``values`` (unknown ones returned)."""
        key_ids = set()
        for value in values:
            try:
                envelope = sealed_envelope(value)
            except InvalidEvent:
                continue  # the stage dead-letters it when it opens the value
            if envelope is not None:
                key_ids.add(envelope.key_id)
        return await self.wait_for_all(key_ids, timeout)

    async def catch_up(self, timeout: float = 60.0) -> None:
        """Return once the follower has read everything committed to the topic so far."""
        assert self._consumer is not None, "start() first"
        tps = [TopicPartition(self.topic, p) for p in self._partitions]
        ends = await self._consumer.end_offsets(tps)

        def reached() -> bool:
            return self.failure is not None or all(
                self._positions.get(tp.partition, 0) >= ends[tp] for tp in tps
            )

        try:
            async with self._changed:
                await asyncio.wait_for(self._changed.wait_for(reached), timeout)
        except TimeoutError as error:
            raise WatermarkTimeout(
                f"the data-key follower did not reach {ends} within {timeout:.0f}s"
            ) from error
        self.check()

    # -- creating --------------------------------------------------------------------------
    async def new_key(self, namespace: str, event_id: str | None = None) -> DataKey:
        [key] = await self.new_keys([(namespace, event_id)])
        return key

    async def new_keys(self, wanted: Sequence[tuple[str, str | None]]) -> list[DataKey]:
        """Create keys and publish them (acks=all); only acknowledged keys are handed out, so
        every value sealed with one can be opened by whoever reads the topic later (I8)."""
        if self._producer is None:
            raise HindsightError("creating data keys needs the store's producer")
        self.check()
        created = [self.ring.create(namespace, event_id) for namespace, event_id in wanted]
        futures = [
            await self._producer.send(
                self.topic,
                key=record.key_id.encode(),
                value=encode(record),
                partition=partition_for(record.namespace, len(self._partitions)),
            )
            for _, record in created
        ]
        await asyncio.gather(*futures)
        for key, record in created:
            self.ring.add(record, key.secret)
        return [key for key, _ in created]


async def open_key_store(
    settings: Settings, producer: AIOKafkaProducer | None = None
) -> TopicKeyStore | None:
    """The deployment's key store, caught up; None when encryption is off in ``settings``."""
    if not settings.encryption:
        return None
    if not settings.bootstrap:
        raise HindsightError("the data-key store needs settings.bootstrap (a running Kafka)")
    store = TopicKeyStore(
        settings.bootstrap,
        topic_names(settings.topic_prefix)["data_keys"],
        wrapper_from_settings(settings),
        producer=producer,
        security=settings.kafka,
    )
    try:
        await store.start()
    except BaseException:
        await store.stop()
        raise
    return store
