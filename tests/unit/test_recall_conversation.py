import dataclasses
from datetime import timedelta

import numpy as np
import pytest
from recall_support import AT, HashingEncoder, history, turn

from pipeline.recall import HotIndex, RecallEngine
from pipeline.recall.ann import ann_available
from pipeline.recall.conversation import (
    in_context_cosines,
    neighbourhood,
    refreshed,
    session_neighbours,
)
from pipeline.recall.hops import DEFAULT_HOPS
from pipeline.recall.scoring import DEFAULT_TUNING
from schemas.memory import MemoryRecord

ENCODER = HashingEncoder()


def alternating(count: int) -> np.ndarray:
    return np.arange(count, dtype=np.int64) % 2


def test_neighbours_are_the_turns_before_and_after_in_the_same_session() -> None:
    # Rows 0, 2, 3 are session 0 (row 3 said before row 2); rows 1, 4 session 1.
    session = np.array([0, 1, 0, 0, 1], dtype=np.int64)
    speaker = np.array([0, 0, 0, 1, 1], dtype=np.int64)
    created = np.array([10.0, 11.0, 30.0, 20.0, 12.0])
    before, after = session_neighbours(session, speaker, created, np.ones(5, dtype=np.bool_))
    assert before.tolist() == [-1, -1, 3, 0, 1]
    assert after.tolist() == [3, 4, -1, 2, -1]


def test_rows_not_present_are_nobodys_neighbour_and_ties_keep_row_order() -> None:
    session = np.zeros(4, dtype=np.int64)
    created = np.array([5.0, 5.0, 6.0, 7.0])
    present = np.array([True, True, False, True])
    speaker = np.array([0, 1, 1, 0], dtype=np.int64)
    before, after = session_neighbours(session, speaker, created, present)
    assert before.tolist() == [-1, 0, -1, 1]
    assert after.tolist() == [1, 3, -1, -1]
    absent = np.zeros(4, dtype=np.bool_)
    none_before, none_after = session_neighbours(session, speaker, created, absent)
    assert none_before.tolist() == none_after.tolist() == [-1, -1, -1, -1]


def test_turns_of_one_session_said_hours_apart_are_not_neighbours() -> None:
    # A client may keep one session id for months: the turns of another sitting are not read
    # with each other.
    session = np.zeros(3, dtype=np.int64)
    created = np.array([0.0, 600.0, 600.0 + 2 * 3600.0])
    before, after = session_neighbours(session, alternating(3), created, np.ones(3, np.bool_))
    assert before.tolist() == [-1, 0, -1]
    assert after.tolist() == [1, -1, -1]


def test_a_speakers_next_statement_is_not_their_neighbour() -> None:
    # Two statements of one speaker in a row, then a reply: only the reply pairs up.
    session = np.zeros(3, dtype=np.int64)
    speaker = np.array([0, 0, 1], dtype=np.int64)
    created = np.array([0.0, 1.0, 2.0])
    before, after = session_neighbours(session, speaker, created, np.ones(3, np.bool_))
    assert before.tolist() == [-1, -1, 1]
    assert after.tolist() == [-1, 2, -1]


def test_a_row_read_with_its_weighted_neighbours_has_the_joint_vectors_cosine() -> None:
    rows = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [0.6, 0.8]], dtype=np.float32)
    query = np.array([0.8, 0.6])
    before, after = np.array([-1, 0, -1, -1]), np.array([1, -1, -1, -1])
    hood = neighbourhood(rows, np.arange(4), before, after, chunk=3)
    sims = rows @ query
    cosines = in_context_cosines(sims, sims[np.maximum(before, 0)], sims[after], hood, 0.5, 1.0)
    joint_0 = np.array([1.0, 1.0])  # row 0 + 1.0 × row 1
    joint_1 = np.array([0.5, 1.0])  # row 1 + 0.5 × row 0
    assert np.isclose(cosines[0], joint_0 @ query / np.linalg.norm(joint_0))
    assert np.isclose(cosines[1], joint_1 @ query / np.linalg.norm(joint_1))
    assert cosines[2] == 0.0  # no neighbours and no vector: nothing to read
    assert np.isclose(cosines[3], rows[3] @ query)  # no neighbours: its own cosine
    # The same for a few rows only (a search's candidates), in any order.
    some = np.array([3, 1])
    part = neighbourhood(rows, some, before[some], after[some])
    again = in_context_cosines(
        sims[some], sims[np.maximum(before[some], 0)], sims[after[some]], part, 0.5, 1.0
    )
    assert np.allclose(again, cosines[some])


def conversation(*, forgotten: bool = False) -> list[MemoryRecord]:
    extra: dict[str, object] = {}
    if forgotten:
        extra = {
            "status": "forgotten",
            "history": history((AT - timedelta(days=1), "forgotten")),
            "updated_at": AT - timedelta(days=1),
        }
    return [
        # Two topic segments, so the reply does not inherit the keyword match of the turn it
        # answers (``neighbours.follow_ups``): only the context reading connects them here.
        turn(
            "starter",
            "We got a sourdough starter going in the spring, it bubbles away.",
            0,
            **extra,
        ),
        turn(
            "reply",
            "Oh I also love feeding it first thing, right after the kettle.",
            1,
            segment="g2",
        ),
        turn("meter", "Feeding the parking meter took every coin.", 100, session="s2"),
        turn("cat", "Feeding the neighbours' cat this week.", 200, session="s3"),
        # One speaker's remarks in a row: no neighbours of each other.
        *(
            turn(f"n{i}", f"Unrelated remark {i} about gardening.", 300 + i, "s4", speaker="ana")
            for i in range(6)
        ),
    ]


