import math
from datetime import timedelta

import pytest
from recall_support import AT, history, make_record

from pipeline.memory.rules.decay import freshness
from pipeline.recall.scoring import (
    SaidAttribute,
    activation_at,
    answer_group,
    comparable_answers,
    final_score,
    freshest_of_comparable,
    newest_first,
    older_answers,
    relevance,
    replaced_answers,
    score_weights,
    sittings,
    status_at,
    supersede_chain,
    truncate_by_gaps,
)
from pipeline.runtime.settings import RecallPolicy
from schemas.memory import Association, Slot

POLICY = RecallPolicy()
DAY = 86_400.0


def test_seed_formula() -> None:
    assert freshness(AT - timedelta(days=10), AT, 0.02) == pytest.approx(math.exp(-0.2))
    assert freshness(AT + timedelta(days=1), AT, 0.02) == 1.0
    assert final_score(0.8, 0.9, 0.5, POLICY) == pytest.approx(0.6 * 0.8 + 0.25 * 0.9 + 0.15 * 0.5)
    assert final_score(0.8, 1.4, 0.5, POLICY) == final_score(0.8, 1.0, 0.5, POLICY)


def test_activation_decays_slower_for_important_memories() -> None:
    start = AT - timedelta(days=10)
    important = make_record("a", "x", importance=0.9, activation=2.0, activation_at=start)
    ordinary = make_record("b", "x", importance=0.5, activation=2.0, activation_at=start)
    assert activation_at(important, AT) == pytest.approx(2.0 * math.exp(-0.01 * 10))
    assert activation_at(ordinary, AT) == pytest.approx(2.0 * math.exp(-0.05 * 10))
    assert activation_at(ordinary, start - timedelta(days=1)) == 2.0  # never grows backwards


def test_relevance_takes_the_surest_path() -> None:
    assert relevance(0.9, 0.0, 0.0, 0.0) > relevance(0.2, 0.0, 0.0, 0.0)
    assert relevance(0.1, 0.0, 1.0, 0.0) > 0.7  # a verbatim id carries it
    assert relevance(0.5, 0.0, 0.0, 1.0) > relevance(0.5, 0.0, 0.0, 0.0)
    assert 0.0 <= relevance(-0.4, 2.0, 3.0, 5.0) <= 1.0


@pytest.mark.parametrize(
    ("scores", "keep"),
    [
        ([], 0),
        ([0.9], 1),
        ([0.9, 0.7, 0.69], 1),  # gap 0.2 > 0.15
        ([0.9, 0.8, 0.79, 0.78], 2),  # gap 0.1
        ([0.9, 0.88, 0.87, 0.86, 0.85, 0.84, 0.83], 5),  # close: up to 5
        ([0.9, 0.88, 0.87, 0.6, 0.59], 3),  # close head, then a cliff
    ],
)
def test_truncate_by_gaps(scores: list[float], keep: int) -> None:
    assert truncate_by_gaps(scores, POLICY) == keep


def test_status_as_of_history() -> None:
    t = AT - timedelta(days=30)
    record = make_record(
        "m",
        "x",
        created_at=t,
        status="active",
        history=history(
            (t, "created"),
            (t + timedelta(days=5), "superseded"),
            (t + timedelta(days=10), "reactivated"),
            (t + timedelta(days=20), "cooled"),
        ),
    )
    assert status_at(record, t - timedelta(seconds=1)) is None
    assert status_at(record, t + timedelta(days=1)) == "active"
    assert status_at(record, t + timedelta(days=6)) == "superseded"
    assert status_at(record, t + timedelta(days=11)) == "active"
    assert status_at(record, t + timedelta(days=21)) == "cold"


def test_status_without_history_uses_updated_at() -> None:
    t = AT - timedelta(days=30)
    record = make_record(
        "m", "x", created_at=t, status="forgotten", updated_at=t + timedelta(days=2)
    )
    assert status_at(record, t + timedelta(days=1)) == "active"
    assert status_at(record, t + timedelta(days=3)) == "forgotten"


def test_erased_in_history_is_invisible() -> None:
    record = make_record("m", "x", history=history((AT - timedelta(hours=1), "erased")))
    assert status_at(record, AT) is None


def test_supersede_chain_follows_links_and_stops_on_cycles() -> None:
    a = make_record("a", "x", superseded_by="b")
    b = make_record(
        "b", "y", associations=[Association(memory_id="c", relation="superseded_by", weight=1.0)]
    )
    c = make_record("c", "z", superseded_by="a")  # a cycle must not loop
    records = {r.id: r for r in (a, b, c)}
    assert supersede_chain(a, records.get) == ["b", "c"]


def test_meaning_and_wording_combine() -> None:
    # A fair cosine and a fair lexical match together beat a slightly better single clue.
    assert relevance(0.5, 0.5, 0.0, 0.0) > relevance(0.6, 0.0, 0.0, 0.0)
    assert relevance(0.5, 0.5, 0.0, 0.0) > relevance(0.0, 0.7, 0.0, 0.0)
    assert relevance(0.0, 1.0, 0.0, 0.0) == pytest.approx(0.8 * 0.85)  # either alone still counts


