"""``hindsight scenarios run PATH...`` and ``hindsight scenarios validate PATH...``.

Registered through ``bench.cli.register_scenarios``; ``python -m bench.scenarios.cli`` runs it too.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.scenarios.format import CATEGORIES, ScenarioFormatError, load_scenarios, select
from bench.scenarios.report import summary_table, write_report
from bench.scenarios.runner import run_against_stack


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hindsight scenarios", description="Validate or run the scenario suite."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser("validate", help="parse and validate scenario files only")
    validate.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    run = commands.add_parser("run", help="run scenarios against a live stack")
    run.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH", help="scenario files or directories"
    )
    run.add_argument("-k", "--name", action="append", default=[], help="only names containing this")
    run.add_argument("--category", action="append", default=[], choices=CATEGORIES)
    run.add_argument("--language", action="append", default=[], choices=["en", "zh"])
    run.add_argument("--concurrency", type=int, default=1, help="scenarios run at once (default 1)")
    run.add_argument(
        "--timeout", type=float, default=180.0, help="seconds per scenario (default 180)"
    )
    run.add_argument("--data-dir", type=Path, default=None, help="embedded broker/Milvus data dir")
    run.add_argument("--bootstrap", default=None, help="an existing Kafka (default: embedded)")
    run.add_argument("--report", type=Path, default=None, help="write a JSON report here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``hindsight scenarios``; exit 0 when every selected scenario passes."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in and args_in[0] not in {"run", "validate", "-h", "--help"}:
        args_in.insert(0, "run")  # ``hindsight scenarios PATH`` means run
    args = _parser().parse_args(args_in)
    try:
        scenarios = load_scenarios(args.paths)
    except ScenarioFormatError as error:
        print(str(error), file=sys.stderr)
        return 2
    if args.command == "validate":
        counts: dict[tuple[str, str], int] = {}
        for item in scenarios:
            counts[(item.category, item.language)] = (
                counts.get((item.category, item.language), 0) + 1
            )
        print(f"{len(scenarios)} scenarios valid")
        for (category, language), count in sorted(counts.items()):
            print(f"  {category:<20} {language}  {count}")
        return 0
    chosen = select(scenarios, names=args.name, categories=args.category, languages=args.language)
    if not chosen:
        print("no scenario matches the selection", file=sys.stderr)
        return 2
    from pipeline.runtime.settings import Settings

    settings = Settings.from_env().with_overrides(data_dir=args.data_dir, bootstrap=args.bootstrap)
    results = asyncio.run(
        run_against_stack(chosen, settings, concurrency=args.concurrency, timeout=args.timeout)
    )
    print()
    print(summary_table(results))
    if args.report is not None:
        write_report(args.report, results)
    failed = [r for r in results if not r.passed]
    if failed:
        print(f"\n{len(failed)} of {len(results)} scenarios failed", file=sys.stderr)
        return 1
    print(f"\nall {len(results)} scenarios passed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
