"""The policies topic's adapter: each namespace's policy history, read and written by ``prepare``.

``prepare`` is stateless except for this: which redaction holds for a namespace at a given input
position. The history lives in the compacted ``hindsight.policies.v1`` topic (one record per
namespace, every policy with its position), so the answer never depends on which worker holds the
partition. The rules — what is in force at an offset, how a ``set_policy`` joins the history — are
pure (``pipeline.memory.rules.redaction``); this module only moves records.

Order that makes it exact: a worker writes a namespace's new history (acks=all) *before* the
prepared events that used it, and so before it commits its input offsets; a worker that takes the
partition over catches up with the topic before each batch, so it has every history written
before the offsets it resumes from. A batch prepared twice finds the policy already in the history
and, looking up by offset, redacts exactly as the first time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from pipeline.runtime.kafka import client_kwargs, stop_consumer
from pipeline.runtime.settings import KafkaSecurity, Settings
from pipeline.views.state_topic import committed_consumer, partition_ids, read_until_end
from schemas.codec import encode, validate
from schemas.errors import HindsightError, InvalidEvent
from schemas.policy import NamespacePolicies
from topics.catalogue import topic_names

log = logging.getLogger("hindsight.policies")

PolicyBook = dict[str, NamespacePolicies]  # namespace -> its policy history


def decode_policies(raw: bytes | None) -> NamespacePolicies | None:
    """A record of the policies topic (None for a tombstone or a record that is not one)."""
    if raw is None:
        return None
    try:
        return validate(NamespacePolicies, orjson.loads(raw))
    except (orjson.JSONDecodeError, InvalidEvent):
        log.warning("skipping a policies record that does not parse")
        return None


class PolicyStore:
    """Follows the policies topic into :attr:`book`; writes histories with the given producer."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *,
        producer: AIOKafkaProducer | None = None,
        security: KafkaSecurity | None = None,
    ) -> None:
        self._bootstrap = bootstrap
        self.topic = topic
        self._producer = producer
        self._security = security
        self.book: PolicyBook = {}
        self._consumer: AIOKafkaConsumer | None = None
        self._tps: list[TopicPartition] = []

    async def start(self, timeout_s: float = 120.0) -> None:
        partitions = await partition_ids(self._bootstrap, self.topic, self._security)
        if not partitions:
            raise HindsightError(
                f"policies topic {self.topic} does not exist; create the catalogue's topics "
                "(`hindsight topics create`) first"
            )
        self._consumer = committed_consumer(
            bootstrap_servers=self._bootstrap, group_id=None, **client_kwargs(self._security)
        )
        await self._consumer.start()
        self._tps = [TopicPartition(self.topic, p) for p in partitions]
        self._consumer.assign(self._tps)
        await self._consumer.seek_to_beginning(*self._tps)
        await self.catch_up(timeout_s)

    async def catch_up(self, timeout_s: float = 60.0) -> None:
        """Read every history written before now (end offsets taken at the call)."""
        if self._consumer is None:
            raise HindsightError("the policy store is not started")

        def fold(_tp: TopicPartition, _key: bytes | None, value: bytes | None) -> None:
            history = decode_policies(value)
            if history is not None:
                self.book[history.namespace] = history

        await read_until_end(self._consumer, self._tps, fold, timeout_s)

    async def record(self, changed: Iterable[NamespacePolicies]) -> None:
        """Write histories and wait until the brokers have them (before anything uses them)."""
        histories = list(changed)
        if self._producer is None:
            raise HindsightError("recording policies needs the store's producer")
        sent = [
            await self._producer.send(self.topic, encode(history), key=history.namespace.encode())
            for history in histories
        ]
        for future in sent:
            await future
        for history in histories:
            self.book[history.namespace] = history

    async def stop(self) -> None:
        if self._consumer is not None:
            await stop_consumer(self._consumer)
            self._consumer = None


async def open_policy_store(
    settings: Settings, producer: AIOKafkaProducer | None = None
) -> PolicyStore:
    """The deployment's policy store, caught up with the topic."""
    if not settings.bootstrap:
        raise HindsightError("the policy store needs settings.bootstrap (a running Kafka)")
    store = PolicyStore(
        settings.bootstrap,
        topic_names(settings.topic_prefix)["policies"],
        producer=producer,
        security=settings.kafka,
    )
    try:
        await store.start()
    except BaseException:
        await store.stop()
        raise
    return store
