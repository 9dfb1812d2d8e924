"""How often the slot rule's value spans find the amounts and the task state a statement gives.

``probe.jsonl`` (README.md) holds statements written without reading the span rules, each with
the amounts it gives and the task state that holds (or none). Each item belongs to one half by a
seeded hash of its id: ``tune`` may be looked at while the rules change, ``test`` is only scored.

    python -m bench.values.score --half tune [--show]
    python -m bench.values.score --half test          # rates only

Prints JSON: statements whose amounts (as a set) and whose state came out exactly, per half and
language; ``--show`` lists the tune half's misses.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import probe_halves
from pipeline.memory.rules.slots import slot_of

PROBE = Path(__file__).with_name("probe.jsonl")
SPLIT_SEED = "hindsight-values-probe/"


def half_of(item_id: str) -> str:
    return probe_halves.half_of(SPLIT_SEED, item_id)


def found_values(text: str) -> tuple[set[float], set[str]]:
    """The amounts (``number:`` values) and task states (``state:``) the slot rule reads."""
    numbers: set[float] = set()
    states: set[str] = set()
    for value in slot_of(text).values:
        kind, _, rest = value.partition(":")
        if kind == "number":
            try:
                numbers.add(round(float(rest), 4))
            except ValueError:
                continue  # a clock time ("7:40") is a number span of another shape
        elif kind == "state":
            states.add(rest)
    return numbers, states


def _rate(right: int, items: int) -> float | None:
    return round(right / items, 3) if items else None


def _scores(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    numbers = sum(row["numbers_right"] for row in rows)
    states = sum(row["state_right"] for row in rows)
    both = sum(row["numbers_right"] and row["state_right"] for row in rows)
    return {
        "items": len(rows),
        "numbers_right": numbers,
        "numbers_rate": _rate(numbers, len(rows)),
        "state_right": states,
        "state_rate": _rate(states, len(rows)),
        "both_right": both,
        "both_rate": _rate(both, len(rows)),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = probe_halves.parse_arguments((__doc__ or "").splitlines()[0], argv)
    rows = []
    for item in probe_halves.read_half(PROBE, SPLIT_SEED, args.half):
        numbers, states = found_values(item["text"])
        wanted_numbers = {round(float(n), 4) for n in item["numbers"]}
        wanted_states = {item["state"]} if item["state"] else set()
        rows.append(
            {
                **item,
                "got_numbers": sorted(numbers),
                "got_states": sorted(states),
                "numbers_right": numbers == wanted_numbers,
                "state_right": states == wanted_states,
            }
        )
    probe_halves.write_report(args.half, rows, _scores)
    if args.show:
        probe_halves.write_misses(
            rows,
            lambda row: not (row["numbers_right"] and row["state_right"]),
            lambda row: (
                f"{row['id']} {row['text']!r}: numbers {row['numbers']} got "
                f"{row['got_numbers']}; state {row['state']} got {row['got_states']}"
            ),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
