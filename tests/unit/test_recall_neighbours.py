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


def test_ones_own_next_statement_inherits_only_when_asked_how_it_went() -> None:
    index = index_of(
        turn("problem", "The boiler showed error E1 and would not light.", 0, speaker="ana"),
        turn("fix", "Swapped the two batteries and reopened the gas valve.", 1, speaker="ana"),
        turn("recipe", "Braised beef: blanch the shank, then simmer with the spice bag.", 500),
        turn("next", "Red-cooked fish: fry both sides, then the soy sauce.", 501, speaker="ben"),
    )
    view = index.view("ns")
    assert view is not None
    boiler = view.bm25.search(tokenize("boiler error E1"), 5)
    assert follow_ups(view, boiler, lambda _id: True, 1.0) == []
    assert follow_ups(view, boiler, lambda _id: True, 1.0, own_continuation=True) == [
        ("fix", boiler[0].coverage)
    ]
    # A procedure is the answer itself: what its speaker says next is the next topic.
    index.apply(
        turn("recipe", "Braised beef: blanch the shank.", 500, speaker="ben", kind="procedure")
    )
    beef = view.bm25.search(tokenize("braised beef"), 5)
    assert follow_ups(view, beef, lambda _id: True, 1.0, own_continuation=True) == []


def test_recall_finds_the_fix_told_after_the_problem() -> None:
    index = index_of(
        turn("problem", "The boiler showed error E1 and would not light.", 0, speaker="ana"),
        turn("fix", "Swapped the two batteries and reopened the gas valve.", 1, speaker="ana"),
        *(
            turn(f"n{i}", f"Unrelated remark number {i} about gardening.", 100 + i)
            for i in range(8)
        ),
    )
    engine = RecallEngine(index, HashingEncoder())
    question = "How did we fix the boiler E1 error last time?"
    past = engine.recall("ns", question, at=AT, limit=2, truncate=False)
    assert [m.id for m in past] == ["problem", "fix"]
    assert "follow_up" in past[1].explanation
    # A present how-to is answered by procedures, not by whatever followed a problem.
    present = engine.recall("ns", "How do I light the boiler?", at=AT, limit=10, truncate=False)
    assert all("follow_up" not in m.explanation for m in present)


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
