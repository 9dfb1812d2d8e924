"""The commit path of ``consolidate`` — the one place the commit order is written (I4).

Live consolidation and replay both end every batch of a partition here. What a batch changed is
gathered in a ``PartitionOutput`` (the last state of every memory it touched, tombstones, the
namespaces' schedules, change-feed entries, dead letters, the watermark) and committed in one
Kafka transaction on the partition's transactional producer:

1. begin the transaction;
2. the records and tombstones → the state topic (key = memory id, the namespace's partition);
3. the touched namespaces' ``BankCounters``, then the ``Watermark`` → the state topic, after the
   records they cover (a reader that sees the watermark has seen the records);
4. change-feed entries → memory-updates; consolidation's dead letters → dead-letters;
5. live only: the consumed ``prepared`` offsets → the consolidate group, inside the transaction;
6. commit. Either all of it becomes visible to ``read_committed`` readers (recall, the sink, a
   restoring consolidate worker) together with the offsets, or none of it does.

So a crash anywhere leaves the state topic and the committed offsets describing the same
prefix of the log: restore reads the state, consumption resumes at the offset, and nothing is
applied twice or skipped. A zombie owner is fenced by its successor's producer and cannot commit.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from aiokafka import AIOKafkaProducer, TopicPartition

from pipeline.memory.bank import Change
from pipeline.views.state_topic import bank_key, watermark_key
from schemas.codec import encode
from schemas.memory import BankCounters, DeadLetter, MemoryChanged, MemoryRecord, Watermark


@dataclass
class PartitionOutput:
    """Everything one batch of a partition changed, folded to what must be written."""

    partition: int
    writes: dict[str, tuple[str, MemoryRecord | None]] = field(default_factory=dict)
    counters: dict[str, BankCounters] = field(default_factory=dict)
    updates: list[MemoryChanged] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)  # in order, for tests and metrics
    dead_letters: list[DeadLetter] = field(default_factory=list)
    watermark: Watermark | None = None
    counts: Counter[str] = field(default_factory=Counter)
    last_prepared_offset: int = -1

    def add_changes(self, changes: Iterable[Change]) -> None:
        for change in changes:
            self.changes.append(change)
            record = change.record
            kept = None if change.change == "erased" else record
            self.writes[record.id] = (record.namespace, kept)
            self.updates.append(change.as_update())
            self.counts[f"memory_{change.change}"] += 1

    @property
    def empty(self) -> bool:
        return not (self.writes or self.counters or self.updates or self.dead_letters) and (
            self.watermark is None
        )


@dataclass(frozen=True)
class TopicsOut:
    state: str
    updates: str
    dead_letters: str


async def commit_output(
    producer: AIOKafkaProducer,
    topics: TopicsOut,
    output: PartitionOutput,
    *,
    consumed: dict[TopicPartition, int] | None = None,
    group_id: str | None = None,
) -> None:
    """Write one partition's batch in one transaction (the order in the module docstring)."""
    partition = output.partition
    await producer.begin_transaction()
    try:
        futures = []
        for memory_id, (_, record) in output.writes.items():
            futures.append(
                await producer.send(
                    topics.state,
                    key=memory_id.encode(),
                    value=None if record is None else encode(record),
                    partition=partition,
                )
            )
        for namespace, counters in sorted(output.counters.items()):
            futures.append(
                await producer.send(
                    topics.state,
                    key=bank_key(namespace),
                    value=encode(counters),
                    partition=partition,
                )
            )
        if output.watermark is not None:
            mark = output.watermark
            futures.append(
                await producer.send(
                    topics.state,
                    key=watermark_key(mark.topic, mark.partition),
                    value=encode(mark),
                    partition=partition,
                )
            )
        for update in output.updates:
            futures.append(
                await producer.send(
                    topics.updates,
                    key=update.namespace.encode(),
                    value=encode(update),
                    partition=partition,
                )
            )
        for letter in output.dead_letters:
            futures.append(
                await producer.send(
                    topics.dead_letters,
                    key=str(letter.source_offset).encode(),
                    value=encode(letter),
                    partition=partition,
                )
            )
        if consumed:
            if group_id is None:
                raise ValueError("committing consumed offsets needs the consumer group id")
            await producer.send_offsets_to_transaction(consumed, group_id)
        for future in futures:
            await future
    except BaseException:
        # A fenced or broken producer cannot abort either; the broker aborts on fencing/timeout.
        with contextlib.suppress(Exception):
            await producer.abort_transaction()
        raise
    await producer.commit_transaction()
