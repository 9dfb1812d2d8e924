"""One tail of the change feed per API process, fanned out to the open dashboard pages.

The hub reads ``memory-updates`` from its end (pages show what is there on load and what
changes after), and hands every entry to the subscribers of its namespace. Each subscriber has a
bounded queue: a page that cannot keep up is told to resync (reload) rather than letting the
process buffer without limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, TopicPartition

from pipeline.interfaces.dashboard.views import decode_change
from pipeline.runtime.kafka import client_kwargs, stop_consumer
from pipeline.runtime.settings import KafkaSecurity
from pipeline.views.log_reader import LogReader
from schemas.memory import MemoryChanged

log = logging.getLogger("hindsight.dashboard")

QUEUE_SIZE = 1_000
RECENT = 50


@dataclass(eq=False)  # compared and hashed by identity: a set of open pages
class Subscription:
    namespace: str | None  # None: every namespace
    queue: asyncio.Queue[MemoryChanged] = field(default_factory=lambda: asyncio.Queue(QUEUE_SIZE))
    overflowed: bool = False


class ChangeFeedHub:
    def __init__(
        self, bootstrap: str, topic: str, reader: LogReader, security: KafkaSecurity | None = None
    ) -> None:
        self._bootstrap = bootstrap
        self._security = security
        self._topic = topic
        self._reader = reader
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._subscribers: set[Subscription] = set()
        self.recent: deque[MemoryChanged] = deque(maxlen=RECENT)
        self.failure: BaseException | None = None

    async def start(self) -> None:
        partitions = await self._reader.partitions(self._topic)
        consumer = AIOKafkaConsumer(
            **client_kwargs(self._security),
            bootstrap_servers=self._bootstrap,
            client_id="hindsight-dashboard-feed",
            group_id=None,
            enable_auto_commit=False,
            isolation_level="read_committed",
        )
        await consumer.start()
        assignment = [TopicPartition(self._topic, p) for p in partitions]
        consumer.assign(assignment)
        await consumer.seek_to_end(*assignment)
        for tp in assignment:
            await consumer.position(tp)  # resolve "end" now: changes from here on are shown
        self._consumer = consumer
        self._task = asyncio.create_task(self._follow(), name="dashboard-change-feed")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._consumer is not None:
            await stop_consumer(self._consumer)

    async def _follow(self) -> None:
        assert self._consumer is not None
        try:
            while True:
                batches = await self._consumer.getmany(timeout_ms=500, max_records=1000)
                for messages in batches.values():
                    for message in messages:
                        change = decode_change(message.value)
                        if change is not None:
                            self._publish(change)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            # Live updates stop; pages still load. The operations page shows the cause.
            self.failure = error
            log.error("dashboard change feed stopped: %r", error, exc_info=error)

    def _publish(self, change: MemoryChanged) -> None:
        self.recent.appendleft(change)
        for subscriber in list(self._subscribers):
            if subscriber.namespace not in (None, change.namespace):
                continue
            try:
                subscriber.queue.put_nowait(change)
            except asyncio.QueueFull:
                subscriber.overflowed = True

    @contextlib.asynccontextmanager
    async def subscribe(self, namespace: str | None) -> AsyncIterator[Subscription]:
        subscription = Subscription(namespace)
        self._subscribers.add(subscription)
        try:
            yield subscription
        finally:
            self._subscribers.discard(subscription)

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)
