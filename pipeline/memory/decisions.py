"""Decisions: what one prepared input event does to a namespace's bank.

``decide_*`` functions are pure: they read a bank and an event (with what ``prepare`` computed
for it) and return ``Change`` values; ``NamespaceBank.apply`` folds them in. ``consolidate`` and
replay drive exactly this code, one event at a time in log order, so a rebuild equals the live
state (I2). Time is the event's, never the wall clock.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from pipeline.memory.bank import CURRENT_STATUSES, Change, NamespaceBank, Position, Vector
from pipeline.memory.rules import consolidation, decay, echo, slots
from pipeline.memory.rules.extraction import memory_id, segment_id
from pipeline.memory.rules.forgetting import forget_matches
from pipeline.memory.rules.segmentation import is_boundary
from pipeline.runtime.settings import MemoryPolicy
from schemas.events import CommandIssued, MemoriesRecalled, TurnRecorded
from schemas.memory import ChangeType, HistoryEntry, MemoryRecord, SourceTurn
from schemas.prepared import TurnAnalysis

LINK_CANDIDATES = 20
# Memories whose slot frames are closest to a new statement's, checked by the update rule (the
# rule's own cosine floor cuts the list first; the cap bounds the work per turn).
SLOT_CANDIDATES = 32
# Memories of other sessions a turn may echo: the closest few, and only related ones.
ECHO_CANDIDATES = 8
ECHO_COSINE_FLOOR = 0.3


@dataclass(frozen=True)
class PreparedTurn:
    """A turn with what ``prepare`` decided about it (and its vector when remembered)."""

    turn: TurnRecorded
    analysis: TurnAnalysis
    vector: Vector | None
    key_id: str | None = None  # the data key that sealed the turn (crypto-shredding)


def _source(turn: TurnRecorded, position: Position, key_id: str | None) -> SourceTurn:
    return SourceTurn(
        event_id=turn.event_id,
        session_id=turn.session_id,
        speaker=turn.speaker,
        event_time=turn.event_time,
        dialogue_id=str(turn.metadata["dia_id"]) if "dia_id" in turn.metadata else None,
        topic=position.topic,
        partition=position.partition,
        offset=position.offset,
        key_id=key_id,
    )


def decide_turn(
    bank: NamespaceBank, prepared: PreparedTurn, position: Position, policy: MemoryPolicy
) -> list[Change]:
    """Echo → dedup/confirm → segment → create → link → supersede, for one remembered turn.

    A turn forms one memory or confirms one (never both, never two): only that record gains the
    turn as a source, so erasing it and destroying its sources' data keys touches no other memory.
    """
    turn, analysis, vector = prepared.turn, prepared.analysis, prepared.vector
    if not analysis.remember or vector is None:
        return []
    new_id = memory_id(bank.namespace, [turn.event_id], analysis.content)
    if new_id in bank.records or bank.has_seen(turn.event_id):
        return []  # the same turn published twice (a client retry): it changes nothing
    if echo.echoed(analysis.content, analysis.keep_probability, _echo_candidates(bank, prepared)):
        return []  # it only acknowledges a memory already here: nothing to store (rules/echo.py)
    source = _source(turn, position, prepared.key_id)
    ids, sims = bank.similarities(analysis.region, vector)
    order = np.argsort(-sims, kind="stable") if len(ids) else np.zeros(0, dtype=np.int64)
    confirmed = _confirmation(bank, prepared, source, ids, sims, order, new_id, policy)
    if confirmed is not None:
        return [confirmed]
    created = _new_record(bank, prepared, new_id, source, position, policy)
    created, linked = _links(bank, created, ids, sims, order, turn, policy)
    created, superseded = _supersessions(bank, created, turn, policy)
    related = tuple(c.record.id for c in [*linked, *superseded])
    return [
        Change("created", created, turn.event_id, turn.event_time, related),
        *linked,
        *superseded,
    ]


def _echo_candidates(bank: NamespaceBank, prepared: PreparedTurn) -> Iterator[MemoryRecord]:
    """What a turn may echo: its session's latest memories, then the namespace's closest ones."""
    yield from bank.session_current(prepared.turn.session_id)
    if prepared.vector is not None:
        for memory_id in bank.closest_current(prepared.vector, ECHO_COSINE_FLOOR, ECHO_CANDIDATES):
            yield bank.records[memory_id]


def _confirmation(
    bank: NamespaceBank,
    prepared: PreparedTurn,
    source: SourceTurn,
    ids: list[str],
    sims: Vector,
    order: np.ndarray,
    new_id: str,
    policy: MemoryPolicy,
) -> Change | None:
    """A restated fact (same triplet value) or a near-identical turn confirms what is there."""
    turn, analysis = prepared.turn, prepared.analysis
    at = turn.event_time
    if analysis.triplet is not None:
        for existing in bank.current_with_attribute(analysis.triplet):
            # The same triplet value with another value beside it ("Dr" of "Dr. Hughes" /
            # "Dr. Patel") is no restatement: the turn says what the memory does not.
            if (
                existing.status == "active"
                and consolidation.same_fact(existing.triplet, analysis.triplet)
                and not _says_more(existing, prepared, policy)
            ):
                record = consolidation.confirm(
                    existing, source, at, turn.event_id, analysis.entities, policy, 1.0
                )
                return Change("confirmed", record, turn.event_id, at)
    if len(order):
        best = int(order[0])
        existing = bank.records[ids[best]]
        similarity = float(sims[best])
        if (
            similarity >= policy.duplicate_cosine
            and existing.status in CURRENT_STATUSES
            and slots.worded_alike(existing.content, analysis.content, policy)
            and not _says_more(existing, prepared, policy)
            # A changed value is an update even when the sentence barely changed ("… 6379" /
            # "… 6380"): it must not merge into the memory it supersedes.
            and slots.update_reason(statement_of(bank, existing), _turn_statement(prepared), policy)
            is None
        ):
            record = consolidation.confirm(
                existing, source, at, turn.event_id, analysis.entities, policy, similarity
            )
            return Change("merged", record, turn.event_id, at, (new_id,))
    return None


def _says_more(existing: MemoryRecord, prepared: PreparedTurn, policy: MemoryPolicy) -> bool:
    """The turn names a value or a subject the memory does not, or puts a word of its own in the
    place of one of the memory's: it is no duplicate, however close the vectors (the default
    encoder puts most short Chinese sentences near one another: 李娜负责招聘 / 李妍负责新员工培训
    at cosine 0.92), and merging would lose what it says."""
    older, newer = existing.slot, prepared.analysis.slot
    if older is None or newer is None:
        return False
    return (
        slots.about_two_things(older, newer)
        or slots.adds_a_value(older, newer)
        or slots.swaps_a_word(older, newer, policy)
    )


def statement_of(bank: NamespaceBank, record: MemoryRecord) -> slots.Statement:
    """A memory as the update rule sees it (its slot vector from the bank's index if stored)."""
    frame = bank.slot_vector(record.id)
    if frame is None:
        frame = slots.slot_vector(record.slot, _vector_of(bank, record))
    return slots.Statement(
        speaker=record.provenance[0].speaker if record.provenance else "",
        kind=record.kind,
        region=record.region,
        triplet=record.triplet,
        slot=record.slot,
        frame_vector=frame,
        vector=_vector_of(bank, record),
        session=record.provenance[0].session_id if record.provenance else None,
    )


def _vector_of(bank: NamespaceBank, record: MemoryRecord) -> Vector | None:
    stored = bank.vector(record.id)
    if stored is None and record.vector:
        return np.asarray(record.vector, np.float32)
    return stored


def _turn_statement(prepared: PreparedTurn) -> slots.Statement:
    analysis = prepared.analysis
    slot = analysis.slot
    return slots.Statement(
        speaker=prepared.turn.speaker,
        kind=analysis.kind,
        region=analysis.region,
        triplet=analysis.triplet,
        slot=slot,
        frame_vector=slots.slot_vector(slot, prepared.vector),
        vector=prepared.vector,
        session=prepared.turn.session_id,
    )


def _new_record(
    bank: NamespaceBank,
    prepared: PreparedTurn,
    new_id: str,
    source: SourceTurn,
    position: Position,
    policy: MemoryPolicy,
) -> MemoryRecord:
    turn, analysis, vector = prepared.turn, prepared.analysis, prepared.vector
    assert vector is not None
    at = turn.event_time
    current_segment, segment_vectors = bank.session_segment(turn.session_id)
    if current_segment is None or is_boundary(
        vector, segment_vectors, policy.segment_boundary_cosine, policy.segment_max_turns
    ):
        current_segment = segment_id(bank.namespace, turn.session_id, turn.event_id)
    return MemoryRecord(
        id=new_id,
        namespace=bank.namespace,
        region=analysis.region,
        kind=analysis.kind,
        content=analysis.content,
        search_text=analysis.search_text,
        entities=analysis.entities,
        triplet=analysis.triplet,
        slot=analysis.slot,
        base_importance=analysis.base_importance,
        confirmations=0,
        importance=decay.importance(analysis.base_importance, 0),
        created_at=at,
        valid_from=at,
        updated_at=at,
        segment_id=current_segment,
        provenance=[source],
        activation=analysis.base_importance,
        activation_at=at,
        history=[
            HistoryEntry(
                at=at, change="created", cause_event_id=turn.event_id, detail=analysis.reason
            )
        ],
        vector=vector.tolist(),
        origin_offset=position.offset,
    )


def _links(
    bank: NamespaceBank,
    created: MemoryRecord,
    ids: list[str],
    sims: Vector,
    order: np.ndarray,
    turn: TurnRecorded,
    policy: MemoryPolicy,
) -> tuple[MemoryRecord, list[Change]]:
    """Related but not duplicate memories in the same region (0.85–0.92) link both ways."""
    at, cause = turn.event_time, turn.event_id
    changes: list[Change] = []
    for index in order[:LINK_CANDIDATES]:
        similarity = float(sims[int(index)])
        if similarity < policy.link_cosine:
            break
        other = bank.records[ids[int(index)]]
        if other.status not in CURRENT_STATUSES:
            continue
        created = consolidation.link(created, other.id, similarity, at, cause)
        linked = consolidation.link(other, created.id, similarity, at, cause)
        changes.append(Change("linked", linked, cause, at, (created.id,)))
    return created, changes


def _update_candidates(
    bank: NamespaceBank, created: MemoryRecord, policy: MemoryPolicy
) -> list[str]:
    """Current memories the new one may update: same triplet attribute, or a close slot frame."""
    wanted: list[str] = []
    if created.triplet is not None:
        wanted += [r.id for r in bank.current_with_attribute(created.triplet)]
    frame = statement_of(bank, created).frame_vector
    if frame is not None:
        ids, sims = bank.slot_similarities(frame)
        order = np.argsort(-sims, kind="stable") if len(ids) else np.zeros(0, dtype=np.int64)
        close = order[sims[order] >= policy.slot_cosine_floor]  # best first, still
        current = (
            memory_id
            for memory_id in (ids[int(i)] for i in close)
            if memory_id in bank.records and bank.records[memory_id].status in CURRENT_STATUSES
        )
        wanted += itertools.islice(current, SLOT_CANDIDATES)
    if created.slot is not None:
        # A value said to have gone ("Priya left", 王姐调去华东区了) names what it updates, however
        # far apart the rest of the two statements is. (Only those: a name as common as a
        # speaker's own would make half the bank a candidate of every statement.)
        gone = slots.said_to_leave(created.slot, slots.named_values(created.slot))
        wanted += bank.current_naming(gone, SLOT_CANDIDATES)
        # Statements the attribute model says may give a value of the same attribute, however
        # they are worded ("Vim" / "Helix has completely won me over").
        for attribute in slots.given_attributes(created.slot, policy.attribute_chance):
            wanted += bank.current_giving(attribute, SLOT_CANDIDATES)
    vector = _vector_of(bank, created)
    if created.slot is not None and vector is not None:
        # A task told again at a later state, or a goal reached another way, is worded anew:
        # the closest statements as wholes are candidates too.
        wanted += bank.closest_current(vector, policy.state_cosine_floor, SLOT_CANDIDATES)
    return [i for i in dict.fromkeys(wanted) if i != created.id]


def _nearest_current(
    bank: NamespaceBank, created: MemoryRecord, candidates: list[str], policy: MemoryPolicy
) -> str | None:
    """The current memory closest to the new one as a whole (a value told in plain words may
    update only that one: of several facts about one subject, the one it speaks to).

    Closest by vector where the encoder reads the language (``slot_cosine_languages``); else,
    of the update candidates, the one sharing most character pairs with it (the English-only
    encoder puts 我周末都去爬山 nearer 周五晚上一般不安排事 than 周末基本泡在羽毛球馆), and
    among those sharing as many (often none: 我戒指圈号是12号 / 其实是13号), the closest by
    vector — the rules that need the nearest still ask for their own evidence.
    """
    vector = _vector_of(bank, created)
    if created.slot is not None and not slots.encoder_reads(created.slot, policy):
        ranked = {
            i: (slots.shared_pairs(created.slot, slot), _cosine(bank, i, vector))
            for i in candidates
            if (slot := bank.records[i].slot) is not None
        }
        return max(ranked, key=ranked.__getitem__, default=None)
    if vector is None:
        return None
    closest = [
        i for i in bank.closest_current(vector, policy.state_cosine_floor, 2) if i != created.id
    ]
    return closest[0] if closest else None


def _cosine(bank: NamespaceBank, memory_id: str, vector: Vector | None) -> float:
    other = _vector_of(bank, bank.records[memory_id])
    return -1.0 if vector is None or other is None else float(other @ vector)


def _supersessions(
    bank: NamespaceBank, created: MemoryRecord, turn: TurnRecorded, policy: MemoryPolicy
) -> tuple[MemoryRecord, list[Change]]:
    """Same subject and attribute, another value (slots.update_reason): the older is superseded."""
    at, cause = turn.event_time, turn.event_id
    changes: list[Change] = []
    created_statement = statement_of(bank, created)
    candidates = _update_candidates(bank, created, policy)
    nearest = _nearest_current(bank, created, candidates, policy)
    for existing_id in candidates:
        existing = bank.records[existing_id]
        existing_statement = statement_of(bank, existing)
        if (existing.valid_from, existing.id) <= (created.valid_from, created.id):
            reason = slots.update_reason(
                existing_statement, created_statement, policy, nearest=existing_id == nearest
            )
            if reason is None:
                continue
            older = consolidation.supersede(existing, created, at, cause, policy, reason)
            changes.append(Change("superseded", older, cause, at, (created.id,)))
            created = consolidation.mark_supersedes(created, existing.id)
        else:
            # An older statement arriving late never overrides the newer one.
            reason = slots.update_reason(created_statement, existing_statement, policy)
            if reason is not None:
                created = consolidation.supersede(created, existing, at, cause, policy, reason)
    return created, changes


def decide_consolidation(
    bank: NamespaceBank, now: datetime, cause: str, policy: MemoryPolicy
) -> list[Change]:
    """Cooling sweep: active memories whose activation fell below the threshold turn cold."""
    return [
        Change("cooled", consolidation.cool(record, now, cause), cause, now)
        for record in sorted(bank.records.values(), key=lambda r: r.id)
        if consolidation.should_cool(record, now, policy)
    ]


def light_consolidation_due(bank: NamespaceBank, policy: MemoryPolicy) -> bool:
    # Counted from the namespace's first turn, so a restart keeps the same schedule as replay.
    every = policy.light_consolidation_every
    return every > 0 and bank.turns_seen > 0 and bank.turns_seen % every == 0


def idle_consolidation_due(bank: NamespaceBank, now: datetime, policy: MemoryPolicy) -> bool:
    if bank.last_turn_at is None:
        return False
    idle_seconds = decay.days_between(bank.last_turn_at, now) * decay.SECONDS_PER_DAY
    return idle_seconds >= policy.idle_consolidation_seconds


def command_targets(
    bank: NamespaceBank,
    command: CommandIssued,
    query_vector: Vector | None,
    query_known_share: float = 1.0,
) -> list[MemoryRecord]:
    """The memories a command names: its ids, what its query means here, or the whole bank.

    ``query_known_share``: how much of the query the encoder read (recorded by ``prepare``)."""
    if command.whole_namespace:
        return sorted(bank.records.values(), key=lambda r: r.id)
    wanted = [i for i in dict.fromkeys(command.memory_ids) if i in bank.records]
    if command.query is not None and query_vector is not None:
        matches = forget_matches(
            bank.records.values(),
            command.query,
            bank.all_similarities(query_vector),
            include_forgotten=command.command == "erase",
            reading=query_known_share,
        )
        wanted += [m.memory_id for m in matches if m.memory_id not in wanted]
    return [bank.records[i] for i in wanted]


def decide_command(
    bank: NamespaceBank,
    command: CommandIssued,
    query_vector: Vector | None,
    policy: MemoryPolicy,
    query_known_share: float = 1.0,
) -> list[Change]:
    at, cause = command.event_time, command.event_id
    if command.command == "tick":
        due = idle_consolidation_due(bank, at, policy) or (
            bank.turns_since_consolidation >= policy.light_consolidation_every
        )
        return decide_consolidation(bank, at, cause, policy) if due else []
    detail = command.reason or (f"query: {command.query}" if command.query else "")
    changes: list[Change] = []
    for record in command_targets(bank, command, query_vector, query_known_share):
        if command.command == "forget" and record.status != "forgotten":
            forgotten = consolidation.set_status(
                record, "forgotten", "forgotten", at, cause, detail
            )
            changes.append(Change("forgotten", forgotten, cause, at))
        elif command.command == "erase":
            changes.append(Change("erased", record, cause, at))
        elif command.command in {"pin", "unpin"}:
            pinned = command.command == "pin"
            if record.pinned != pinned:
                status = "active" if record.status == "cold" else record.status
                change: ChangeType = "pinned" if pinned else "unpinned"
                updated = consolidation.set_status(record, status, change, at, cause, detail)
                changes.append(
                    Change(change, updated.model_copy(update={"pinned": pinned}), cause, at)
                )
        elif command.command == "feedback" and command.score is not None:
            weight = policy.recall_reinforcement_weight * command.score
            updated, kind = consolidation.reinforce_hit(record, at, weight, cause)
            changes.append(Change(kind, updated, cause, at))
    return changes


def decide_signal(
    bank: NamespaceBank, signal: MemoriesRecalled, policy: MemoryPolicy
) -> list[Change]:
    changes: list[Change] = []
    for hit in signal.hits:
        record = bank.records.get(hit.memory_id)
        if record is None or record.status in {"forgotten", "superseded"}:
            continue
        # Higher-ranked hits reinforce more: w = base weight / (1 + rank).
        weight = policy.recall_reinforcement_weight / (1 + hit.rank)
        updated, kind = consolidation.reinforce_hit(
            record, signal.event_time, weight, signal.event_id
        )
        changes.append(Change(kind, updated, signal.event_id, signal.event_time))
    return changes


def decide_after_turn(
    bank: NamespaceBank, turn: TurnRecorded, policy: MemoryPolicy
) -> list[Change]:
    """Every turn (remembered or not) counts towards light consolidation every N turns."""
    bank.note_turn(turn.event_time)
    if not light_consolidation_due(bank, policy):
        return []
    bank.turns_since_consolidation = 0
    return decide_consolidation(bank, turn.event_time, turn.event_id, policy)
