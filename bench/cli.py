"""``hindsight bench …`` and ``hindsight scenarios …``: evaluation commands plugged into the CLI.

The product's CLI never imports this package; it finds these commands through the
``hindsight.commands`` entry-point group (pyproject.toml), so an install without the evaluation
tools simply lacks them. Each benchmark's module is imported only when it runs.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable

# Benchmark name -> module whose ``main(argv) -> int`` runs it. The names are contracts that
# other tooling calls (`hindsight bench <name> --json`): keep them.
BENCHMARKS: dict[str, str] = {
    "ingest": "bench.ingest",
    "recall-latency": "bench.recall_latency",
    "locomo": "bench.locomo.runner",
    "scale-out": "bench.scale_out",
    "chaos": "bench.chaos",
    "load": "bench.load",
    "fuzz": "bench.fuzz",
    "encoders": "bench.encoders",
    "crosslingual": "bench.crosslingual",
}


def _run_module(module: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        main = importlib.import_module(module).main
        return int(main(args.rest) or 0)

    return run


def _run_bench(args: argparse.Namespace) -> int:
    return _run_module(BENCHMARKS[args.bench])(args)


def register_bench(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("bench", help=f"benchmarks: {' | '.join(BENCHMARKS)}")
    parser.add_argument("bench", choices=list(BENCHMARKS))
    parser.add_argument("rest", nargs=argparse.REMAINDER)
    parser.set_defaults(func=_run_bench)


def register_scenarios(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("scenarios", help="scenario suite: scenarios run|validate PATH...")
    parser.add_argument("rest", nargs=argparse.REMAINDER)
    parser.set_defaults(func=_run_module("bench.scenarios.cli"))
