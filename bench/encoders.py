"""``hindsight bench encoders``: query latency, batch throughput, RSS and fidelity per encoder.

    hindsight bench encoders --json [--data PATH] [--rounds 3] [--threads-sweep 1,2,4]

Over the LoCoMo dev set: every question is embedded alone (the recall path: ``query_p50_ms``,
``query_p99_ms``), every turn in batches of ``--batch-size`` (the ingest path:
``batch_turns_per_s``). Each encoder runs in a subprocess of its own, so ``rss_mb`` (the process's
peak resident set, VmHWM) is that encoder's alone; the rounds rotate the order, so load from other
users of the machine shows as spread between rounds (``rounds`` keeps every round's figures; the
headline is the median). ``cos_min_vs_reference`` is the smallest cosine between an encoder's
vectors and the PyTorch reference's over all turns and questions (``null`` for another model).

The JSON line's shape is a contract (keys may be added, never renamed):
``{"reference": id, "default": id, "encoders": {id: {"query_p50_ms", "query_p99_ms",
"batch_turns_per_s", "rss_mb", "cos_min_vs_reference"}}}``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from tqdm import tqdm

DEFAULT_DATA = Path("/work/shared/data/locomo_dev.json")
DEFAULT_ENCODERS = ("minilm-torch", "minilm-onnx", "minilm-onnx-int8", "use")
REFERENCE = "minilm-torch"
WARMUP_QUERIES = 20
# Targets from issue 11, checked against the same run's reference.
TARGET_P99_RATIO = 0.35
TARGET_COS_MIN = 0.9999


def texts_from(data: Path, turns: int | None, queries: int | None) -> tuple[list[str], list[str]]:
    """Turns as the ingest benchmark embeds them, and the questions, in dataset order."""
    from bench.locomo.dataset import load_locomo

    conversations = load_locomo(data)
    turn_texts = [f"{t.speaker}: {t.text}" for c in conversations for t in c.turns]
    questions = [q.question for c in conversations for q in c.questions]
    return turn_texts[:turns], questions[:queries]


def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sample."""
    if not samples:
        raise ValueError("percentile of an empty sample")
    ordered = sorted(samples)
    rank = max(1, int(np.ceil(q / 100 * len(ordered))))
    return float(ordered[rank - 1])


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM; ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(
    name: str, turns: list[str], queries: list[str], threads: int | None, batch_size: int
) -> tuple[dict[str, Any], np.ndarray]:
    """One encoder in this process: its figures, and its vectors (turns then queries)."""
    from pipeline.models.encoders import load_encoder

    started = time.perf_counter()
    encoder = load_encoder(name, threads)
    load_s = time.perf_counter() - started
    encoder.encode(turns[:batch_size])
    for query in queries[:WARMUP_QUERIES]:
        encoder.encode([query])

    latencies: list[float] = []
    query_vectors = []
    for query in queries:
        started = time.perf_counter()
        query_vectors.append(encoder.encode([query])[0])
        latencies.append((time.perf_counter() - started) * 1000)

    batches = []
    started = time.perf_counter()
    for start in range(0, len(turns), batch_size):
        batches.append(encoder.encode(turns[start : start + batch_size]))
    batch_s = time.perf_counter() - started

    figures = {
        "id": encoder.id,
        "query_p50_ms": round(percentile(latencies, 50), 3),
        "query_p99_ms": round(percentile(latencies, 99), 3),
        "batch_turns_per_s": round(len(turns) / batch_s, 1),
        "rss_mb": round(peak_rss_mb(), 1),
        "load_s": round(load_s, 2),
        "threads": getattr(encoder, "threads", threads),
        "torch_imported": "torch" in sys.modules,
    }
    vectors = np.concatenate([*batches, np.stack(query_vectors)]).astype(np.float32)
    return figures, vectors


def run_worker(args: argparse.Namespace) -> int:
    turns, queries = texts_from(args.data, args.turns, args.queries)
    figures, vectors = measure(args.worker, turns, queries, args.threads, args.batch_size)
    np.save(args.vectors, vectors)
    sys.stdout.write(orjson.dumps(figures).decode() + "\n")
    return 0


def spawn(
    name: str, args: argparse.Namespace, threads: int | None, vectors: Path
) -> dict[str, Any]:
    """Measure one encoder in a fresh interpreter (its RSS is its own)."""
    command = [sys.executable, "-m", "bench.encoders", "--worker", name]
    command += ["--vectors", str(vectors), "--data", str(args.data)]
    command += ["--batch-size", str(args.batch_size)]
    options = (("--threads", threads), ("--turns", args.turns), ("--queries", args.queries))
    for flag, value in options:
        if value is not None:
            command += [flag, str(value)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"encoder {name}: measuring failed:\n{done.stderr[-2000:]}")
    figures: dict[str, Any] = orjson.loads(done.stdout.strip().splitlines()[-1])
    return figures


def cos_min(vectors: np.ndarray, reference: np.ndarray | None) -> float | None:
    if reference is None or vectors.shape != reference.shape:
        return None  # another model (or dimension): not comparable
    return round(float((vectors * reference).sum(axis=1).min()), 6)


