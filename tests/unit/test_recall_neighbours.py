from recall_support import AT, HashingEncoder, turn

from pipeline.recall import HotIndex, RecallEngine
from pipeline.recall.lexical import tokenize
from pipeline.recall.neighbours import follow_ups
from schemas.memory import MemoryRecord


def index_of(*records: MemoryRecord) -> HotIndex:
    index = HotIndex()
    for record in records:
        index.apply(record)
    return index


def test_the_reply_after_a_keyword_hit_inherits_its_match() -> None:
    index = index_of(
        turn("q", "What did you research for the adoption?", 0),
        turn("other", "My sister called from Lisbon.", 1, session="s2"),  # interleaved session
        turn("a", "Agencies, mostly - it has been a long road.", 3),
        turn("later", "Want to grab lunch?", 4),
    )
    view = index.view("ns")
    assert view is not None
    hits = view.bm25.search(tokenize("what did she research for the adoption"), 5)
    assert follow_ups(view, hits, lambda _id: True, 1.0) == [("a", hits[0].coverage)]
    assert follow_ups(view, hits, lambda memory_id: memory_id != "a", 1.0) == []


def test_no_inheritance_across_a_topic_boundary_a_long_pause_or_from_oneself() -> None:
    index = index_of(
        turn("q", "What did you research for the adoption?", 0),
        turn("a", "Agencies, mostly.", 3, segment="g2"),
        turn("q2", "Which adoption agency did you pick?", 10),
        turn("a2", "The one downtown.", 11 + 2 * 3600),
        turn("q3", "My daughter starts her adoption paperwork in May.", 20000, speaker="ana"),
        turn("s3", "We changed the car battery last weekend.", 20001, speaker="ana"),
    )
    view = index.view("ns")
    assert view is not None
    hits = view.bm25.search(tokenize("adoption research agency"), 5)
    assert follow_ups(view, hits, lambda _id: True, 1.0) == []


def test_recall_returns_the_answer_to_a_matching_question() -> None:
    encoder = HashingEncoder()
    index = index_of(
        turn("q", "What did you research for the adoption?", 0),
        turn("a", "Agencies, mostly - it has been a long road.", 3),
        *(
            turn(f"n{i}", f"Unrelated remark number {i} about gardening.", 100 + i)
            for i in range(8)
        ),
    )
    engine = RecallEngine(index, encoder)
    question = "What did she research for the adoption?"
    found = engine.recall("ns", question, at=AT, limit=3, truncate=False)
    # The reply, reached through the question it answers, comes first: the question turn only
    # asks (``hops.question_share``) and steps back.
    assert [m.id for m in found[:2]] == ["a", "q"]
    assert "follow_up" in found[0].explanation
