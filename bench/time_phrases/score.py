"""How often the query time parser names the window the probe's writer meant.

``probe.jsonl`` (README.md) holds questions written without reading the parser, each with the
window its writer meant (or none). Each item belongs to one half by a seeded hash of its id:
``tune`` may be looked at while the parser is changed, ``test`` is only scored.

    python -m bench.time_phrases.score --half tune [--show]
    python -m bench.time_phrases.score --half test          # rates only

Prints JSON: exact windows, per half and language; ``--show`` lists the tune half's misses.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any

from bench import probe_halves
from pipeline.recall.temporal import parse_time_window

PROBE = Path(__file__).with_name("probe.jsonl")
SPLIT_SEED = "hindsight-time-probe/"


def half_of(item_id: str) -> str:
    return probe_halves.half_of(SPLIT_SEED, item_id)


def parsed_window(query: str, asked_at: datetime) -> list[str] | None:
    """The parser's window as two ISO dates ``[start, end)``, or None when it names none."""
    window = parse_time_window(query, asked_at)
    if window is None:
        return None
    return [window.start.date().isoformat(), window.end.date().isoformat()]


def _rate(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    right = sum(row["got"] == row["window"] for row in rows)
    return {
        "items": len(rows),
        "right": right,
        "rate": round(right / len(rows), 3) if rows else None,
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = probe_halves.parse_arguments(__doc__.splitlines()[0], argv)
    rows = []
    for item in probe_halves.read_half(PROBE, SPLIT_SEED, args.half):
        asked_at = datetime.fromisoformat(item["asked_at"])
        rows.append({**item, "got": parsed_window(item["query"], asked_at)})
    probe_halves.write_report(
        args.half,
        rows,
        _rate,
        windows_named=_rate([row for row in rows if row["window"] is not None]),
        none_named=_rate([row for row in rows if row["window"] is None]),
    )
    if args.show:
        probe_halves.write_misses(
            rows,
            lambda row: row["got"] != row["window"],
            lambda row: (
                f"{row['id']} [{date.fromisoformat(row['asked_at'][:10]).strftime('%a')} "
                f"{row['asked_at']}] {row['query']!r}: meant {row['window']}, got {row['got']}"
            ),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
