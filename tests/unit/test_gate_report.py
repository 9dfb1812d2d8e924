"""The gate report's pure parts: length bands, why the gate kept a turn, and the counts."""

from __future__ import annotations

import pytest

from pipeline.ingest.prepare import (
    GATE_LONG_WORDS,
    GATE_MAX_WORDS,
    gated_classification,
    learned_classification,
)
from pipeline.memory.rules.classify import classify
from pipeline.models.classifier import TurnVerdict
from training.turn_classifier.gate_report import (
    BANDS,
    Judged,
    band_of,
    fold_report,
    locomo_counts,
    miss_reason,
)

SHORT = "lovely weather out there isn't it"
CHATTY = "the weather has been so strange this week, sunny one minute then hail"  # 13 words
LONG = "hey, long time no see! how have you been, by the way my sister moved to Lisbon in May"


def verdict(keep: float, threshold: float = 0.44) -> TurnVerdict:
    remember = keep >= threshold
    if remember:
        return TurnVerdict(True, "fact", "fact", keep, keep)
    return TurnVerdict(False, "small_talk", "chit_chat", 1 - keep, keep)


def judged(text: str, keep: float) -> Judged:
    v = verdict(keep)
    return Judged(text, v, gated_classification(text, v), learned_classification(text, v))


@pytest.mark.parametrize(
    ("words", "band"),
    [
        (0, "0-10"),
        (GATE_MAX_WORDS, "0-10"),
        (GATE_MAX_WORDS + 1, f"11-{GATE_LONG_WORDS}"),
        (30, "21-30"),
        (51, "51+"),
    ],
)
def test_a_turn_falls_in_one_band_and_the_first_ends_at_the_gates_bound(
    words: int, band: str
) -> None:
    assert band_of(words) == band
    assert BANDS[0] == (0, GATE_MAX_WORDS)


def test_a_negative_length_has_no_band() -> None:
    with pytest.raises(ValueError, match="words"):
        band_of(-1)


def test_why_the_gate_kept_a_turn() -> None:
    assert classify(LONG).remember and classify(SHORT).remember and classify(CHATTY).remember
    assert miss_reason(LONG, verdict(0.01), classify(LONG)) == "longer than the gate judges"
    assert (
        miss_reason(CHATTY, verdict(0.01), classify(CHATTY))
        == "small talk longer than the gate filters"
    )
    assert miss_reason(SHORT, verdict(0.9), classify(SHORT)) == "the model keeps it"
    assert (
        miss_reason(SHORT, verdict(0.40), classify(SHORT))
        == "the model filters it, over the gate's bound"
    )


def test_fold_report_scores_the_gate_and_the_model_and_counts_the_gates_misses() -> None:
    rows = [judged(SHORT, 0.01), judged(LONG, 0.01), judged(SHORT, 0.9), judged(LONG, 0.9)]
    labels = ["small_talk", "small_talk", "small_talk", "fact"]

    report = fold_report(labels, rows)

    assert report["gated"]["non_memory_recall"] == round(1 / 3, 3)
    assert report["gated"]["non_memory_precision"] == 1.0
    assert report["learned"]["non_memory_recall"] == round(2 / 3, 3)
    assert report["gate_misses"] == {
        "longer than the gate judges": 1,
        "the model keeps it": 1,
    }


def test_locomo_counts_split_the_rules_the_gate_and_the_model_by_band() -> None:
    rows = [judged(SHORT, 0.01), judged(LONG, 0.01), judged("hello", 0.01), judged(SHORT, 0.9)]
    words = [6, 19, 1, 6]
    evidence = [True, True, False, False]

    counts = locomo_counts(words, evidence, rows)

    assert counts["0-10"]["turns"] == 3 and counts["0-10"]["turns_evidence"] == 1
    assert counts["0-10"]["rules_filter"] == 1  # "hello": the rules' own
    assert counts["0-10"]["gate_filters"] == 1 and counts["0-10"]["gate_filters_evidence"] == 1
    assert counts["16-20"]["gate_filters"] == 0  # too long for the gate
    assert counts["16-20"]["model_filters_evidence"] == 1
    assert counts["all"]["model_filters"] == 3 and counts["all"]["turns"] == 4
    assert list(counts) == [band_of(high) for _, high in BANDS] + ["all"]
