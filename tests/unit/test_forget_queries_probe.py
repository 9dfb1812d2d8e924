"""The forget-by-query probe (bench/forget_queries): well formed, split by a seeded hash, and
scored as a destructive command should be."""

from __future__ import annotations

import orjson
import pytest

from bench.forget_queries.score import PROBE, half_of, main, run_cases, scores
from pipeline.runtime.settings import Settings

FIELDS = {"id", "lang", "memories", "query", "forget"}


def items() -> list[dict[str, object]]:
    return [orjson.loads(line) for line in PROBE.read_bytes().splitlines() if line.strip()]


def test_every_case_is_well_formed_and_both_halves_hold_both_languages() -> None:
    ids = [str(item["id"]) for item in items()]
    seen: set[tuple[str, object]] = set()
    for item in items():
        assert set(item) == FIELDS, item
        memories, forget = item["memories"], item["forget"]
        assert isinstance(memories, list) and 5 <= len(memories) <= 8, item["id"]
        assert isinstance(forget, list) and all(0 <= i < len(memories) for i in forget)
        assert str(item["id"]).startswith(f"fq-{item['lang']}-")
        seen.add((half_of(str(item["id"])), item["lang"]))
    assert len(ids) == len(set(ids)) == 120
    assert len(seen) == 4


def test_scores_count_what_went_unmeant_as_over_forgetting() -> None:
    rows = [
        {"memories": ["a", "b", "c"], "stored": [0, 1, 2], "meant": [0], "forgotten": [0]},
        {"memories": ["a", "b", "c"], "stored": [0, 1, 2], "meant": [1], "forgotten": [0, 1, 2]},
        {"memories": ["a", "b", "c"], "stored": [0, 1], "meant": [], "forgotten": []},
    ]
    result = scores(rows)
    assert result["exact"] == round(2 / 3, 3)
    assert result["meant_taken"] == 1.0
    assert (result["over_forgotten"], result["cases_over_forgetting"]) == (2, 1)
    assert result["nothing_meant_kept_all"] == "1/1"
    assert result["statements_not_stored"] == 1


def test_a_case_runs_through_the_stages() -> None:
    case = {
        "id": "fq-en-test",
        "lang": "en",
        "memories": [
            "I live at 12 Elm Road in Leeds.",
            "My sister Ana works as a nurse in Porto.",
            "I'm allergic to penicillin.",
            "My gym membership is with PureGym.",
            "Our wifi password is on the fridge.",
        ],
        "query": "forget that I'm allergic to penicillin",
        "forget": [2],
    }
    [row] = run_cases([case], Settings())
    assert row["stored"] == [0, 1, 2, 3, 4]
    assert row["forgotten"] == [2]


def test_the_test_half_is_never_listed() -> None:
    with pytest.raises(SystemExit):
        main(["--half", "test", "--show"])
