"""The short-turn probe (bench/short_turns): well formed, fresh, and split by a seeded hash."""

from __future__ import annotations

import orjson
import pytest

from bench.short_turns.score import PROBE, half_of, main, scores
from training.turn_classifier.corpus_stats import LABELS, NON_MEMORY_LABELS, load_corpus, normalise

FIELDS = {"id", "text", "label", "lang", "register", "context"}


def items() -> list[dict[str, str]]:
    return [orjson.loads(line) for line in PROBE.read_bytes().splitlines() if line.strip()]


def test_every_item_is_well_formed_and_both_halves_hold_both_sides() -> None:
    seen: set[tuple[str, str, bool]] = set()
    ids = [item["id"] for item in items()]
    for item in items():
        assert set(item) == FIELDS, item
        assert item["lang"] in {"en", "zh"} and item["id"].startswith(item["lang"] + "-")
        assert item["label"] in LABELS
        seen.add((half_of(item["id"]), item["lang"], item["label"] in NON_MEMORY_LABELS))
    assert len(ids) == len(set(ids)) == 534
    assert len(seen) == 8  # both halves, both languages, chatter and memories


def test_the_halves_are_pinned() -> None:
    halves = [half_of(item["id"]) for item in items()]
    assert (halves.count("tune"), halves.count("test")) == (262, 272)


def test_no_turn_is_one_the_classifier_was_trained_on() -> None:
    corpus = {normalise(turn.text) for turn in load_corpus()}
    assert not [item["id"] for item in items() if normalise(item["text"]) in corpus]


def test_rates_count_a_filtered_turn_as_not_remembered() -> None:
    rows = [
        {"label": "filler", "gate_filters": True, "learned_filters": True, "rules_filter": False},
        {
            "label": "question",
            "gate_filters": False,
            "learned_filters": True,
            "rules_filter": False,
        },
        {"label": "fact", "gate_filters": True, "learned_filters": False, "rules_filter": False},
    ]
    result = scores(rows)
    assert result["gate"] == {"precision": 0.5, "recall": 0.5, "filtered": 2, "non_memory": 2}
    assert result["learned"]["precision"] == 1.0 and result["learned"]["recall"] == 1.0
    assert result["rules"]["filtered"] == 0


def test_the_test_half_is_never_listed() -> None:
    with pytest.raises(SystemExit):
        main(["--half", "test", "--show"])
