"""Consolidation decisions: duplicate, link, supersede, cooling — pure functions on records.

Whether a statement updates another is decided in ``slots.update_reason``; this module applies it.

Each function returns new records; nothing is mutated and time comes from the causing event.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pipeline.memory.rules import decay
from pipeline.memory.rules.text import normalise
from pipeline.runtime.settings import MemoryPolicy
from schemas.memory import Association, ChangeType, HistoryEntry, MemoryRecord, SourceTurn, Triplet

MAX_HISTORY = 48


def _with_history(
    record: MemoryRecord, at: datetime, change: ChangeType, cause: str, detail: str = ""
) -> list[HistoryEntry]:
    """Append a change; keep the creation entry and the latest ones (the log holds the rest)."""
    history = [
        *record.history,
        HistoryEntry(at=at, change=change, cause_event_id=cause, detail=detail),
    ]
    if len(history) > MAX_HISTORY:
        history = [history[0], *history[-(MAX_HISTORY - 1) :]]
    return history


def _add_association(
    associations: Sequence[Association], memory_id: str, relation: str, weight: float
) -> list[Association]:
    kept = [a for a in associations if not (a.memory_id == memory_id and a.relation == relation)]
    return [*kept, Association(memory_id=memory_id, relation=relation, weight=round(weight, 4))]  # type: ignore[arg-type]


def same_fact(first: Triplet | None, second: Triplet | None) -> bool:
    return (
        first is not None
        and second is not None
        and first.subject == second.subject
        and first.attribute == second.attribute
        and normalise(first.value) == normalise(second.value)
    )


def confirm(
    existing: MemoryRecord,
    turn: SourceTurn,
    at: datetime,
    cause: str,
    entities: Sequence[str],
    policy: MemoryPolicy,
    similarity: float,
) -> MemoryRecord:
    """A duplicate or restated fact confirms the existing memory instead of adding a new one.

    Merge rule from the seeds: keep the latest time, the highest importance and the union of
    links and sources.
    """
    confirmations = existing.confirmations + 1
    merged_entities = list(dict.fromkeys([*existing.entities, *entities]))[:32]
    provenance = existing.provenance
    if all(source.event_id != turn.event_id for source in provenance):
        provenance = [*provenance, turn]
    return existing.model_copy(
        update={
            "confirmations": confirmations,
            "importance": max(
                existing.importance, decay.importance(existing.base_importance, confirmations)
            ),
            "updated_at": max(existing.updated_at, at),
            "entities": merged_entities,
            "provenance": provenance,
            "activation": decay.reinforce(
                existing.activation,
                existing.activation_at,
                existing.base_importance,
                at,
                policy.recall_reinforcement_weight,
            ),
            "activation_at": max(existing.activation_at, at),
            "status": "active" if existing.status == "cold" else existing.status,
            "history": _with_history(
                existing, at, "confirmed", cause, f"similarity {similarity:.3f}"
            ),
        }
    )


def link(
    record: MemoryRecord, other_id: str, similarity: float, at: datetime, cause: str
) -> MemoryRecord:
    return record.model_copy(
        update={
            "associations": _add_association(record.associations, other_id, "similar", similarity),
            "history": _with_history(record, at, "linked", cause, other_id),
        }
    )


def supersede(
    older: MemoryRecord,
    newer: MemoryRecord,
    at: datetime,
    cause: str,
    policy: MemoryPolicy,
    reason: str = "",
) -> MemoryRecord:
    """The older fact stops being current; it is kept (never deleted) with a supersede link."""
    return older.model_copy(
        update={
            "status": "superseded",
            "valid_to": newer.valid_from,
            "superseded_by": newer.id,
            "activation": decay.activation_at(
                older.activation, older.activation_at, older.base_importance, at
            )
            * policy.superseded_activation_factor,
            "activation_at": max(older.activation_at, at),
            "associations": _add_association(older.associations, newer.id, "superseded_by", 1.0),
            "history": _with_history(
                older, at, "superseded", cause, f"by {newer.id}" + (f"; {reason}" if reason else "")
            ),
        }
    )


def mark_supersedes(newer: MemoryRecord, older_id: str) -> MemoryRecord:
    return newer.model_copy(
        update={"associations": _add_association(newer.associations, older_id, "supersedes", 1.0)}
    )


def should_cool(record: MemoryRecord, now: datetime, policy: MemoryPolicy) -> bool:
    if record.status != "active" or record.pinned:
        return False
    current = decay.activation_at(
        record.activation, record.activation_at, record.base_importance, now
    )
    return current < policy.cold_activation


def cool(record: MemoryRecord, now: datetime, cause: str) -> MemoryRecord:
    return record.model_copy(
        update={
            "status": "cold",
            "history": _with_history(record, now, "cooled", cause),
        }
    )


def reinforce_hit(
    record: MemoryRecord, at: datetime, weight: float, cause: str
) -> tuple[MemoryRecord, ChangeType]:
    """A recall hit: reinforcement from the signals log (so replay reproduces activation)."""
    change: ChangeType = "reactivated" if record.status == "cold" else "reinforced"
    return (
        record.model_copy(
            update={
                "activation": decay.reinforce(
                    record.activation, record.activation_at, record.base_importance, at, weight
                ),
                "activation_at": max(record.activation_at, at),
                "access_count": record.access_count + 1,
                "last_access": at if record.last_access is None else max(record.last_access, at),
                "status": "active" if record.status == "cold" else record.status,
                "history": _with_history(record, at, change, cause)
                if change == "reactivated"
                else record.history,
            }
        ),
        change,
    )


def set_status(
    record: MemoryRecord,
    status: str,
    change: ChangeType,
    at: datetime,
    cause: str,
    detail: str,
) -> MemoryRecord:
    return record.model_copy(
        update={
            "status": status,
            "history": _with_history(record, at, change, cause, detail),
        }
    )
