"""Leave-one-conversation-out: choices made on the other conversations, scored on the held-out."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from bench.locomo.folds import leave_one_out, pooled_mean, render_folds, summarise
from bench.locomo.loo import (
    Config,
    Idea,
    Scores,
    chosen_choices,
    coordinate_ascent,
    folds_of,
    run_ideas,
)
from bench.locomo.metrics import QuestionScore

METRIC = "recall_all@10"


def q(sample: str, category: int, value: float) -> QuestionScore:
    return QuestionScore(sample, category, {METRIC: value})


def conversation_scores(
    per_sample: Mapping[str, list[float]], category: int = 1
) -> list[QuestionScore]:
    return [q(s, category, v) for s, values in per_sample.items() for v in values]


def test_pooled_mean_excludes_adversarial_and_filters_category() -> None:
    scored = [q("a", 1, 1.0), q("a", 5, 0.0), q("a", 2, 0.0), q("b", 1, 0.0)]
    assert pooled_mean(scored, {"a"}) == (0.5, 2)
    assert pooled_mean(scored, {"a"}, category=1) == (1.0, 1)
    assert pooled_mean(scored, {"c"}) == (None, 0)


def test_each_fold_is_chosen_without_its_own_questions() -> None:
    # "x" is best everywhere but on "c"; "y" is best only on "c". Choosing for fold c must not
    # see c's questions, so it picks x and scores x's 0.0 on c.
    scored = {
        "x": conversation_scores({"a": [1.0], "b": [1.0], "c": [0.0]}),
        "y": conversation_scores({"a": [0.0], "b": [0.0], "c": [1.0]}),
    }
    folds = {f.held_out: f for f in leave_one_out(scored, ["x", "y"])}
    assert folds["c"].chosen == "x"
    assert folds["c"].score == 0.0
    assert folds["a"].chosen == "x"  # trained on b (x 1.0) and c (y 1.0): a tie keeps x
    assert folds["a"].train_score == 0.5


def test_a_tie_keeps_the_earlier_candidate() -> None:
    same = conversation_scores({"a": [1.0], "b": [0.0]})
    folds = leave_one_out({"base": same, "new": list(same)}, ["base", "new"])
    assert {f.chosen for f in folds} == {"base"}


def test_summary_has_stable_keys_and_statistics() -> None:
    scored = {"x": conversation_scores({"a": [1.0, 0.0], "b": [1.0]})}
    summary = summarise(leave_one_out(scored, ["x"]))
    assert set(summary) == {"folds", "mean", "min", "max", "spread", "pooled", "per_category"}
    assert summary["mean"] == pytest.approx(0.75)
    assert summary["min"] == 0.5
    assert summary["spread"] == 0.5
    assert summary["pooled"] == pytest.approx(2 / 3)
    assert summary["per_category"]["1"]["min"] == 0.5
    table = render_folds("LOO", {"x": summary})
    assert "| a | x | 2 | 0.500 | 0.500 |" in table


def test_unknown_candidate_is_an_error() -> None:
    with pytest.raises(ValueError, match="candidates"):
        leave_one_out({"x": []}, ["y"])


# ----- ideas: coordinate ascent over options, chosen per fold -----


def _ideas() -> list[Idea]:
    keep = lambda c: c  # noqa: E731 - options only label the choice here
    return [
        Idea("alpha", "", (("off", keep), ("on", keep))),
        Idea("beta", "", (("off", keep), ("on", keep))),
    ]


class FakeScores(Scores):
    """Scores by choice: alpha=on helps a and b but hurts c; beta=on helps everywhere."""

    def __init__(self) -> None:
        self.ideas = tuple(_ideas())
        self.by_name = {}

    def of(self, choice: Mapping[str, str]) -> list[QuestionScore]:
        per = {"a": 0.0, "b": 0.0, "c": 0.5}
        if choice.get("alpha") == "on":
            per = {"a": 0.5, "b": 0.5, "c": 0.0}
        bonus = 0.25 if choice.get("beta") == "on" else 0.0
        return [q(s, 1, min(1.0, v + bonus)) for s, v in per.items()]


def test_coordinate_ascent_takes_each_ideas_best_option_on_training() -> None:
    scores = FakeScores()
    start = {"alpha": "off", "beta": "off"}
    assert coordinate_ascent(scores, {"a", "b"}, start, scores.ideas) == {
        "alpha": "on",
        "beta": "on",
    }
    # Trained on c alone, alpha hurts: it stays off.
    assert coordinate_ascent(scores, {"c"}, start, scores.ideas)["alpha"] == "off"


def test_ideas_report_alone_and_left_out() -> None:
    scores = FakeScores()
    start = {"alpha": "off", "beta": "off"}
    choices = chosen_choices(scores, ["a", "b", "c"], start)
    folds = {f.held_out: f for f in folds_of(scores, choices, ["alpha", "beta"])}
    assert folds["c"].chosen == "alpha=on,beta=on"  # chosen on a and b
    assert folds["c"].score == 0.25
    results = run_ideas(scores, ["a", "b", "c"])
    assert set(results) >= {"baseline", "defaults", "loo", "ideas"}
    assert results["ideas"]["beta"]["alone_gain"]["folds_worse"] == 0
    assert results["ideas"]["beta"]["alone_gain"]["mean"] == pytest.approx(0.25)


def test_config_is_a_value() -> None:
    from pipeline.recall.scoring import DEFAULT_TUNING

    assert Config(True, DEFAULT_TUNING) == Config(True, DEFAULT_TUNING)


def test_select_keeps_the_named_ideas_in_order_and_rejects_unknown_names() -> None:
    from bench.locomo.loo import IDEAS, select

    assert select(None) == IDEAS
    assert [idea.name for idea in select(["links", "speaker_names", "links"])] == [
        "links",
        "speaker_names",
    ]
    with pytest.raises(ValueError, match="no idea named"):
        select(["no-such-idea"])


def test_every_idea_has_the_shipped_default_among_its_options() -> None:
    from bench.locomo.loo import IDEAS, default_choice

    assert set(default_choice(IDEAS)) == {idea.name for idea in IDEAS}
