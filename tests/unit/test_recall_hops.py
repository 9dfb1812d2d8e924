"""Second-hop recall: relevance feedback, diversity, and questions read without speaker names."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from recall_support import AT, HashingEncoder, said

from pipeline.recall import HotIndex, RecallEngine
from pipeline.recall.hops import (
    DEFAULT_HOPS,
    HopTuning,
    asks_about_asking,
    asks_for_list,
    diversified,
    feedback_vector,
    person_names,
    question_share,
    spread_over_sessions,
    without_names,
)
from pipeline.recall.scoring import DEFAULT_TUNING, RecallTuning
from schemas.memory import MemoryRecord

ENCODER = HashingEncoder()


# ----- feedback_vector -----


def test_feedback_moves_the_query_towards_the_mean_of_its_answers() -> None:
    query = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    seeds = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=np.float32)
    moved = feedback_vector(query, seeds, 1.0)
    assert np.linalg.norm(moved) == pytest.approx(1.0)
    # Half of each answer's direction: equal pulls towards both, the query still first.
    assert moved[1] == pytest.approx(moved[2])
    assert moved[0] > moved[1] > 0.0


def test_feedback_without_seeds_or_weight_is_the_normalised_query() -> None:
    query = np.array([3.0, 4.0], dtype=np.float32)
    seeds = np.array([[0.0, 1.0]], dtype=np.float32)
    np.testing.assert_allclose(feedback_vector(query, seeds, 0.0), [0.6, 0.8], rtol=1e-6)
    np.testing.assert_allclose(
        feedback_vector(query, np.zeros((0, 2), dtype=np.float32), 1.0), [0.6, 0.8], rtol=1e-6
    )
    # A pull that cancels the query out falls back to the query.
    opposite = np.array([[-0.6, -0.8]], dtype=np.float32)
    np.testing.assert_allclose(feedback_vector(query, opposite, 1.0), [0.6, 0.8], rtol=1e-6)


# ----- diversified -----


def test_diversity_moves_a_different_answer_above_near_copies() -> None:
    scores = np.array([0.90, 0.89, 0.88, 0.80])
    vectors = np.array([[1, 0], [1, 0.01], [1, 0.02], [0, 1]], dtype=np.float32)
    order, adjusted = diversified(scores, vectors, 0.2)
    assert order[:2] == [0, 3]  # the other direction beats the two near copies of the first
    assert sorted(order) == [0, 1, 2, 3]
    assert adjusted == sorted(adjusted, reverse=True)
    assert adjusted[0] == pytest.approx(0.90)


def test_diversity_zero_keeps_the_order_and_the_scores() -> None:
    scores = np.array([0.9, 0.5, 0.4])
    vectors = np.eye(3, dtype=np.float32)
    assert diversified(scores, vectors, 0.0) == ([0, 1, 2], [0.9, 0.5, 0.4])
    assert diversified(np.zeros(0), np.zeros((0, 3), dtype=np.float32), 0.3) == ([], [])


def test_diversity_ties_keep_the_given_order() -> None:
    scores = np.array([0.5, 0.5, 0.5])
    order, _ = diversified(scores, np.eye(3, dtype=np.float32), 0.5)
    assert order == [0, 1, 2]


# ----- without_names -----


@pytest.mark.parametrize(
    ("query", "names", "expected"),
    [
        (
            "What are the names of John's children?",
            ["John Smith"],
            "What are the names of children?",
        ),
        ("Which cities has John been to?", ["John"], "Which cities has been to?"),
        ("What did Caroline and Melanie paint?", ["Caroline", "Melanie"], "What did and paint?"),
        ("Does Johnny like John’s dog?", ["John"], "Does Johnny like dog?"),  # whole words only
        ("小明喜欢什么运动?", ["小明"], "喜欢什么运动?"),
        ("John?", ["John"], "John?"),  # nothing would be left: unchanged
        ("What does she like?", [], "What does she like?"),
    ],
)
def test_without_names(query: str, names: list[str], expected: str) -> None:
    assert without_names(query, names) == expected


def test_role_speakers_are_no_names() -> None:
    assert person_names(["user", "Assistant", "Maria", "小明"]) == ["Maria", "小明"]


# ----- the engine, end to end -----


def engine(records: list[MemoryRecord], tuning: RecallTuning) -> RecallEngine:
    index = HotIndex(ENCODER.dimension)
    for record in records:
        index.apply(record)
    return RecallEngine(index, ENCODER, tuning=tuning)


# Maria's own words answer a question about her; John's turns only address her by name.
TALK = [
    said("maria-spain", "I visited Spain on a solo trip last year", speaker="Maria", days_ago=30),
    said("john-hey", "Hey Maria, so good to hear from you Maria", speaker="John", days_ago=2),
    said("john-wow", "Wow Maria, that trip photo is great", speaker="John", days_ago=3),
]
QUESTION = "Which countries has Maria visited on a trip?"


def ranked(tuning: RecallTuning) -> list[str]:
    memories = engine(TALK, tuning).recall("ns", QUESTION, at=AT, limit=3, truncate=False)
    return [m.id for m in memories]


def test_a_speaker_name_as_a_word_favours_the_turns_that_address_them() -> None:
    keep = dataclasses.replace(DEFAULT_TUNING, speaker_names="keep", speaker_focus_factor=1.0)
    both = dataclasses.replace(keep, speaker_names="both")
    assert ranked(keep)[0] != "maria-spain"
    assert ranked(both)[0] == "maria-spain"


def test_feedback_and_diversity_leave_every_candidate_and_a_descending_score() -> None:
    tuning = dataclasses.replace(DEFAULT_TUNING, feedback_share=0.7, diversity_penalty=0.1)
    memories = engine(TALK, tuning).recall("ns", QUESTION, at=AT, limit=3, truncate=False)
    assert sorted(m.id for m in memories) == sorted(r.id for r in TALK)
    assert [m.score for m in memories] == sorted((m.score for m in memories), reverse=True)


# ----- turns that only ask, list questions -----


@pytest.mark.parametrize(
    ("text", "share"),
    [
        ("I play an acoustic guitar.", 0.0),
        ("What type of guitar? Been playing long?", 1.0),
        ("Wow, that looks great! Where in England was it?", 5 / 9),
        ("Look at this! [image: a photo of a bowl?]", 0.0),  # the image note is no one's words
        ("你弹什么吉他？", 1.0),
        ("", 0.0),
    ],
)
def test_question_share(text: str, share: float) -> None:
    assert question_share(text) == pytest.approx(share)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What activities does Melanie partake in?", True),
        ("Which European countries has Maria been to?", True),
        ("What kind of interests do Joanna and Nate share?", True),
        ("What are Joanna's hobbies and pastimes?", True),
        ("In what ways is Caroline helping?", True),
        ("她去过哪些国家？", True),
        ("How many tournaments has Nate won?", True),
        ("他去了几次上海？", True),
        ("What is Caroline's identity?", False),
        ("What does Melanie do to destress?", False),
        ("What has Melanie painted?", False),
        ("When did John go to Seattle?", False),
        ("How much did the trip cost?", False),
        ("小明喜欢什么运动？", False),
    ],
)
def test_asks_for_list(query: str, expected: bool) -> None:
    assert asks_for_list(query) is expected


def test_asks_about_asking() -> None:
    assert asks_about_asking("What did John ask Maria about?")
    assert asks_about_asking("她问了什么？")
    assert not asks_about_asking("What did John tell Maria about his task?")  # "task" is no "ask"


def test_spread_over_sessions_lets_another_session_in_before_a_third_of_one() -> None:
    scores = [0.80, 0.79, 0.78, 0.77]
    order, adjusted = spread_over_sessions(scores, ["s1", "s1", "s1", "s2"], 0.02)
    # s1's second answer (0.79 - 0.02) beats s2 (0.77); its third (0.78 - 0.04) does not.
    assert order == [0, 1, 3, 2]
    assert adjusted == sorted(adjusted, reverse=True)
    assert spread_over_sessions(scores, ["s1"] * 4, 0.0) == ([0, 1, 2, 3], scores)


GUITAR = [
    said("asks", "What guitar do you play? Do you play guitar daily?", session="s1", days_ago=5),
    said("tells", "I play an old acoustic guitar", session="s2", days_ago=6),
]


def guitar_ids(query: str, hops: HopTuning) -> list[str]:
    index = HotIndex(ENCODER.dimension)
    for record in GUITAR:
        index.apply(record)
    found = RecallEngine(index, ENCODER, hops=hops).recall(
        "ns", query, at=AT, limit=2, truncate=False
    )
    return [m.id for m in found]


def test_a_turn_that_only_asks_steps_back_unless_the_query_is_about_asking() -> None:
    query = "What guitar do you play?"
    off = dataclasses.replace(DEFAULT_HOPS, question_factor=1.0)
    assert guitar_ids(query, off)[0] == "asks"  # it repeats the question's words
    on = dataclasses.replace(DEFAULT_HOPS, question_factor=0.6)
    assert guitar_ids(query, on)[0] == "tells"
    assert guitar_ids("What guitar question did I ask?", on)[0] == "asks"


TRIPS = [
    said("spain-1", "My trip to Spain was lovely", session="s1", days_ago=9),
    said("spain-2", "The trip to Spain had lovely beaches", session="s1", days_ago=9),
    said("spain-3", "Spain trip photos are lovely", session="s1", days_ago=9),
    said("england", "I loved that trip to England", session="s2", days_ago=40),
]


def trip_ids(query: str, penalty: float) -> list[str]:
    index = HotIndex(ENCODER.dimension)
    for record in TRIPS:
        index.apply(record)
    hops = dataclasses.replace(DEFAULT_HOPS, list_session_penalty=penalty)
    found = RecallEngine(index, ENCODER, hops=hops).recall(
        "ns", query, at=AT, limit=4, truncate=False
    )
    return [m.id for m in found]


def test_a_list_question_spreads_its_answers_over_sessions() -> None:
    plain = trip_ids("What trips were lovely?", 0.0)
    assert plain[:2] == ["spain-1", "spain-2"]  # one session's answers first
    spread = trip_ids("What trips were lovely?", 0.05)
    assert spread[:2] == ["spain-1", "england"]
    # A question that asks for one thing keeps the plain order.
    assert trip_ids("Which trip was lovely?", 0.05) == trip_ids("Which trip was lovely?", 0.0)


HOBBIES = [
    said("jo-writes", "Writing is my favourite pastime", speaker="Joanna", session="s1"),
    said("nate-games", "My hobbies and pastimes are games", speaker="Nate", session="s2"),
]


def hobby_ids(query: str, factor: float) -> list[str]:
    index = HotIndex(ENCODER.dimension)
    for record in HOBBIES:
        index.apply(record)
    hops = dataclasses.replace(DEFAULT_HOPS, list_focus_factor=factor)
    found = RecallEngine(index, ENCODER, hops=hops).recall(
        "ns", query, at=AT, limit=2, truncate=False
    )
    return [m.id for m in found]


def test_a_list_question_about_one_speaker_leans_harder_on_their_own_words() -> None:
    # The other speaker's turn matches "hobbies" word for word; the focus alone keeps it first.
    assert hobby_ids("What are Joanna's hobbies and pastimes?", 1.0)[0] == "nate-games"
    assert hobby_ids("What are Joanna's hobbies and pastimes?", 0.5)[0] == "jo-writes"
    # A question for one thing is left to the focus alone.
    assert hobby_ids("What is Joanna's hobby and pastime?", 0.5) == hobby_ids(
        "What is Joanna's hobby and pastime?", 1.0
    )
