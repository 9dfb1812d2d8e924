"""Retrieval metrics and the provenance flattening rule, on hand-made rankings."""

from __future__ import annotations

import math

import pytest

from bench.locomo.metrics import (
    METRIC_NAMES,
    QuestionScore,
    RankedResult,
    aggregate,
    count_tokens,
    flatten_provenance,
    ndcg,
    recall_all,
    recall_any,
    recall_frac,
    score_question,
    session_recall_all,
)


def test_flatten_keeps_order_drops_repeats_and_cuts() -> None:
    groups = [["D1:1", "D1:2"], ["D1:2", "D3:4"], ["D5:1"]]
    assert flatten_provenance(groups) == ["D1:1", "D1:2", "D3:4", "D5:1"]
    assert flatten_provenance(groups, k=3) == ["D1:1", "D1:2", "D3:4"]
    assert flatten_provenance([], k=5) == []


def test_a_big_memory_takes_many_places() -> None:
    big = [f"D1:{i}" for i in range(1, 9)]
    ranked = flatten_provenance([big, ["D2:1"]], k=5)
    assert ranked == big[:5]
    assert recall_any(ranked, ["D2:1"], 5) == 0.0


def test_recall_variants() -> None:
    ranked = ["a", "b", "c", "d", "e", "f"]
    assert recall_frac(ranked, ["a", "f"], 5) == 0.5
    assert recall_all(ranked, ["a", "f"], 5) == 0.0
    assert recall_all(ranked, ["a", "f"], 10) == 1.0
    assert recall_any(ranked, ["x", "e"], 5) == 1.0
    assert recall_any(ranked, ["x"], 10) == 0.0
    assert recall_frac(ranked, [], 5) == 0.0


def test_ndcg_binary() -> None:
    assert ndcg(["g", "x"], ["g"], 10) == 1.0
    assert ndcg(["x", "g"], ["g"], 10) == pytest.approx(1 / math.log2(3))
    # Two gold, one found at rank 1: DCG 1, ideal 1 + 1/log2(3).
    assert ndcg(["g1", "x"], ["g1", "g2"], 10) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert ndcg(["x"] * 3, ["g"], 10) == 0.0


def test_session_recall_ranks_sessions_by_first_appearance() -> None:
    ranked = ["D1:1", "D1:5", "D2:3", "D3:1", "D4:1", "D5:9", "D6:2"]
    assert session_recall_all(ranked, ["D5:1", "D2:9"], 5) == 1.0
    assert session_recall_all(ranked, ["D6:2"], 5) == 0.0


def test_count_tokens_whitespace_and_cjk() -> None:
    assert count_tokens("hello  world\nagain") == 3
    assert count_tokens("我喜欢猫 cats") == 5
    assert count_tokens("") == 0


def test_score_question_has_every_metric() -> None:
    scores = score_question(RankedResult(["D1:1", "D1:1", "D2:2"], "two words"), ["D2:2"])
    assert set(scores) == set(METRIC_NAMES)
    assert scores["recall_all@5"] == 1.0  # the repeat does not push the gold id down
    assert scores["ndcg@10"] == pytest.approx(1 / math.log2(3))
    assert scores["context_tokens@10"] == 2.0


def test_aggregate_scopes() -> None:
    def score(category: int, value: float) -> QuestionScore:
        return QuestionScore("s", category, {name: value for name in METRIC_NAMES})

    summary = aggregate([score(1, 1.0), score(1, 0.0), score(5, 1.0)])
    overall = summary["overall"]
    excl = summary["overall_excl_adversarial"]
    by_category = summary["by_category"]
    assert isinstance(overall, dict) and isinstance(excl, dict) and isinstance(by_category, dict)
    assert overall["n"] == 3 and overall["recall_all@10"] == pytest.approx(2 / 3)
    assert excl["n"] == 2 and excl["recall_all@10"] == 0.5
    assert set(by_category) == {"1", "5"}
    assert by_category["5"]["recall_all@10"] == 1.0
