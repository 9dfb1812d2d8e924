"""The memory processor: applies input events to a namespace's memory bank.

``decide_*`` functions are pure: they read a bank and an event and return ``Change`` values.
``NamespaceBank.apply`` folds changes into the bank's state. The stream wiring (``worker.py``)
and replay (``replay.py``) both drive exactly this code, so a rebuild equals the live view.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np
import numpy.typing as npt

from pipeline.logic import consolidation, decay
from pipeline.logic.classify import Classification, classify
from pipeline.logic.extraction import (
    extract_entities,
    extract_triplet,
    memory_id,
    segment_id,
)
from pipeline.logic.extraction import (
    search_text as turn_search_text,
)
from pipeline.logic.segmentation import is_boundary
from pipeline.settings import MemoryPolicy
from schemas.events import CommandIssued, MemoriesRecalled, TurnRecorded
from schemas.memory import ChangeType, MemoryChanged, MemoryRecord, Region, SourceTurn, Triplet

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Position:
    """Where an input event sits in the log; records remember the last one applied (I4)."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class Change:
    change: ChangeType
    record: MemoryRecord
    cause_event_id: str
    related_ids: tuple[str, ...] = ()
    at: datetime | None = None  # event time of the cause; the engine fills it in

    def as_update(self) -> MemoryChanged:
        record = self.record
        fallback = record.history[-1].at if record.history else record.updated_at
        return MemoryChanged(
            namespace=record.namespace,
            memory_id=record.id,
            change=self.change,
            event_time=self.at or fallback,
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


@dataclass(frozen=True)
class PreparedTurn:
    """The cheap deterministic work on a turn, done before the expensive embedding."""

    turn: TurnRecorded
    classification: Classification
    search_text: str
    triplet: Triplet | None
    entities: list[str]


def prepare_turn(turn: TurnRecorded, *, time_notes: bool = True) -> PreparedTurn:
    classification = classify(turn.text)
    return PreparedTurn(
        turn=turn,
        classification=classification,
        search_text=turn_search_text(
            turn.speaker, turn.text, turn.event_time, time_notes=time_notes
        ),
        triplet=extract_triplet(turn.text, turn.speaker) if classification.remember else None,
        entities=extract_entities(turn.text) if classification.remember else [],
    )


@dataclass
class NamespaceBank:
    """A namespace's memories plus indexes derived from them (rebuilt on load, never stored)."""

    namespace: str
    records: dict[str, MemoryRecord] = field(default_factory=dict)
    turns_since_consolidation: int = 0
    last_turn_at: datetime | None = None
    # Turns (remembered or not) this namespace has seen; persisted beside the view's watermarks so
    # "light consolidation every N turns" falls on the same turns after a restart as in a replay.
    turns_seen: int = 0
    _region_ids: dict[Region, list[str]] = field(default_factory=lambda: defaultdict(list))
    _region_vectors: dict[Region, list[Vector]] = field(default_factory=lambda: defaultdict(list))
    _matrix_cache: dict[Region, Vector] = field(default_factory=dict)
    _session_recent: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    _seen_events: set[str] = field(default_factory=set)
    # (topic:partition, offset) -> ids of the records that input position changed last.
    _touched: dict[tuple[str, int], set[str]] = field(default_factory=lambda: defaultdict(set))

    @classmethod
    def load(cls, namespace: str, records: Iterable[MemoryRecord]) -> NamespaceBank:
        bank = cls(namespace)
        ordered = sorted(records, key=lambda r: (r.created_at, r.id))
        for record in ordered:
            bank._store(record, fresh=True)
        if ordered:
            bank.last_turn_at = max(r.updated_at for r in ordered)
        return bank

    # -- derived indexes -------------------------------------------------------------------
    def _store(self, record: MemoryRecord, fresh: bool) -> None:
        known = record.id in self.records
        if known:
            self._untouch(self.records[record.id])
        self.records[record.id] = record
        for key, offset in record.applied_positions.items():
            self._touched[(key, offset)].add(record.id)
        self._seen_events.update(source.event_id for source in record.provenance)
        if not known and record.vector:
            self._region_ids[record.region].append(record.id)
            self._region_vectors[record.region].append(np.asarray(record.vector, dtype=np.float32))
            self._matrix_cache.pop(record.region, None)
            if record.provenance:
                recent = self._session_recent[record.provenance[-1].session_id]
                recent.append(record.id)
                del recent[:-64]

    def _untouch(self, record: MemoryRecord) -> None:
        for key, offset in record.applied_positions.items():
            ids = self._touched.get((key, offset))
            if ids is not None:
                ids.discard(record.id)
                if not ids:
                    del self._touched[(key, offset)]

    def touched_by(self, position: Position) -> list[MemoryRecord]:
        """Records whose latest change came from this input position (it was applied before)."""
        ids = self._touched.get((_position_key(position), position.offset), set())
        return [self.records[i] for i in sorted(ids) if i in self.records]

    def _remove(self, memory_id: str) -> None:
        record = self.records.pop(memory_id, None)
        if record is None:
            return
        self._untouch(record)
        ids = self._region_ids[record.region]
        if memory_id in ids:
            index = ids.index(memory_id)
            ids.pop(index)
            self._region_vectors[record.region].pop(index)
            self._matrix_cache.pop(record.region, None)
        for recent in self._session_recent.values():
            if memory_id in recent:
                recent.remove(memory_id)

    @property
    def seen_events(self) -> set[str]:
        return self._seen_events

    def similarities(
        self, region: Region, vector: Vector
    ) -> tuple[list[str], npt.NDArray[np.float32]]:
        ids = self._region_ids[region]
        if not ids:
            return [], np.zeros(0, dtype=np.float32)
        matrix = self._matrix_cache.get(region)
        if matrix is None:
            matrix = np.stack(self._region_vectors[region])
            self._matrix_cache[region] = matrix
        return ids, matrix @ vector

    def session_segment(self, session_id: str) -> tuple[str | None, list[Vector]]:
        """The session's current segment id and the vectors of its remembered turns."""
        recent = [
            self.records[i] for i in self._session_recent.get(session_id, []) if i in self.records
        ]
        if not recent:
            return None, []
        current = recent[-1].segment_id
        vectors = [
            np.asarray(r.vector, dtype=np.float32)
            for r in recent
            if r.segment_id == current and r.vector
        ]
        return current, vectors

    def active_with_attribute(self, triplet: Triplet) -> list[MemoryRecord]:
        return [
            r
            for r in self.records.values()
            if r.triplet is not None
            and r.status in {"active", "cold"}
            and r.triplet.subject == triplet.subject
            and r.triplet.attribute == triplet.attribute
        ]

    # -- folding changes -------------------------------------------------------------------
    def apply(self, changes: Sequence[Change]) -> None:
        for change in changes:
            if change.change == "erased":
                self._remove(change.record.id)
            else:
                self._store(change.record, fresh=False)


def _position_key(position: Position) -> str:
    return f"{position.topic}:{position.partition}"


def _already_applied(record: MemoryRecord, position: Position) -> bool:
    """Offsets only order events within one topic partition, so compare per topic partition."""
    return record.applied_positions.get(_position_key(position), -1) >= position.offset


def _stamp(changes: list[Change], position: Position) -> list[Change]:
    """Record, per input topic partition, the latest position that changed each record."""
    key = _position_key(position)
    return [
        replace(
            c,
            record=c.record.model_copy(
                update={
                    "applied_positions": {
                        **c.record.applied_positions,
                        key: max(position.offset, c.record.applied_positions.get(key, -1)),
                    }
                }
            ),
        )
        for c in changes
    ]


def decide_turn(
    bank: NamespaceBank,
    prepared: PreparedTurn,
    vector: Vector,
    position: Position,
    policy: MemoryPolicy,
) -> list[Change]:
    """Filter → segment → dedup/confirm → create → link → supersede, for one turn."""
    turn = prepared.turn
    decision = prepared.classification
    if not decision.remember:
        return []
    at = turn.event_time
    source = SourceTurn(
        event_id=turn.event_id,
        session_id=turn.session_id,
        speaker=turn.speaker,
        event_time=at,
        dialogue_id=str(turn.metadata["dia_id"]) if "dia_id" in turn.metadata else None,
    )
    new_id = memory_id(bank.namespace, [turn.event_id], turn.text)
    if new_id in bank.records or turn.event_id in bank.seen_events:
        return []  # this turn was applied before the last crash: applying it again changes nothing

    ids, sims = bank.similarities(decision.region, vector)
    order = np.argsort(-sims) if len(ids) else np.array([], dtype=np.int64)

    # A restated fact (same triplet value) or a near-identical turn confirms what is there.
    if prepared.triplet is not None:
        for existing in bank.active_with_attribute(prepared.triplet):
            if existing.status == "active" and consolidation.same_fact(
                existing.triplet, prepared.triplet
            ):
                confirmed = consolidation.confirm(
                    existing,
                    source,
                    at,
                    turn.event_id,
                    prepared.entities,
                    policy,
                    1.0,
                    position.partition,
                    position.offset,
                )
                return _stamp([Change("confirmed", confirmed, turn.event_id)], position)
    for index in order[:1]:
        existing = bank.records[ids[int(index)]]
        similarity = float(sims[int(index)])
        if (
            similarity >= policy.duplicate_cosine
            and existing.status in {"active", "cold"}
            and not consolidation.conflicts(existing.triplet, prepared.triplet)
        ):
            merged = consolidation.confirm(
                existing,
                source,
                at,
                turn.event_id,
                prepared.entities,
                policy,
                similarity,
                position.partition,
                position.offset,
            )
            return _stamp([Change("merged", merged, turn.event_id, (new_id,))], position)

    current_segment, segment_vectors = bank.session_segment(turn.session_id)
    if current_segment is None or is_boundary(
        vector, segment_vectors, policy.segment_boundary_cosine, policy.segment_max_turns
    ):
        current_segment = segment_id(bank.namespace, turn.session_id, turn.event_id)

    created = MemoryRecord(
        id=new_id,
        namespace=bank.namespace,
        region=decision.region,
        kind=decision.kind,
        content=turn.text,
        search_text=prepared.search_text,
        entities=prepared.entities,
        triplet=prepared.triplet,
        base_importance=decision.base_importance,
        confirmations=0,
        importance=decay.importance(decision.base_importance, 0),
        created_at=at,
        valid_from=at,
        updated_at=at,
        segment_id=current_segment,
        provenance=[source],
        activation=decision.base_importance,
        activation_at=at,
        history=[
            consolidation.HistoryEntry(
                at=at, change="created", cause_event_id=turn.event_id, detail=decision.reason
            )
        ],
        vector=[float(x) for x in vector],
        applied_partition=position.partition,
        applied_offset=position.offset,
    )
    changes: list[Change] = []
    related: list[str] = []

    # Links: related but not duplicate memories in the same region (0.85–0.92).
    for index in order[:20]:
        similarity = float(sims[int(index)])
        if similarity < policy.link_cosine:
            break
        other = bank.records[ids[int(index)]]
        if other.status not in {"active", "cold"}:
            continue
        created = consolidation.link(
            created, other.id, similarity, at, turn.event_id, position.partition, position.offset
        )
        changes.append(
            Change(
                "linked",
                consolidation.link(
                    other,
                    created.id,
                    similarity,
                    at,
                    turn.event_id,
                    position.partition,
                    position.offset,
                ),
                turn.event_id,
                (created.id,),
            )
        )
        related.append(other.id)

    # Contradictions: same subject and attribute, different value → the older is superseded.
    if prepared.triplet is not None:
        for existing in bank.active_with_attribute(prepared.triplet):
            if not consolidation.conflicts(existing.triplet, prepared.triplet):
                continue
            if (existing.valid_from, existing.id) <= (created.valid_from, created.id):
                changes.append(
                    Change(
                        "superseded",
                        consolidation.supersede(
                            existing,
                            created,
                            at,
                            turn.event_id,
                            policy,
                            position.partition,
                            position.offset,
                        ),
                        turn.event_id,
                        (created.id,),
                    )
                )
                created = consolidation.mark_supersedes(created, existing.id)
                related.append(existing.id)
            else:
                # An older statement arriving late never overrides the newer one.
                created = consolidation.supersede(
                    created,
                    existing,
                    at,
                    turn.event_id,
                    policy,
                    position.partition,
                    position.offset,
                )
                related.append(existing.id)
    return _stamp([Change("created", created, turn.event_id, tuple(related)), *changes], position)


def decide_consolidation(
    bank: NamespaceBank, now: datetime, cause: str, position: Position, policy: MemoryPolicy
) -> list[Change]:
    """Cooling sweep: active memories whose activation fell below the threshold turn cold."""
    cooled = [
        Change(
            "cooled",
            consolidation.cool(record, now, cause, position.partition, position.offset),
            cause,
        )
        for record in sorted(bank.records.values(), key=lambda r: r.id)
        if consolidation.should_cool(record, now, policy)
    ]
    return _stamp(cooled, position)


def decide_command(
    bank: NamespaceBank, command: CommandIssued, position: Position, policy: MemoryPolicy
) -> list[Change]:
    at = command.event_time
    cause = command.event_id
    if command.command == "tick":
        idle = bank.last_turn_at is not None and decay.days_between(
            bank.last_turn_at, at
        ) * 86_400 >= (policy.idle_consolidation_seconds)
        if idle or bank.turns_since_consolidation >= policy.light_consolidation_every:
            return decide_consolidation(bank, at, cause, position, policy)
        return []
    targets = (
        sorted(bank.records.values(), key=lambda r: r.id)
        if command.whole_namespace
        else [bank.records[i] for i in dict.fromkeys(command.memory_ids) if i in bank.records]
    )
    changes: list[Change] = []
    detail = command.reason or (f"query: {command.query}" if command.query else "")
    for record in targets:
        if _already_applied(record, position):
            continue
        if command.command == "forget" and record.status != "forgotten":
            changes.append(
                Change(
                    "forgotten",
                    consolidation.set_status(
                        record,
                        "forgotten",
                        "forgotten",
                        at,
                        cause,
                        detail,
                        position.partition,
                        position.offset,
                    ),
                    cause,
                )
            )
        elif command.command == "erase":
            changes.append(Change("erased", record, cause))
        elif command.command in {"pin", "unpin"}:
            pinned = command.command == "pin"
            if record.pinned != pinned:
                updated = consolidation.set_status(
                    record,
                    "active" if record.status == "cold" else record.status,
                    "pinned" if pinned else "unpinned",
                    at,
                    cause,
                    detail,
                    position.partition,
                    position.offset,
                ).model_copy(update={"pinned": pinned})
                changes.append(Change("pinned" if pinned else "unpinned", updated, cause))
        elif command.command == "feedback" and command.score is not None:
            updated, change = consolidation.reinforce_hit(
                record,
                at,
                policy.recall_reinforcement_weight * command.score,
                cause,
                position.partition,
                position.offset,
            )
            changes.append(Change(change, updated, cause))
    return _stamp(changes, position)


def decide_signal(
    bank: NamespaceBank, signal: MemoriesRecalled, position: Position, policy: MemoryPolicy
) -> list[Change]:
    changes: list[Change] = []
    for hit in signal.hits:
        record = bank.records.get(hit.memory_id)
        if (
            record is None
            or record.status in {"forgotten", "superseded"}
            or _already_applied(record, position)
        ):
            continue
        # Higher-ranked hits reinforce more: w = base weight / (1 + rank).
        weight = policy.recall_reinforcement_weight / (1 + hit.rank)
        updated, change = consolidation.reinforce_hit(
            record, signal.event_time, weight, signal.event_id, position.partition, position.offset
        )
        changes.append(Change(change, updated, signal.event_id))
    return _stamp(changes, position)


def after_turns(bank: NamespaceBank, turn_count: int, last_at: datetime) -> None:
    """Bookkeeping for light consolidation (every N turns) and idle detection."""
    bank.turns_since_consolidation += turn_count
    bank.turns_seen += turn_count
    bank.last_turn_at = last_at if bank.last_turn_at is None else max(bank.last_turn_at, last_at)


def light_consolidation_due(bank: NamespaceBank, policy: MemoryPolicy) -> bool:
    # Counted from the namespace's first turn, so a restart keeps the same schedule as replay.
    every = policy.light_consolidation_every
    return every > 0 and bank.turns_seen > 0 and bank.turns_seen % every == 0
