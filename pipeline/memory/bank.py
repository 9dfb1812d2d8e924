"""A namespace's memory bank: its records, its schedule, and indexes derived from the records.

The bank is the state ``consolidate`` keeps per namespace. Only the records and the counters are
stored (in the compacted state topic); every index here is rebuilt from them on load, in the
order the live bank inserted them (``origin_offset``), so a restored bank decides exactly as the
live one would have (I2).
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import numpy.typing as npt

from pipeline.memory.rules.slots import given_attributes, named_values, slot_vector
from schemas.memory import (
    BankCounters,
    ChangeType,
    MemoryChanged,
    MemoryRecord,
    Region,
    Triplet,
)

Vector = npt.NDArray[np.float32]

SESSION_WINDOW = 64  # remembered turns per session kept for segmentation (segments are ≤ 12)
CURRENT_STATUSES = frozenset({"active", "cold"})


@dataclass(frozen=True)
class Position:
    """Where an input event sits in the log (topic, partition, offset)."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class Change:
    change: ChangeType
    record: MemoryRecord
    cause_event_id: str
    at: datetime
    related_ids: tuple[str, ...] = ()

    def as_update(self) -> MemoryChanged:
        record = self.record
        return MemoryChanged(
            namespace=record.namespace,
            memory_id=record.id,
            change=self.change,
            event_time=self.at,
            cause_event_id=self.cause_event_id,
            related_ids=list(self.related_ids),
            status=record.status,
            region=record.region,
            kind=record.kind,
            # An erase announces that something went, never what it said (I8).
            content="" if self.change == "erased" else record.content,
            importance=record.importance,
            activation=record.activation,
        )