def index_of(records: list[MemoryRecord]) -> HotIndex:
    index = HotIndex()
    for record in records:
        index.apply(record)
    return index


def ranks(records: list[MemoryRecord] | HotIndex, context_share: float) -> list[str]:
    index = records if isinstance(records, HotIndex) else index_of(records)
    hops = dataclasses.replace(DEFAULT_HOPS, context_share=context_share)
    engine = RecallEngine(index, ENCODER, hops=hops)
    found = engine.recall("ns", "feeding the sourdough starter", at=AT, limit=10, truncate=False)
    return [memory.id for memory in found]


def test_a_turn_is_found_through_the_turn_it_follows() -> None:
    # "it" is the starter of the turn before: read in context the reply outranks the other
    # turns that only share "feeding".
    without = ranks(conversation(), 0.0)
    with_context = ranks(conversation(), 1.0)
    assert without.index("reply") > min(without.index("meter"), without.index("cat"))
    assert with_context.index("reply") < min(with_context.index("meter"), with_context.index("cat"))


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


def test_forgetting_a_turn_takes_its_words_out_of_its_neighbour_at_once() -> None:
    index = index_of(conversation())
    assert ranks(index, 1.0) != ranks(index, 0.0)  # the neighbourhood is cached here
    index.apply(conversation(forgotten=True)[0])
    assert ranks(index, 1.0) == ranks(index, 0.0)


def test_a_new_vector_or_turn_is_read_into_its_neighbours() -> None:
    index = index_of([turn("a", "sourdough", 0), turn("b", "feeding", 1)])
    view = index.view("ns")
    assert view is not None
    first = view.neighbourhood(AT.timestamp())
    index.apply(turn("b", "sourdough again", 1))  # same id, new words and vector
    second = view.neighbourhood(AT.timestamp())
    assert second is not first
    assert second.to_before[view.slot_of["b"]] > first.to_before[view.slot_of["b"]]
    index.apply(turn("c", "more", 2))
    third = view.neighbourhood(AT.timestamp())
    assert third.after.tolist()[view.slot_of["b"]] == view.slot_of["c"]


@pytest.mark.skipif(not ann_available(), reason="usearch not installed")
def test_an_approximate_search_reads_its_candidates_in_context_as_an_exact_scan_does() -> None:
    tuning = dataclasses.replace(DEFAULT_TUNING, ann_min_rows=8)
    index = HotIndex(tuning=tuning)
    for record in conversation():
        index.apply(record)
    view = index.view("ns")
    assert view is not None and view.ann is not None  # past the threshold: graphs
    hops = dataclasses.replace(DEFAULT_HOPS, context_share=1.0)
    found = {
        exact: [
            memory.id
            for memory in RecallEngine(
                index, ENCODER, tuning=tuning, hops=hops, exact=exact
            ).recall("ns", "feeding the sourdough starter", at=AT, limit=10, truncate=False)
        ]
        for exact in (True, False)
    }
    assert found[False] == found[True]
    assert found[False].index("reply") < found[False].index("meter")


def test_a_refreshed_neighbourhood_equals_one_computed_afresh() -> None:
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((6, 4)).astype(np.float32)
    session, speaker = np.zeros(6, dtype=np.int64), alternating(6)
    created = np.arange(6, dtype=np.float64)
    everything = np.ones(6, dtype=np.bool_)

    def fresh(count: int, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return session_neighbours(session[:count], speaker[:count], created[:count], present)

    before, after = fresh(4, everything[:4])
    previous = neighbourhood(matrix, np.arange(4), before, after)
    # Two rows added, row 1 given a new vector, row 4 not present: only what changed is redone.
    matrix[1] = rng.standard_normal(4)
    present = everything.copy()
    present[4] = False
    before, after = fresh(6, present)
    got = refreshed(matrix, before, after, previous, np.array([1]))
    want = neighbourhood(matrix, np.arange(6), before, after)
    for name in ("before", "after", "own", "to_before", "to_after", "between", "before_norm"):
        assert np.allclose(getattr(got, name), getattr(want, name)), name


def test_the_view_keeps_its_neighbourhood_exact_through_new_turns_and_removals() -> None:
    index = index_of(conversation())
    view = index.view("ns")
    assert view is not None
    at = AT.timestamp()

    def exact() -> bool:
        got = view.neighbourhood(at)
        before, after = view.neighbours(at)
        want = neighbourhood(view.matrix, np.arange(view.size), before, after)
        names = ("own", "before_norm", "after_norm", "to_before", "to_after", "between")
        return all(np.allclose(getattr(got, name), getattr(want, name)) for name in names)

    assert exact()
    index.apply(turn("late", "Feeding it rye flour now.", 2, segment="g2"))  # a new turn
    index.apply(turn("reply", "Oh I love feeding it with the kettle on.", 1, segment="g2"))
    assert exact()  # brought up to date row by row
    index.remove("meter")
    index.apply(turn("more", "And the sourdough rose overnight.", 3, segment="g2"))
    assert exact()  # a removal moved a row: computed afresh
