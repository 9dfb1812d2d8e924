"""The time-phrase probe (bench/time_phrases): well formed, and split by a seeded hash."""

from __future__ import annotations

from datetime import date, datetime

import orjson
import pytest

from bench.time_phrases.score import PROBE, half_of, main

FIELDS = {"id", "lang", "asked_at", "query", "window"}


def test_every_item_is_well_formed_and_both_halves_hold_both_languages() -> None:
    halves: dict[tuple[str, str], int] = {}
    ids = set()
    for line in PROBE.read_bytes().splitlines():
        item = orjson.loads(line)
        assert set(item) == FIELDS, item
        assert item["lang"] in {"en", "zh"}
        asked = datetime.fromisoformat(item["asked_at"])
        assert asked.tzinfo is not None, item["id"]
        if item["window"] is not None:
            start, end = (date.fromisoformat(value) for value in item["window"])
            assert start < end, item["id"]
        ids.add(item["id"])
        key = (half_of(item["id"]), item["lang"])
        halves[key] = halves.get(key, 0) + 1
    assert len(ids) == sum(halves.values())
    assert set(halves) == {(h, lang) for h in ("tune", "test") for lang in ("en", "zh")}


def test_the_split_depends_on_the_id_alone() -> None:
    assert half_of("en-001") == half_of("en-001")
    assert {half_of(f"zh-{n:03d}") for n in range(1, 40)} == {"tune", "test"}


def test_the_test_half_is_never_listed() -> None:
    with pytest.raises(SystemExit):
        main(["--half", "test", "--show"])
