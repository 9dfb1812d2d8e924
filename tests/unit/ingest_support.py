"""Test-only helpers for the ingest tests: fake encoders, an input-log builder and the stages.

Never the real model here: the encoders are deterministic and tiny, so a test states exactly how
similar two turns are. ``Stages`` runs the stages' pure code — ``prepare_batch``, then each
prepared event as bytes through ``PartitionTables`` — the way the live stages chain them.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from pipeline.ingest.commit import PartitionOutput
from pipeline.ingest.consolidate import PartitionTables, PreparedMessage
from pipeline.ingest.prepare import ExtractionKey, InputMessage, PreparedBatch, prepare_batch
from pipeline.memory.bank import Change, NamespaceBank
from pipeline.models.encoders import Vectors
from pipeline.runtime.settings import MemoryPolicy
from schemas.codec import encode
from schemas.events import (
    CommandIssued,
    CommandName,
    ExtractionRecorded,
    MemoriesRecalled,
    RecallHit,
    Role,
    TurnRecorded,
)
from schemas.memory import DeadLetter, MemoryRecord
from topics.catalogue import topic_names

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
DAY = timedelta(days=1)
TOPICS = topic_names("")
EVENTS = TOPICS["events"]
PREPARED = TOPICS["prepared"]
BROKER_T0_MS = 1_714_557_600_000  # broker timestamps of the fake log: this plus the offset
_WORD = re.compile(r"\w+", re.UNICODE)


def _speakerless(search_text: str) -> str:
    """Prepare embeds ``"<speaker>: <text>"``; the fakes key on the turn's text."""
    return search_text.split(": ", 1)[1] if ": " in search_text else search_text


class BagOfWordsEncoder:
    """Hashed bag of words → unit vector: the same words give the same direction (cosine 1)."""

    name = "bag-of-words-test"

    def __init__(self, dimension: int = 256) -> None:
        self.dimension = dimension
        self.calls: list[list[str]] = []

    def row(self, text: str) -> np.ndarray:
        row = np.zeros(self.dimension, dtype=np.float32)
        for word in _WORD.findall(_speakerless(text).casefold()):
            digest = hashlib.sha256(word.encode()).digest()
            row[int.from_bytes(digest[:4], "little") % self.dimension] += 1.0
        norm = float(np.linalg.norm(row))
        if norm == 0.0:
            row[0] = 1.0
            return row
        return row / norm

    def encode(self, texts: list[str]) -> Vectors:
        self.calls.append(list(texts))
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self.row(text) for text in texts]).astype(np.float32)


class ExactEncoder(BagOfWordsEncoder):
    """Given texts get given vectors (padded to the dimension); other texts fall back to words."""

    name = "exact-test"

    def __init__(self, vectors: Mapping[str, Sequence[float]], dimension: int = 64) -> None:
        super().__init__(dimension)
        self.vectors = {text: _unit(values, dimension) for text, values in vectors.items()}

    def row(self, text: str) -> np.ndarray:
        given = self.vectors.get(_speakerless(text))
        return given if given is not None else super().row(text)


def _unit(values: Sequence[float], dimension: int) -> np.ndarray:
    row = np.zeros(dimension, dtype=np.float32)
    row[: len(values)] = values
    return row / float(np.linalg.norm(row))


def at_cosine(cosine: float, axis: int = 1) -> list[float]:
    """A unit vector whose cosine with ``[1, 0, ...]`` is ``cosine`` (tilted towards ``axis``)."""
    values = [0.0] * (axis + 1)
    values[0] = cosine
    values[axis] = math.sqrt(1.0 - cosine * cosine)
    return values


@dataclass
class Log:
    """Builds input messages of one partition of the events topic: one offset sequence."""

    namespace: str = "acme"
    partition: int = 0
    next_offset: int = 0
    _count: int = 0

    def _event_id(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}-{self._count}"

    def raw(
        self, value: bytes | None, key: bytes | None = None, offset: int | None = None
    ) -> InputMessage:
        if offset is None:
            offset = self.next_offset
            self.next_offset += 1
        return InputMessage(
            topic=EVENTS,
            partition=self.partition,
            offset=offset,
            timestamp_ms=BROKER_T0_MS + offset,
            key=key,
            value=value,
        )

    def turn(
        self,
        text: str,
        at: datetime = T0,
        *,
        namespace: str | None = None,
        speaker: str = "alice",
        role: Role = "user",
        session_id: str = "s1",
        event_id: str | None = None,
        **metadata: Any,
    ) -> InputMessage:
        namespace = namespace or self.namespace
        event = TurnRecorded(
            event_id=event_id or self._event_id("turn"),
            namespace=namespace,
            event_time=at,
            session_id=session_id,
            speaker=speaker,
            role=role,
            text=text,
            metadata=metadata,
        )
        return self.raw(encode(event), namespace.encode())

    def command(
        self,
        command: CommandName,
        at: datetime = T0,
        *,
        namespace: str | None = None,
        **fields: Any,
    ) -> InputMessage:
        namespace = namespace or self.namespace
        event = CommandIssued(
            event_id=fields.pop("event_id", None) or self._event_id("cmd"),
            namespace=namespace,
            event_time=at,
            command=command,
            **fields,
        )
        return self.raw(encode(event), namespace.encode())

    def recalled(
        self, memory_ids: Iterable[str], at: datetime = T0, *, namespace: str | None = None
    ) -> InputMessage:
        namespace = namespace or self.namespace
        event = MemoriesRecalled(
            event_id=self._event_id("recall"),
            namespace=namespace,
            event_time=at,
            query="what do you remember?",
            hits=[
                RecallHit(memory_id=memory_id, rank=rank, score=0.9)
                for rank, memory_id in enumerate(memory_ids)
            ],
        )
        return self.raw(encode(event), namespace.encode())