class _Rows:
    """Vectors of one region in insertion order, in a matrix that grows by doubling."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self._matrix: Vector | None = None

    def append(self, memory_id: str, vector: Vector) -> None:
        count = len(self.ids)
        if self._matrix is None:
            self._matrix = np.zeros((16, vector.shape[0]), dtype=np.float32)
        elif count == self._matrix.shape[0]:
            grown = np.zeros((count * 2, self._matrix.shape[1]), dtype=np.float32)
            grown[:count] = self._matrix
            self._matrix = grown
        self._matrix[count] = vector
        self.ids.append(memory_id)

    def remove(self, memory_id: str) -> None:
        if memory_id not in self.ids or self._matrix is None:
            return
        index = self.ids.index(memory_id)
        self.ids.pop(index)
        self._matrix[index:-1] = self._matrix[index + 1 :].copy()

    def matrix(self) -> Vector:
        if self._matrix is None:
            return np.zeros((0, 0), dtype=np.float32)
        return self._matrix[: len(self.ids)]


@dataclass
class NamespaceBank:
    """A namespace's memories plus indexes derived from them (rebuilt on load, never stored)."""

    namespace: str
    records: dict[str, MemoryRecord] = field(default_factory=dict)
    # The schedule (persisted as BankCounters): every N turns a light consolidation; idle ticks.
    turns_seen: int = 0
    turns_since_consolidation: int = 0
    last_turn_at: datetime | None = None
    _rows: dict[Region, _Rows] = field(default_factory=lambda: defaultdict(_Rows))
    _session_recent: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    # Event id -> how many records name it in their provenance (derived from the records, so an
    # erase forgets the turn here exactly as a bank restored without the record would).
    _seen_events: Counter[str] = field(default_factory=Counter)
    _vector_of: dict[str, Vector] = field(default_factory=dict)
    # Frame vectors of the records' slot signals, in insertion order (updates by slot).
    _slot_rows: _Rows = field(default_factory=_Rows)
    _slot_vector_of: dict[str, Vector] = field(default_factory=dict)
    # The names a record's slot gives (``slots.named_values``) -> the records giving them.
    _naming: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    # The single-valued attribute a record's slot gives a value of -> the records giving one.
    _attributed: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    @classmethod
    def load(
        cls,
        namespace: str,
        records: Iterable[MemoryRecord],
        counters: BankCounters | None = None,
    ) -> NamespaceBank:
        bank = cls(namespace)
        for record in sorted(records, key=lambda r: (r.origin_offset, r.id)):
            bank._store(record)
        if counters is not None:
            bank.turns_seen = counters.turns_seen
            bank.turns_since_consolidation = counters.turns_since_consolidation
            bank.last_turn_at = counters.last_turn_at
        return bank

    def counters(self) -> BankCounters:
        return BankCounters(
            namespace=self.namespace,
            turns_seen=self.turns_seen,
            turns_since_consolidation=self.turns_since_consolidation,
            last_turn_at=self.last_turn_at,
        )

    # -- derived indexes -------------------------------------------------------------------
    def _store(self, record: MemoryRecord) -> None:
        previous = self.records.get(record.id)
        self.records[record.id] = record
        if previous is None or previous.provenance is not record.provenance:
            self._count_sources(previous, -1)
            self._count_sources(record, 1)
        if previous is None and record.vector:
            vector = np.asarray(record.vector, np.float32)
            self._vector_of[record.id] = vector
            self._rows[record.region].append(record.id, vector)
            frame = slot_vector(record.slot, vector)
            if frame is not None:
                self._slot_vector_of[record.id] = frame
                self._slot_rows.append(record.id, frame)
            if record.slot is not None:
                for name in named_values(record.slot):
                    self._naming[name].append(record.id)
                for attribute in given_attributes(record.slot):
                    self._attributed[attribute].append(record.id)
            if record.provenance:
                # The creating turn's session (merges may add turns of other sessions later).
                recent = self._session_recent[record.provenance[0].session_id]
                recent.append(record.id)
                del recent[:-SESSION_WINDOW]

    def _remove(self, memory_id: str) -> None:
        record = self.records.pop(memory_id, None)
        if record is None:
            return
        self._count_sources(record, -1)
        self._vector_of.pop(memory_id, None)
        self._rows[record.region].remove(memory_id)
        if self._slot_vector_of.pop(memory_id, None) is not None:
            self._slot_rows.remove(memory_id)
        if record.slot is not None:
            for name in named_values(record.slot):
                if memory_id in self._naming.get(name, ()):
                    self._naming[name].remove(memory_id)
            for attribute in given_attributes(record.slot):
                if memory_id in self._attributed.get(attribute, ()):
                    self._attributed[attribute].remove(memory_id)
        for recent in self._session_recent.values():
            if memory_id in recent:
                recent.remove(memory_id)

    def _count_sources(self, record: MemoryRecord | None, step: int) -> None:
        if record is None:
            return
        for source in record.provenance:
            self._seen_events[source.event_id] += step
            if self._seen_events[source.event_id] <= 0:
                del self._seen_events[source.event_id]

    def has_seen(self, event_id: str) -> bool:
        """Whether a turn with this event id formed or confirmed a memory that is still here."""
        return event_id in self._seen_events

    def similarities(self, region: Region, vector: Vector) -> tuple[list[str], Vector]:
        """Cosine of ``vector`` with every memory of the region, in insertion order."""
        rows = self._rows[region]
        if not rows.ids:
            return [], np.zeros(0, dtype=np.float32)
        return rows.ids, rows.matrix() @ vector

    def all_similarities(self, vector: Vector) -> dict[str, float]:
        """Cosine of ``vector`` with every memory of the namespace that has a vector."""
        found: dict[str, float] = {}
        for rows in self._rows.values():
            if rows.ids:
                found.update(zip(rows.ids, (rows.matrix() @ vector).tolist(), strict=True))
        return found

    def vector(self, memory_id: str) -> Vector | None:
        return self._vector_of.get(memory_id)

    def closest_current(self, vector: Vector, floor: float, limit: int) -> list[str]:
        """Current memories of any region whose vectors are closest to ``vector`` (≥ floor)."""
        found: list[tuple[float, str]] = []
        for rows in self._rows.values():
            if rows.ids:
                sims = rows.matrix() @ vector
                above = np.flatnonzero(sims >= floor)
                # Closest first, and no more of a region's than could make the cut.
                kept = 0
                for index in above[np.argsort(-sims[above], kind="stable")].tolist():
                    memory_id = rows.ids[index]
                    if self.records[memory_id].status in CURRENT_STATUSES:
                        found.append((-float(sims[index]), memory_id))
                        kept += 1
                        if kept == limit:
                            break
        return [memory_id for _, memory_id in sorted(found)[:limit]]

    def slot_similarities(self, frame_vector: Vector) -> tuple[list[str], Vector]:
        """Cosine of a frame vector with every record's slot frame, in insertion order."""
        if not self._slot_rows.ids:
            return [], np.zeros(0, dtype=np.float32)
        return self._slot_rows.ids, self._slot_rows.matrix() @ frame_vector

    def slot_vector(self, memory_id: str) -> Vector | None:
        return self._slot_vector_of.get(memory_id)

    def session_segment(self, session_id: str) -> tuple[str | None, list[Vector]]:
        """The session's current segment id and the vectors of its remembered turns."""
        recent = [
            self.records[i] for i in self._session_recent.get(session_id, []) if i in self.records
        ]
        if not recent:
            return None, []
        current = recent[-1].segment_id
        vectors = [
            self._vector_of[r.id]
            for r in recent
            if r.segment_id == current and r.id in self._vector_of
        ]
        return current, vectors

    def session_current(self, session_id: str) -> list[MemoryRecord]:
        """The session's current memories among its latest remembered turns, newest first."""
        recent = self._session_recent.get(session_id, [])
        return [
            self.records[i]
            for i in reversed(recent)
            if i in self.records and self.records[i].status in CURRENT_STATUSES
        ]

    def current_naming(self, names: Iterable[str], limit: int) -> list[str]:
        """Current memories whose slot gives one of ``names``, newest stored first."""
        found: list[str] = []
        for name in names:
            found += reversed(self._naming.get(name, ()))
        current = (
            i
            for i in dict.fromkeys(found)
            if i in self.records and self.records[i].status in CURRENT_STATUSES
        )
        return list(itertools.islice(current, limit))

    def current_giving(self, attribute: str, limit: int) -> list[str]:
        """Current memories whose slot may give a value of this single-valued ``attribute`` (one
        of the attribute model's recorded most probable attributes, ``slots.given_attributes``),
        newest stored first."""
        current = (
            i
            for i in reversed(self._attributed.get(attribute, ()))
            if i in self.records and self.records[i].status in CURRENT_STATUSES
        )
        return list(itertools.islice(current, limit))

    def current_with_attribute(self, triplet: Triplet) -> list[MemoryRecord]:
        """Current (active or cold) memories about the same subject and attribute."""
        return [
            r
            for r in self.records.values()
            if r.triplet is not None
            and r.status in CURRENT_STATUSES
            and r.triplet.subject == triplet.subject
            and r.triplet.attribute == triplet.attribute
        ]

    # -- folding changes -------------------------------------------------------------------
    def apply(self, changes: Sequence[Change]) -> None:
        for change in changes:
            if change.change == "erased":
                self._remove(change.record.id)
            else:
                self._store(change.record)

    def note_turn(self, at: datetime) -> None:
        """Bookkeeping for light consolidation (every N turns) and idle detection."""
        self.turns_since_consolidation += 1
        self.turns_seen += 1
        self.last_turn_at = at if self.last_turn_at is None else max(self.last_turn_at, at)
