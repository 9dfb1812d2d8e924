"""``hindsight scenarios run PATH...`` and ``hindsight scenarios validate PATH...``.

Registered through ``bench.cli.register_scenarios``; ``python -m bench.scenarios.cli`` runs it too.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from bench.scenarios.format import (
    CATEGORIES,
    SUITES,
    ScenarioFormatError,
    load_scenarios,
    select,
)
from bench.scenarios.report import suite_report, write_report
from bench.scenarios.runner import ScenarioResult, run_against_stack


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
    run.add_argument(
        "--suite",
        action="append",
        default=[],
        choices=SUITES,
        help="team (scenarios/*.yaml) or a generalisation half: tune, test (held out)",
    )
    run.add_argument("--concurrency", type=int, default=1, help="scenarios run at once (default 1)")
    run.add_argument(
        "--timeout", type=float, default=180.0, help="seconds per scenario (default 180)"
    )
    run.add_argument("--data-dir", type=Path, default=None, help="embedded broker/Milvus data dir")
    run.add_argument("--bootstrap", default=None, help="an existing Kafka (default: embedded)")
    run.add_argument("--report", type=Path, default=None, help="write a JSON report here")
    run.add_argument(
        "--summary-only",
        action="store_true",
        help="print only the pass-rate tables, and keep outcomes out of the report "
        "(for the held-out half: nobody reads its failures)",
    )
    return parser


def finish(
    results: Sequence[ScenarioResult], *, report: Path | None = None, summary_only: bool = False
) -> int:
    """Print the tables, write the report; exit 0 when every scenario passed, else 1.

    With ``summary_only`` nothing names a failing scenario: not the output, not the report.
    """
    print()
    print(suite_report(results))
    if report is not None:
        write_report(report, results, withhold=SUITES if summary_only else ())
    failed = [r for r in results if not r.passed]
    if failed:
        print(f"\n{len(failed)} of {len(results)} scenarios failed", file=sys.stderr)
        return 1
    print(f"\nall {len(results)} scenarios passed")
    return 0


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
        counts = Counter((item.suite, item.category, item.language) for item in scenarios)
        print(f"{len(scenarios)} scenarios valid")
        for (suite, category, language), count in sorted(
            counts.items(), key=lambda pair: (SUITES.index(pair[0][0]), pair[0][1:])
        ):
            print(f"  {suite:<5} {category:<20} {language}  {count}")
        return 0
    chosen = select(
        scenarios,
        names=args.name,
        categories=args.category,
        languages=args.language,
        suites=args.suite,
    )
    if not chosen:
        print("no scenario matches the selection", file=sys.stderr)
        return 2
    from pipeline.runtime.settings import Settings

    settings = Settings.from_env().with_overrides(data_dir=args.data_dir, bootstrap=args.bootstrap)
    results = asyncio.run(
        run_against_stack(
            chosen,
            settings,
            concurrency=args.concurrency,
            timeout=args.timeout,
            echo=not args.summary_only,
        )
    )
    return finish(results, report=args.report, summary_only=args.summary_only)


if __name__ == "__main__":
    raise SystemExit(main())