@dataclass
class Processed:
    """What one batch did: prepare's batch, and each partition's consolidation output."""

    prepared: PreparedBatch
    outputs: dict[int, PartitionOutput]
    changes: list[Change] = field(default_factory=list)  # in log order, across partitions

    @property
    def dead_letters(self) -> list[DeadLetter]:
        """Prepare's dead letters, then consolidation's."""
        consolidated = [letter for out in self.outputs.values() for letter in out.dead_letters]
        return [*self.prepared.dead_letters, *consolidated]

    @property
    def counts(self) -> Counter[str]:
        """What consolidation counted (prepare's counts are ``prepared.counts``)."""
        total: Counter[str] = Counter()
        for out in self.outputs.values():
            total.update(out.counts)
        return total

    @property
    def watermarks(self) -> dict[int, int]:
        return {
            partition: out.watermark.offset
            for partition, out in self.outputs.items()
            if out.watermark is not None
        }

    def writes(self) -> dict[str, MemoryRecord | None]:
        """What the commit writes to the state topic: last state per id, None for a tombstone."""
        return {
            memory_id: record
            for out in self.outputs.values()
            for memory_id, (_, record) in out.writes.items()
        }

    def namespaces(self) -> set[str]:
        """Namespaces whose memories the batch wrote."""
        return {namespace for out in self.outputs.values() for namespace, _ in out.writes.values()}

    def erased_ids(self) -> list[str]:
        return [c.record.id for c in self.changes if c.change == "erased"]


class Stages:
    """``prepare`` then ``consolidate``, in memory: one ``PartitionTables`` per input partition.

    Each prepared event goes through its bytes on a fake prepared topic (one offset sequence per
    partition), exactly what the consolidate stage reads.
    """

    def __init__(
        self,
        encoder: BagOfWordsEncoder | None = None,
        policy: MemoryPolicy | None = None,
        extractions: Mapping[ExtractionKey, ExtractionRecorded] | None = None,
    ) -> None:
        self.encoder = encoder or BagOfWordsEncoder()
        self.policy = policy or MemoryPolicy()
        self.extractions = dict(extractions or {})
        self.tables: dict[int, PartitionTables] = {}
        self.prepared_log: dict[int, list[PreparedMessage]] = defaultdict(list)

    def partition(self, partition: int) -> PartitionTables:
        if partition not in self.tables:
            self.tables[partition] = PartitionTables(partition, EVENTS, self.policy)
        return self.tables[partition]

    def prepare(
        self,
        messages: Sequence[InputMessage],
        extractions: Mapping[ExtractionKey, ExtractionRecorded] | None = None,
    ) -> tuple[PreparedBatch, list[PreparedMessage]]:
        """Prepare a batch and append it to the prepared topic."""
        recorded = self.extractions if extractions is None else extractions
        batch = prepare_batch(messages, self.encoder, recorded)
        written = []
        for message, prepared in batch.prepared:
            topic = self.prepared_log[message.partition]
            written.append(
                PreparedMessage(
                    PREPARED, message.partition, len(topic), message.key, encode(prepared)
                )
            )
            topic.append(written[-1])
        return batch, written

    def consolidate(
        self, messages: Iterable[PreparedMessage]
    ) -> tuple[dict[int, PartitionOutput], list[Change]]:
        outputs: dict[int, PartitionOutput] = {}
        changes: list[Change] = []
        for message in messages:
            out = outputs.setdefault(message.partition, PartitionOutput(message.partition))
            before = len(out.changes)
            self.partition(message.partition).apply(message, out)
            changes.extend(out.changes[before:])
        return outputs, changes

    def process(
        self,
        messages: Sequence[InputMessage],
        extractions: Mapping[ExtractionKey, ExtractionRecorded] | None = None,
    ) -> Processed:
        batch, written = self.prepare(messages, extractions)
        outputs, changes = self.consolidate(written)
        return Processed(batch, outputs, changes)

    @property
    def banks(self) -> dict[str, NamespaceBank]:
        return {ns: bank for tables in self.tables.values() for ns, bank in tables.banks.items()}

    def bank(self, namespace: str) -> NamespaceBank:
        return self.banks.get(namespace) or NamespaceBank(namespace)


def only(result: Processed, change: str) -> list[MemoryRecord]:
    """Records of the batch's changes of one kind, in order."""
    return [c.record for c in result.changes if c.change == change]


def by_content(stages: Stages, namespace: str = "acme") -> dict[str, MemoryRecord]:
    return {record.content: record for record in stages.bank(namespace).records.values()}