def summarise(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Median over rounds for the timings, the maximum for RSS; every round kept."""

    def median(key: str) -> float:
        return round(statistics.median(r[key] for r in rounds), 3)

    return {
        "query_p50_ms": median("query_p50_ms"),
        "query_p99_ms": median("query_p99_ms"),
        "batch_turns_per_s": round(median("batch_turns_per_s"), 1),
        "rss_mb": max(r["rss_mb"] for r in rounds),
        "threads": rounds[0]["threads"],
        "load_s": median("load_s"),
        "torch_imported": any(r["torch_imported"] for r in rounds),
        "rounds": [
            {k: r[k] for k in ("query_p50_ms", "query_p99_ms", "batch_turns_per_s", "rss_mb")}
            for r in rounds
        ],
    }


def targets(report: dict[str, Any]) -> dict[str, Any]:
    encoders = report["encoders"]
    ref, default = encoders.get(report["reference"]), encoders.get(report["default"])
    if ref is None or default is None:
        return {}
    ratio = default["query_p99_ms"] / ref["query_p99_ms"]
    cos = default["cos_min_vs_reference"]
    return {
        "default_query_p99_over_reference": round(ratio, 3),
        "default_query_p99_within_0.35x": ratio <= TARGET_P99_RATIO,
        "default_batch_at_least_reference": default["batch_turns_per_s"]
        >= ref["batch_turns_per_s"],
        "default_cos_min_at_least_0.9999": cos is not None and cos >= TARGET_COS_MIN,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    from pipeline.models.encoders import DEFAULT_MINILM, EncoderUnavailable, load_encoder

    names = [n for n in args.encoders.split(",") if n]
    turns, queries = texts_from(args.data, args.turns, args.queries)
    sweep = [int(t) for t in args.threads_sweep.split(",") if t]
    jobs = [(name, args.threads) for name in names]
    jobs += [(name, t) for name in names if name.startswith("minilm") for t in sweep]
    load_start = os.getloadavg()
    results: dict[tuple[str, int | None], list[dict[str, Any]]] = {}
    vectors: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory(prefix="hindsight-bench-encoders-") as scratch:
        bar = tqdm(total=args.rounds * len(jobs), desc="encoders", file=sys.stderr)
        for number in range(args.rounds):
            shift = number % len(jobs)
            for name, threads in jobs[shift:] + jobs[:shift]:  # rotate: load noise spreads out
                bar.set_postfix_str(f"round {number + 1} {name} threads={threads}")
                path = Path(scratch) / f"{name}-{threads}-{number}.npy"
                figures = spawn(name, args, threads, path)
                results.setdefault((name, threads), []).append(figures)
                if threads == args.threads and name not in vectors:
                    vectors[name] = np.load(path)
                bar.update(1)
        bar.close()
    reference = vectors.get(REFERENCE)
    encoders: dict[str, Any] = {}
    for name in names:
        rounds = results[(name, args.threads)]
        encoders[rounds[0]["id"]] = {
            "name": name,
            **summarise(rounds),
            "cos_min_vs_reference": cos_min(vectors[name], reference),
        }
    thread_sweep: dict[str, Any] = {}
    for (name, threads), rounds in results.items():
        if threads is not None and threads in sweep:
            row = summarise(rounds)
            thread_sweep.setdefault(name, {})[str(threads)] = {
                k: row[k] for k in ("query_p50_ms", "query_p99_ms", "batch_turns_per_s", "rss_mb")
            }
    ids = {row["name"]: encoder_id for encoder_id, row in encoders.items()}
    reference_id = ids.get(REFERENCE)
    try:
        default_id = ids.get(DEFAULT_MINILM.name) or load_encoder("minilm").id
    except EncoderUnavailable:
        default_id = None
    report: dict[str, Any] = {
        "reference": reference_id,
        "default": default_id,
        "encoders": encoders,
        "threads_sweep": thread_sweep,
        "turns": len(turns),
        "questions": len(queries),
        "batch_size": args.batch_size,
        "rounds": args.rounds,
        "machine": {
            "cpus": os.cpu_count(),
            "load_avg_start": [round(x, 2) for x in load_start],
            "load_avg_end": [round(x, 2) for x in os.getloadavg()],
        },
    }
    report["targets"] = targets(report)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hindsight bench encoders", description=__doc__)
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA if DEFAULT_DATA.exists() else None
    )
    parser.add_argument("--encoders", default=",".join(DEFAULT_ENCODERS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="default: the encoder's own")
    parser.add_argument("--threads-sweep", default="", help="also measure these, e.g. 1,2,4")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--turns", type=int, default=None, help="use only the first N turns")
    parser.add_argument("--queries", type=int, default=None, help="use only the first N questions")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--vectors", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.data is None:
        parser.error("--data: no LoCoMo file given and the default does not exist")
    if args.rounds < 1:
        parser.error("--rounds: expected >= 1")
    if args.worker:
        return run_worker(args)
    report = run(args)
    if args.json:
        sys.stdout.write(orjson.dumps(report).decode() + "\n")
    else:
        for encoder_id, row in report["encoders"].items():
            brief = {k: v for k, v in row.items() if k != "rounds"}
            print(f"{encoder_id}: {orjson.dumps(brief).decode()}")
        print(f"targets: {orjson.dumps(report['targets']).decode()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
