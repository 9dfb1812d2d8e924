"""Test-only helpers for the ingest tests: fake encoders, a log builder and an engine factory.

Never the real model here: the encoders are deterministic and tiny, so a test states exactly how
similar two turns are.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from pipeline.ingest.engine import BatchResult, MemoryEngine, RawRecord
from pipeline.models.encoders import Vectors
from pipeline.runtime.settings import MemoryPolicy
from schemas.codec import encode
from schemas.events import CommandIssued, CommandName, MemoriesRecalled, RecallHit, TurnRecorded
from schemas.memory import MemoryRecord
from topics.catalogue import topic_names

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
DAY = timedelta(days=1)
TOPICS = topic_names("")
_WORD = re.compile(r"\w+", re.UNICODE)


def _speakerless(search_text: str) -> str:
    """The engine embeds ``"<speaker>: <text>"``; the fakes key on the turn's text."""
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
    """Builds input records with per-topic offsets, like a producer writing one partition."""

    namespace: str = "acme"
    partition: int = 0
    offsets: dict[str, int] = field(default_factory=dict)
    _count: int = 0

    def _next(self, role: str) -> int:
        offset = self.offsets.get(role, 0)
        self.offsets[role] = offset + 1
        return offset

    def _event_id(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}-{self._count}"

    def raw(
        self, role: str, value: bytes | None, key: bytes | None = None, offset: int | None = None
    ) -> RawRecord:
        return RawRecord(
            role=role,
            topic=TOPICS[role],  # type: ignore[index]
            partition=self.partition,
            offset=self._next(role) if offset is None else offset,
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
        session_id: str = "s1",
        event_id: str | None = None,
        **metadata: Any,
    ) -> RawRecord:
        namespace = namespace or self.namespace
        event = TurnRecorded(
            event_id=event_id or self._event_id("turn"),
            namespace=namespace,
            event_time=at,
            session_id=session_id,
            speaker=speaker,
            text=text,
            metadata=metadata,
        )
        return self.raw("turns", encode(event), namespace.encode())

    def command(
        self,
        command: CommandName,
        at: datetime = T0,
        *,
        namespace: str | None = None,
        **fields: Any,
    ) -> RawRecord:
        namespace = namespace or self.namespace
        event = CommandIssued(
            event_id=fields.pop("event_id", None) or self._event_id("cmd"),
            namespace=namespace,
            event_time=at,
            command=command,
            **fields,
        )
        return self.raw("commands", encode(event), namespace.encode())

    def recalled(
        self, memory_ids: Iterable[str], at: datetime = T0, *, namespace: str | None = None
    ) -> RawRecord:
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
        return self.raw("signals", encode(event), namespace.encode())


def make_engine(
    encoder: BagOfWordsEncoder | None = None,
    policy: MemoryPolicy | None = None,
    load_bank: Callable[[str], Iterable[MemoryRecord]] | None = None,
    applied: dict[tuple[str, int], int] | None = None,
) -> MemoryEngine:
    return MemoryEngine(
        encoder or BagOfWordsEncoder(),
        policy or MemoryPolicy(),
        load_bank or (lambda _namespace: []),
        applied,
    )


def only(result: BatchResult, change: str) -> list[MemoryRecord]:
    """Records of the batch's changes of one kind, in order."""
    return [c.record for c in result.changes if c.change == change]


def by_content(engine: MemoryEngine, namespace: str = "acme") -> dict[str, MemoryRecord]:
    return {record.content: record for record in engine.bank(namespace).records.values()}
