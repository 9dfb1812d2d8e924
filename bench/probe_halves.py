"""What the fresh probes under ``bench/`` share: a half per item, and reading one half.

Each probe (``time_phrases``, ``current_value``, ``values``) was written without reading the rules
it scores. An item's half follows from a seeded hash of its id alone, never its text: ``tune``
may be read while the rules change (``--show`` lists its misses), ``test`` is only scored.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson


def half_of(seed: str, item_id: str) -> str:
    """``test`` for about half the items, by a seeded hash of the id alone."""
    return "test" if hashlib.sha256((seed + item_id).encode()).digest()[0] % 2 else "tune"


def parse_arguments(description: str, argv: Sequence[str] | None) -> argparse.Namespace:
    """``--half tune|test|all`` and ``--show``, which is refused for anything but the tune half."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--half", choices=("tune", "test", "all"), default="tune")
    parser.add_argument("--show", action="store_true", help="list the tune half's misses")
    args = parser.parse_args(argv)
    if args.show and args.half != "tune":
        parser.error("--show lists only the tune half: the test half is scored, never read")
    return args


def read_half(path: Path, seed: str, half: str) -> list[dict[str, Any]]:
    """The probe's items in ``half`` (every item for ``all``), in file order."""
    items = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    return [item for item in items if half == "all" or half_of(seed, item["id"]) == half]


def write_report(
    half: str,
    rows: Sequence[dict[str, Any]],
    scores: Callable[[Sequence[dict[str, Any]]], dict[str, Any]],
    **more: dict[str, Any],
) -> None:
    """Print the half's scores overall and per language (and any ``more``) as JSON."""
    report = {
        "half": half,
        "all": scores(rows),
        "by_language": {
            lang: scores([row for row in rows if row["lang"] == lang]) for lang in ("en", "zh")
        },
        **more,
    }
    sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")


def write_misses(
    rows: Sequence[dict[str, Any]],
    missed: Callable[[dict[str, Any]], bool],
    describe: Callable[[dict[str, Any]], str],
) -> None:
    """One line per row the probe's scorer got wrong (``--show``, the tune half only)."""
    for row in rows:
        if missed(row):
            sys.stdout.write(describe(row) + "\n")
