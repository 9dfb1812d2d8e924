"""The current-value probe (bench/current_value): well formed, and split by a seeded hash."""

from __future__ import annotations

import orjson
import pytest

from bench.current_value.score import PROBE, half_of, main, read_as_current


def test_every_item_is_well_formed_and_both_halves_hold_both_labels() -> None:
    seen: set[tuple[str, str, bool]] = set()
    ids = []
    for line in PROBE.read_bytes().splitlines():
        item = orjson.loads(line)
        assert set(item) == {"id", "lang", "query", "current"}, item
        assert item["lang"] in {"en", "zh"} and isinstance(item["current"], bool)
        ids.append(item["id"])
        seen.add((half_of(item["id"]), item["lang"], item["current"]))
    assert len(ids) == len(set(ids))
    assert len(seen) == 8  # both halves, both languages, both labels


def test_a_named_window_is_read_first() -> None:
    assert read_as_current("what do I use now?")
    assert not read_as_current("what did I use last week, and now?")


def test_the_test_half_is_never_listed() -> None:
    with pytest.raises(SystemExit):
        main(["--half", "test", "--show"])
