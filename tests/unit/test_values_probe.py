"""The value probe (bench/values): well formed, and split by a seeded hash."""

from __future__ import annotations

import orjson
import pytest

from bench.values.score import PROBE, found_values, half_of, main

STATES = {None, "planned", "in_progress", "blocked", "done"}


def test_every_item_is_well_formed_and_both_halves_hold_both_languages() -> None:
    seen: set[tuple[str, str]] = set()
    ids = []
    for line in PROBE.read_bytes().splitlines():
        item = orjson.loads(line)
        assert set(item) == {"id", "lang", "text", "numbers", "state"}, item
        assert item["state"] in STATES
        assert all(isinstance(n, int | float) for n in item["numbers"])
        ids.append(item["id"])
        seen.add((half_of(item["id"]), item["lang"]))
    assert len(ids) == len(set(ids))
    assert seen == {(h, lang) for h in ("tune", "test") for lang in ("en", "zh")}


def test_found_values_reads_amounts_and_states() -> None:
    assert found_values("Rent went up to $1,650 a month") == ({1650.0}, set())
    assert found_values("The migration is done") == (set(), {"done"})


def test_the_test_half_is_never_listed() -> None:
    with pytest.raises(SystemExit):
        main(["--half", "test", "--show"])
