import dataclasses
from datetime import timedelta

import numpy as np
from recall_support import AT, HashingEncoder, history, make_record

from pipeline.recall import HotIndex, RecallEngine
from pipeline.recall.conversation import read_in_context, session_neighbours
from pipeline.recall.hops import DEFAULT_HOPS
from schemas.memory import MemoryRecord, SourceTurn

ENCODER = HashingEncoder()


def test_neighbours_are_the_turns_before_and_after_in_the_same_session() -> None:
    # Rows 0, 2, 3 are session 0 (row 3 said before row 2); rows 1, 4 session 1.
    session = np.array([0, 1, 0, 0, 1], dtype=np.int64)
    created = np.array([10.0, 11.0, 30.0, 20.0, 12.0])
    before, after = session_neighbours(session, created, np.ones(5, dtype=np.bool_))
    assert before.tolist() == [-1, -1, 3, 0, 1]
    assert after.tolist() == [3, 4, -1, 2, -1]


def test_rows_not_present_are_nobodys_neighbour_and_ties_keep_row_order() -> None:
    session = np.zeros(4, dtype=np.int64)
    created = np.array([5.0, 5.0, 6.0, 7.0])
    present = np.array([True, True, False, True])
    before, after = session_neighbours(session, created, present)
    assert before.tolist() == [-1, 0, -1, 1]
    assert after.tolist() == [1, 3, -1, -1]
    none_before, none_after = session_neighbours(session, created, np.zeros(4, dtype=np.bool_))
    assert none_before.tolist() == none_after.tolist() == [-1, -1, -1, -1]


def test_a_row_is_read_with_its_weighted_neighbours_as_a_unit_vector() -> None:
    rows = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], dtype=np.float32)
    joint = read_in_context(
        rows, np.array([-1, 0, -1]), np.array([1, -1, -1]), before_weight=0.5, after_weight=1.0
    )
    assert np.allclose(joint[0], np.array([1.0, 1.0]) / np.sqrt(2.0))  # row 0 + 1.0 × row 1
    assert np.allclose(joint[1], np.array([0.5, 1.0]) / np.sqrt(1.25))  # row 1 + 0.5 × row 0
    assert np.allclose(joint[2], 0.0)  # no neighbours, zero row: stays zero
    assert np.allclose(rows[1], [0.0, 1.0])  # the view's rows are not touched


def turn(
    memory_id: str, text: str, seconds: int, session: str = "s1", **changes: object
) -> MemoryRecord:
    created = AT - timedelta(days=3) + timedelta(seconds=seconds)
    return make_record(
        memory_id,
        text,
        encoder=ENCODER,
        created_at=created,
        provenance=[
            SourceTurn(
                event_id=f"e-{memory_id}",
                session_id=session,
                speaker="ana" if seconds % 2 == 0 else "ben",
                event_time=created,
            )
        ],
        **changes,  # type: ignore[arg-type]
    )


def conversation(*, forgotten: bool = False) -> list[MemoryRecord]:
    extra: dict[str, object] = {}
    if forgotten:
        extra = {
            "status": "forgotten",
            "history": history((AT - timedelta(days=1), "forgotten")),
            "updated_at": AT - timedelta(days=1),
        }
    return [
        turn("pets", "We adopted two turtles in the spring, tiny shells and all.", 0, **extra),
        turn("holding", "Oh I also like holding them when they wake up.", 1),
        turn("meeting", "Holding the budget meeting tomorrow morning.", 100, session="s2"),
        turn("sofa", "Holding on to the old sofa for now.", 200, session="s3"),
        *(turn(f"n{i}", f"Unrelated remark {i} about gardening.", 300 + i, "s4") for i in range(6)),
    ]


def ranks(records: list[MemoryRecord], context_share: float) -> list[str]:
    index = HotIndex()
    for record in records:
        index.apply(record)
    hops = dataclasses.replace(DEFAULT_HOPS, context_share=context_share)
    engine = RecallEngine(index, ENCODER, hops=hops)
    found = engine.recall("ns", "holding turtles", at=AT, limit=10, truncate=False)
    return [memory.id for memory in found]


def test_a_turn_is_found_through_the_turn_it_follows() -> None:
    # "them" are the turtles of the turn before: read in context the reply outranks the other
    # turns that only share "holding".
    without = ranks(conversation(), 0.0)
    with_context = ranks(conversation(), 1.0)
    assert without.index("holding") > min(without.index("meeting"), without.index("sofa"))
    assert with_context.index("holding") < min(
        with_context.index("meeting"), with_context.index("sofa")
    )


def test_a_forgotten_turn_lends_its_neighbour_nothing() -> None:
    records = conversation(forgotten=True)
    assert ranks(records, 1.0) == ranks(records, 0.0)


def test_the_view_keeps_each_rows_session_through_a_removal() -> None:
    index = HotIndex()
    for record in (turn("a", "one", 0, "s1"), turn("b", "two", 1, "s2"), turn("c", "three", 2)):
        index.apply(record)
    index.remove("a")  # the last row moves into the freed one
    view = index.view("ns")
    assert view is not None
    codes = {memory_id: int(view.session[view.slot_of[memory_id]]) for memory_id in ("b", "c")}
    assert codes["b"] != codes["c"]
    index.apply(turn("d", "four", 3, "s2"))
    assert int(view.session[view.slot_of["d"]]) == codes["b"]
