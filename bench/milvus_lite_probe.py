"""Microbenchmark of the Milvus view: upsert, flush and namespace-filtered top-k, printed as JSON.

    python bench/milvus_lite_probe.py --rows 10000 --dim 384 --index FLAT

Random unit vectors spread over ``--namespaces`` namespaces; recall@k is measured against numpy
brute force over the same namespace and status filter. Pass ``--uri http://host:19530`` to probe
Milvus standalone instead of a throwaway Lite file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.views.milvus import MilvusView
from schemas.memory import MemoryRecord

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _record(index: int, namespace: str, vector: list[float], active: bool) -> MemoryRecord:
    return MemoryRecord(
        id=f"m-{index:07d}",
        namespace=namespace,
        region="semantic",
        kind="fact",
        content=f"synthetic memory {index}",
        search_text=f"synthetic memory {index}",
        base_importance=0.7,
        importance=0.7,
        created_at=T0,
        valid_from=T0,
        updated_at=T0,
        status="active" if active else "cold",
        segment_id="bench",
        activation=0.5,
        activation_at=T0,
        vector=vector,
    )


def _search_round(
    view: MilvusView,
    vectors: np.ndarray,
    namespace_of: np.ndarray,
    active: np.ndarray,
    queries: np.ndarray,
    namespaces: int,
    k: int,
) -> dict[str, float]:
    latencies: list[float] = []
    recalls: list[float] = []
    for number, query in enumerate(queries):
        ns = number % namespaces
        started = time.perf_counter()
        hits = view.dense_search(f"ns-{ns}", query.tolist(), k)
        latencies.append(time.perf_counter() - started)
        mask = (namespace_of == ns) & active
        rows = np.flatnonzero(mask)
        best = rows[np.argsort(-(vectors[rows] @ query))[:k]]
        expected = {f"m-{i:07d}" for i in best}
        recalls.append(len(expected & {memory_id for memory_id, _ in hits}) / max(1, len(expected)))
    ordered = sorted(latencies)
    return {
        "p50_ms": round(statistics.median(latencies) * 1000, 2),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 2),
        f"recall_at_{k}": round(float(np.mean(recalls)), 4),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(args.seed)
    vectors = rng.standard_normal((args.rows, args.dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = rng.standard_normal((args.queries, args.dim)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    namespace_of = np.arange(args.rows) % args.namespaces
    active = rng.random(args.rows) < 0.8
    records = [
        _record(i, f"ns-{namespace_of[i]}", vectors[i].tolist(), bool(active[i]))
        for i in range(args.rows)
    ]

    with tempfile.TemporaryDirectory() as scratch:
        uri = args.uri or str(Path(scratch) / "probe.db")
        view = MilvusView(
            uri, args.dim, collection=f"probe_{args.index.lower()}", index_type=args.index
        )
        try:
            view.drop()
            view.ensure()
            started = time.perf_counter()
            for start in range(0, args.rows, args.batch):
                view.upsert(records[start : start + args.batch])
            upsert_s = time.perf_counter() - started
            unflushed = _search_round(
                view, vectors, namespace_of, active, queries[:5], args.namespaces, args.k
            )
            started = time.perf_counter()
            view.flush()
            flush_s = time.perf_counter() - started
            flushed = _search_round(
                view, vectors, namespace_of, active, queries, args.namespaces, args.k
            )
            # The worker's steady state: one small batch, then flush.
            small = [r.model_copy(update={"activation": 0.4}) for r in records[: args.small_batch]]
            started = time.perf_counter()
            view.upsert(small)
            view.flush()
            small_batch_ms = (time.perf_counter() - started) * 1000
            after_small = _search_round(
                view, vectors, namespace_of, active, queries, args.namespaces, args.k
            )
            started = time.perf_counter()
            loaded = len(view.load_namespace("ns-0"))
            load_ms = (time.perf_counter() - started) * 1000
        finally:
            if args.uri:
                view.drop()
            view.close()

    return {
        "engine": "standalone" if args.uri else "milvus-lite",
        "index": args.index,
        "rows": args.rows,
        "dim": args.dim,
        "namespaces": args.namespaces,
        "upsert_rows_per_s": round(args.rows / upsert_s),
        "flush_s": round(flush_s, 3),
        "search_before_flush": unflushed,
        "search_after_flush": flushed,
        f"upsert_flush_{args.small_batch}_rows_ms": round(small_batch_ms, 1),
        "search_after_small_batch": after_small,
        "load_namespace_rows": loaded,
        "load_namespace_ms": round(load_ms, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--namespaces", type=int, default=10)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--small-batch", type=int, default=64)
    parser.add_argument("--index", choices=["FLAT", "HNSW"], default="FLAT")
    parser.add_argument("--uri", default="", help="Milvus standalone URI; default a Lite file")
    parser.add_argument("--seed", type=int, default=0)
    print(json.dumps(run(parser.parse_args()), indent=2))


if __name__ == "__main__":
    main()
