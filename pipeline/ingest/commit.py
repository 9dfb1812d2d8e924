"""The commit path of ``consolidate`` — the one place the commit order is written (I4).

Live consolidation and replay both end every batch of a partition here. What a batch changed is
gathered in a ``PartitionOutput`` (the last state of every memory it touched, tombstones, the
namespaces' schedules, change-feed entries, dead letters, the watermark) and committed in one
Kafka transaction on the partition's transactional producer:

1. begin the transaction;
2. the records (sealed with their first source turn's data key) and tombstones → the state topic
   (key = memory id, the namespace's partition);
3. the touched namespaces' ``BankCounters`` (a tombstone once a namespace is erased), the
   ``ErasureRecorded`` entries, then the ``Watermark`` → the state topic, after the records they
   cover (a reader that sees the watermark has seen the records);
4. change-feed entries (sealed like their records; an erase's entry plain and without content)
   → memory-updates; consolidation's dead letters → dead-letters;
5. live only: the keys the batch's erases destroy — a ``KeyDestroyed`` record and a tombstone
   per key — and the erasure ledger → the data-key topic, so an erase and its shredding commit
   together or not at all (replay never destroys keys);
6. live only: the consumed ``prepared`` offsets → the consolidate group, inside the transaction;
7. commit. Either all of it becomes visible to ``read_committed`` readers (recall, the sink, a
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

from pipeline.crypto.envelope import SealedRole, seal
from pipeline.crypto.keyring import KeyRing, destruction_messages
from pipeline.crypto.shredding import record_key_id
from pipeline.memory.bank import Change
from pipeline.views.state_topic import bank_key, watermark_key
from schemas.codec import encode
from schemas.data_keys import ErasureRecorded, KeyDestroyed, erasure_key
from schemas.errors import HindsightError
from schemas.memory import BankCounters, DeadLetter, MemoryChanged, MemoryRecord, Watermark


@dataclass
class PartitionOutput:
    """Everything one batch of a partition changed, folded to what must be written."""

    partition: int
    writes: dict[str, tuple[str, MemoryRecord | None]] = field(default_factory=dict)
    counters: dict[str, BankCounters | None] = field(default_factory=dict)  # None: erased
    updates: list[MemoryChanged] = field(default_factory=list)
    update_keys: list[str | None] = field(default_factory=list)  # the data key of each update
    changes: list[Change] = field(default_factory=list)  # in order, for tests and metrics
    dead_letters: list[DeadLetter] = field(default_factory=list)
    watermark: Watermark | None = None
    # Live erases: the keys they destroy (by key id) and what they took; replay only the latter.
    destroyed: dict[str, KeyDestroyed] = field(default_factory=dict)
    erasures: list[ErasureRecorded] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    last_prepared_offset: int = -1

    def add_changes(self, changes: Iterable[Change]) -> None:
        for change in changes:
            self.changes.append(change)
            record = change.record
            erased = change.change == "erased"
            self.writes[record.id] = (record.namespace, None if erased else record)
            self.updates.append(change.as_update())
            # An erase's entry says only that something went: plain, so it outlives the keys.
            self.update_keys.append(None if erased else record_key_id(record))
            self.counts[f"memory_{change.change}"] += 1

    @property
    def empty(self) -> bool:
        return not (
            self.writes
            or self.counters
            or self.updates
            or self.dead_letters
            or self.destroyed
            or self.erasures
        ) and (self.watermark is None)


@dataclass(frozen=True)
class TopicsOut:
    state: str
    updates: str
    dead_letters: str
    data_keys: str | None = None  # None: this commit path never destroys keys (replay)


def sealed_value(
    content: MemoryRecord | MemoryChanged,
    namespace: str,
    key_id: str | None,
    keys: KeyRing | None,
    role: SealedRole,
) -> bytes:
    """A record or change-feed entry as written: sealed with ``key_id``, or plain without one."""
    if key_id is None:
        return encode(content)
    if keys is None:
        raise HindsightError(f"key_id: sealing with data key {key_id!r} needs the data-key ring")
    return seal(content, namespace, keys.data_key(key_id), role)


async def commit_output(
    producer: AIOKafkaProducer,
    topics: TopicsOut,
    output: PartitionOutput,
    *,
    consumed: dict[TopicPartition, int] | None = None,
    group_id: str | None = None,
    keys: KeyRing | None = None,
) -> None:
    """Write one partition's batch in one transaction (the order in the module docstring)."""
    partition = output.partition
    if output.destroyed and topics.data_keys is None:
        raise HindsightError("destroying data keys needs the data-key topic (live consolidate)")
    await producer.begin_transaction()
    try:
        futures = []
        for memory_id, (namespace, record) in output.writes.items():
            value = None
            if record is not None:
                value = sealed_value(record, namespace, record_key_id(record), keys, "memory_state")
            futures.append(
                await producer.send(
                    topics.state, key=memory_id.encode(), value=value, partition=partition
                )
            )
        for namespace, counters in sorted(output.counters.items()):
            futures.append(
                await producer.send(
                    topics.state,
                    key=bank_key(namespace),
                    value=None if counters is None else encode(counters),
                    partition=partition,
                )
            )
        for erasure in output.erasures:
            futures.append(
                await producer.send(
                    topics.state,
                    key=erasure_key(erasure.namespace, erasure.cause_event_id),
                    value=encode(erasure),
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
        for update, key_id in zip(output.updates, output.update_keys, strict=True):
            futures.append(
                await producer.send(
                    topics.updates,
                    key=update.namespace.encode(),
                    value=sealed_value(update, update.namespace, key_id, keys, "memory_updates"),
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
        if topics.data_keys is not None and (output.destroyed or output.erasures):
            for key, value in destruction_messages(output.destroyed.values(), output.erasures):
                futures.append(
                    await producer.send(topics.data_keys, key=key, value=value, partition=partition)
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
