"""Test-only helpers for the recall tests: a deterministic fake encoder and a record factory."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from pipeline.models.encoders import Vectors
from pipeline.recall.lexical import tokenize
from schemas.memory import HistoryEntry, MemoryRecord, SourceTurn

AT = datetime(2024, 5, 15, 12, 0, tzinfo=UTC)  # a Wednesday


class HashingEncoder:
    """Hashed bag of (stemmed / jieba) words: same words → same direction, deterministic."""

    name = "hashing-test"

    def __init__(self, dimension: int = 64) -> None:
        self.dimension = dimension
        self.calls = 0

    def _row(self, text: str) -> np.ndarray:
        row = np.zeros(self.dimension, dtype=np.float32)
        for token in tokenize(text):
            digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self.dimension
            row[bucket] += 1.0 if digest[4] & 1 else -1.0
        norm = float(np.linalg.norm(row))
        return row / norm if norm else row

    def encode(self, texts: list[str]) -> Vectors:
        self.calls += 1
        return np.stack([self._row(text) for text in texts]).astype(np.float32)


def make_record(
    memory_id: str,
    content: str,
    *,
    namespace: str = "ns",
    region: str = "semantic",
    kind: str = "fact",
    created_at: datetime | None = None,
    importance: float = 0.7,
    encoder: HashingEncoder | None = None,
    vector: list[float] | None = None,
    **changes: Any,
) -> MemoryRecord:
    created = created_at or AT - timedelta(days=1)
    if vector is None:
        vector = (encoder or HashingEncoder()).encode([content])[0].tolist()
    fields: dict[str, Any] = {
        "id": memory_id,
        "namespace": namespace,
        "region": region,
        "kind": kind,
        "content": content,
        "search_text": content,
        "base_importance": importance,
        "importance": importance,
        "created_at": created,
        "valid_from": created,
        "updated_at": created,
        "segment_id": "seg-" + memory_id,
        "activation": 1.0,
        "activation_at": created,
        "vector": vector,
        "provenance": [
            SourceTurn(
                event_id="evt-" + memory_id, session_id="s1", speaker="user", event_time=created
            )
        ],
    }
    fields.update(changes)
    return MemoryRecord(**fields)


def said(
    memory_id: str,
    content: str,
    *,
    speaker: str = "user",
    session: str = "s1",
    days_ago: float = 1.0,
    encoder: HashingEncoder | None = None,
    **changes: Any,
) -> MemoryRecord:
    """A memory of one turn: who said it, in which session, ``days_ago`` before ``AT``."""
    created = AT - timedelta(days=days_ago)
    return make_record(
        memory_id,
        content,
        encoder=encoder,
        created_at=created,
        provenance=[
            SourceTurn(
                event_id=f"evt-{memory_id}", session_id=session, speaker=speaker, event_time=created
            )
        ],
        **changes,
    )


def history(*entries: tuple[datetime, str]) -> list[HistoryEntry]:
    return [
        HistoryEntry(at=at, change=change, cause_event_id=f"cmd-{n}")  # type: ignore[arg-type]
        for n, (at, change) in enumerate(entries)
    ]


def turn(
    memory_id: str,
    text: str,
    seconds: int,
    session: str = "s1",
    segment: str = "g1",
    speaker: str | None = None,
    **changes: Any,
) -> MemoryRecord:
    """A conversation turn said ``seconds`` into a conversation 30 days before ``AT``; speakers
    alternate by default, as in a conversation."""
    created = AT - timedelta(days=30) + timedelta(seconds=seconds)
    return make_record(
        memory_id,
        text,
        created_at=created,
        segment_id=segment,
        provenance=[
            SourceTurn(
                event_id=f"e-{memory_id}",
                session_id=session,
                speaker=speaker or ("ana" if seconds % 2 == 0 else "ben"),
                event_time=created,
            )
        ],
        **changes,
    )