def test_freshness_is_a_tie_breaker_unless_the_query_asks_for_recent_things() -> None:
    assert score_weights(POLICY, wants_recent=True) == (0.6, 0.25, 0.15)
    similarity_w, importance_w, freshness_w = score_weights(POLICY, wants_recent=False)
    assert freshness_w < 0.05 and importance_w == 0.25
    assert similarity_w + importance_w + freshness_w == pytest.approx(1.0)
    # Old but clearly more relevant beats new and weaker, for a question about the past...
    old, new = (0.75, 0.7, 0.05), (0.6, 0.7, 1.0)
    assert final_score(*old, POLICY, wants_recent=False) > final_score(
        *new, POLICY, wants_recent=False
    )
    # ...while "what's new" keeps the seed formula, where recency may win.
    assert final_score(*new, POLICY) > final_score(*old, POLICY)


def test_newest_first_orders_the_about_equally_relevant_by_time() -> None:
    import numpy as np

    relevance = np.array([0.70, 0.66, 0.40, 0.64])
    created = np.array([1.0, 3.0, 4.0, 2.0]) * DAY  # epoch seconds, days apart
    scores = np.array([0.60, 0.58, 0.45, 0.57])
    adjusted = newest_first(relevance, created, scores, margin=0.08)
    # The group (relevance >= 0.62): 1 (newest), 3, 0 (oldest); 2 is out and keeps its score.
    assert list(np.argsort(-adjusted)) == [1, 3, 0, 2]
    assert adjusted[2] == scores[2]
    assert adjusted[1] == pytest.approx(0.60)
    assert adjusted[1] - adjusted[0] < 1e-4  # the group stays together for gap truncation


def test_older_answers_are_the_group_members_before_its_newest() -> None:
    import numpy as np

    relevance = np.array([0.70, 0.66, 0.40, 0.64])
    created = np.array([1.0, 3.0, 4.0, 2.0]) * DAY
    # Group (relevance >= 0.62): 1 is the newest; 0 and 3 held before it; 2 is out of the group.
    assert older_answers(relevance, created, margin=0.08).tolist() == [True, False, False, True]
    # Members said at the same time are all current.
    same = older_answers(np.array([0.7, 0.69]), np.array([5.0, 5.0]), margin=0.1)
    assert same.tolist() == [False, False]
    assert older_answers(np.array([]), np.array([]), margin=0.1).size == 0


def test_remarks_of_one_sitting_keep_their_order_and_are_all_current() -> None:
    import numpy as np

    # The old value a week before; then, in one sitting a minute apart, the new value and an
    # unrelated remark that happens to match the question as well.
    relevance = np.array([0.66, 0.64, 0.70])
    created = np.array([0.0, 7 * DAY, 7 * DAY + 60.0])
    scores = np.array([0.58, 0.57, 0.60])
    adjusted = newest_first(relevance, created, scores, margin=0.08)
    # The sitting a week later goes first, its members by their own scores; the old value last.
    assert list(np.argsort(-adjusted)) == [2, 1, 0]
    assert older_answers(relevance, created, margin=0.08).tolist() == [True, False, False]
    # The remark said a day later is a sitting of its own: it is newest, and what came before it
    # held before.
    later = np.array([0.0, 7 * DAY, 8 * DAY])
    assert list(np.argsort(-newest_first(relevance, later, scores, margin=0.08))) == [2, 1, 0]
    assert older_answers(relevance, later, margin=0.08).tolist() == [True, True, False]


def test_sittings_chain_moments_less_than_a_day_apart() -> None:
    import numpy as np

    created = np.array([5.0, 0.0, 0.5, 3.2, 1.4]) * DAY
    assert sittings(created).tolist() == [2, 0, 0, 1, 0]
    assert sittings(np.array([])).size == 0


def test_newest_first_with_no_margin_keeps_only_the_best_on_top() -> None:
    import numpy as np

    relevance = np.array([0.7, 0.5])
    created = np.array([100.0, 200.0])
    scores = np.array([0.6, 0.5])
    assert list(newest_first(relevance, created, scores, margin=0.0)) == [0.6, 0.5]
    assert newest_first(np.array([]), np.array([]), np.array([]), margin=0.1).size == 0


def test_a_new_value_close_in_meaning_joins_the_group_though_it_shares_no_words() -> None:
    import numpy as np

    day = 86_400.0
    # 0: the old value, lifted by the question's words ("learning ... guitar");
    # 1: the new value in other words, a month later: low relevance, but its cosine is close to
    # the best one; 2: an unrelated newer remark, far in meaning too.
    relevance = np.array([0.70, 0.42, 0.30])
    cosine = np.array([0.45, 0.38, 0.15])
    created = np.array([0.0, 30.0, 60.0]) * day
    scores = np.array([0.62, 0.45, 0.35])
    assert answer_group(relevance, 0.15).tolist() == [True, False, False]
    assert answer_group(relevance, 0.15, cosine, created).tolist() == [True, True, False]
    adjusted = newest_first(relevance, created, scores, 0.15, cosine)
    assert list(np.argsort(-adjusted)) == [1, 0, 2]
    assert older_answers(relevance, created, 0.15, cosine).tolist() == [True, False, False]


