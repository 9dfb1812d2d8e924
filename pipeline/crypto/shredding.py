"""Which data key seals what, and which keys an erase destroys — pure rules, one copy each.

Keys are per turn: a turn's content, its prepared event and its recorded extraction are sealed
with the key its client created for it; a memory record and its change-feed entries with the key
of the record's first sealed source turn. Every turn forms or confirms at most one memory
(``pipeline.memory.decisions.decide_turn``), so destroying the keys of a memory's source turns
erases that memory everywhere without touching any other. An erase command gets a key of its
own too (its query may name what is erased) and destroys it; other commands and recall signals
share the namespace's command key, which only a whole-namespace erase destroys.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.crypto.keyring import KeyRing
from schemas.events import CommandIssued, InputEvent, TurnRecorded
from schemas.memory import MemoryRecord


def has_own_key(event: InputEvent) -> bool:
    """Turns and erases are sealed with a key of their own; the rest with the namespace's key."""
    return isinstance(event, TurnRecorded) or (
        isinstance(event, CommandIssued) and event.command == "erase"
    )


def record_key_id(record: MemoryRecord) -> str | None:
    """The key a record (and its change-feed entries) is sealed with: its first sealed source's.

    Sources are only ever appended, so the key never changes once the record has one.
    """
    for source in record.provenance:
        if source.key_id is not None:
            return source.key_id
    return None


def keys_destroyed_by(
    command: CommandIssued,
    command_key_id: str | None,
    erased: Sequence[MemoryRecord],
    ring: KeyRing,
) -> set[str]:
    """The live keys an erase destroys.

    A whole-namespace erase: every key of the namespace the ring holds when it is applied (a
    turn published concurrently may go with it). An erase of memories: the keys of their source
    turns, including a second key of a turn a client sent twice, and the erase's own key.
    """
    namespace = command.namespace
    if command.whole_namespace:
        found = ring.keys_of(namespace)
    else:
        found = set()
        for record in erased:
            found |= {s.key_id for s in record.provenance if s.key_id is not None}
            found |= ring.keys_for_events(namespace, record.source_event_ids)
    if command_key_id is not None and (
        command.whole_namespace or ring.seals_event(command_key_id, command.event_id)
    ):
        found.add(command_key_id)
    # Never another namespace's key, and nothing already gone.
    return {
        key_id
        for key_id in found
        if ring.state(key_id) == "live" and ring.namespace_of(key_id) == namespace
    }
