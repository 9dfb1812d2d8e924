"""How often recall reads a question as asking for the value that holds now.

``probe.jsonl`` (README.md) holds questions written without reading the routing rules, each
labelled ``current`` or not. Each item belongs to one half by a seeded hash of its id: ``tune``
may be looked at while the rules change, ``test`` is only scored.

    python -m bench.current_value.score --half tune [--show]
    python -m bench.current_value.score --half test          # rates only

Prints JSON: precision and recall of "asks for the current value", per half and language;
``--show`` lists the tune half's misses. A question that names a time window is never read as
current (the engine's own order: the window decides first), so it is scored that way here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import probe_halves
from pipeline.recall.routing import asks_current_value
from pipeline.recall.temporal import parse_time_window

PROBE = Path(__file__).with_name("probe.jsonl")
SPLIT_SEED = "hindsight-current-value-probe/"
ASKED_AT = datetime(2024, 6, 12, 10, 0, tzinfo=UTC)  # any moment: windows only need one


def half_of(item_id: str) -> str:
    return probe_halves.half_of(SPLIT_SEED, item_id)


def read_as_current(query: str) -> bool:
    """What the engine does: a named window first, then the current-value cues."""
    return parse_time_window(query, ASKED_AT) is None and asks_current_value(query)


def _scores(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    tp = sum(row["got"] and row["current"] for row in rows)
    fp = sum(row["got"] and not row["current"] for row in rows)
    fn = sum(not row["got"] and row["current"] for row in rows)
    return {
        "items": len(rows),
        "precision": round(tp / (tp + fp), 3) if tp + fp else None,
        "recall": round(tp / (tp + fn), 3) if tp + fn else None,
        "right": sum(row["got"] == row["current"] for row in rows),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = probe_halves.parse_arguments((__doc__ or "").splitlines()[0], argv)
    rows = [
        {**item, "got": read_as_current(item["query"])}
        for item in probe_halves.read_half(PROBE, SPLIT_SEED, args.half)
    ]
    probe_halves.write_report(args.half, rows, _scores)
    if args.show:
        probe_halves.write_misses(
            rows,
            lambda row: row["got"] != row["current"],
            lambda row: f"{row['id']} meant {row['current']}: {row['query']!r}",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