def test_closeness_in_meaning_counts_only_for_what_came_later() -> None:
    import numpy as np

    # Four facts told in one sitting ("I live in Hangzhou", "I drive a Civic", ...): a weak
    # encoder finds the later ones as close to "which city do I live in now?" as the answer.
    relevance = np.array([0.80, 0.55, 0.56])
    cosine = np.array([0.60, 0.62, 0.58])
    created = np.array([0.0, 1.0, 2.0])  # seconds apart
    assert answer_group(relevance, 0.15, cosine, created).tolist() == [True, False, False]
    assert older_answers(relevance, created, 0.15, cosine).tolist() == [False, False, False]


def test_a_member_only_close_in_meaning_is_ordered_but_never_left_out() -> None:
    import numpy as np

    day = 86_400.0
    # 0: the old value (best relevance); 1: the new value weeks later, close in meaning only;
    # 2: a remark said right after it, as close in meaning (a weak encoder's neighbour).
    relevance = np.array([0.80, 0.55, 0.58])
    cosine = np.array([0.50, 0.45, 0.52])
    created = np.array([0.0, 20.0 * day, 20.0 * day + 60.0])
    # The old value held before the newest member and goes; the new value is only as close in
    # meaning, so it stays in the answer although a newer member exists.
    assert older_answers(relevance, created, 0.15, cosine).tolist() == [True, False, False]


def test_comparable_answers_are_alike_and_about_as_relevant() -> None:
    import numpy as np

    relevance = np.array([0.80, 0.74, 0.75, 0.50])
    alike = np.array([True, True, False, True])
    # 1: alike and within 0.1; 2: within 0.1 but another kind of remark; 3: alike, far below.
    assert comparable_answers(relevance, alike, 0, margin=0.1).tolist() == [
        True,
        True,
        False,
        False,
    ]
    # The best answer is its own group even when nothing else qualifies.
    lone = comparable_answers(relevance, np.zeros(4, dtype=np.bool_), 0, margin=0.1)
    assert lone.tolist() == [True, False, False, False]


def test_the_fresher_comparable_answer_takes_the_first_place() -> None:
    import numpy as np

    scores = np.array([0.70, 0.66, 0.68, 0.30])  # 0 older and a bit closer; 1 fresher
    seed = np.array([0.55, 0.60, 0.40, 0.20])  # the seed formula, freshness in full
    group = np.array([True, True, False, False])
    reordered = freshest_of_comparable(scores, seed, group)
    # 1 takes the group's first place and 0 its second; 2 and 3 keep score and place.
    assert reordered.tolist() == [0.66, 0.70, 0.68, 0.30]
    assert sorted(reordered.tolist()) == sorted(scores.tolist())  # same places, same scores
    # A group of one changes nothing.
    single = np.array([True, False, False, False])
    assert freshest_of_comparable(scores, seed, single).tolist() == scores.tolist()


# -- answers a later value of the same attribute replaced -----------------------------------------

DAY_S = 86_400.0


def said_as(
    attribute: str | None,
    probability: float,
    day: float,
    speaker: str = "ana",
    single_valued: bool = True,
) -> SaidAttribute:
    slot = Slot(
        frame="",
        attribute=attribute,
        attribute_probability=probability,
        single_valued=single_valued,
    )
    return SaidAttribute(speaker=speaker, created=day * DAY_S, slot=slot)


def test_an_answer_a_later_value_of_its_attribute_replaced_is_left_out() -> None:
    said = [
        said_as("training_goal", 0.34, 0),  # "Training for the Chicago marathon"
        said_as("training_goal", 0.39, 10),  # "Still all in on the Chicago marathon"
        said_as("training_goal", 0.83, 30),  # "Signed up for a triathlon in Krakow"
        said_as("commute", 0.9, 5),
    ]
    assert replaced_answers(said, 0.3).tolist() == [True, True, False, False]
    assert replaced_answers(said, 0.35).tolist() == [False, True, False, False]


@pytest.mark.parametrize(
    ("newer", "why"),
    [
        (said_as("training_goal", 0.9, 0.5), "the same sitting"),
        (said_as("training_goal", 0.9, 30, speaker="bo"), "someone else"),
        (said_as("training_goal", 0.9, 30, single_valued=False), "values that add up"),
        (said_as("race_result", 0.9, 30), "another attribute"),
        (said_as(None, 0.0, 30), "no guess"),
    ],
)
def test_only_the_same_speakers_later_value_of_one_attribute_replaces(
    newer: SaidAttribute, why: str
) -> None:
    assert replaced_answers([said_as("training_goal", 0.6, 0), newer], 0.3).tolist() == [
        False,
        False,
    ], why
