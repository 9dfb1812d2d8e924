"""Recall latency of the hot index vs plain numpy brute force, on a random-vector namespace.

    python -m bench.recall_latency_probe --sizes 1000 10000 100000 --queries 200

The encoder is replaced by precomputed random query vectors, so the numbers are the index and
engine cost alone (a MiniLM query embedding adds ~5–15 ms on CPU, the same for both). The
baseline is ``matrix @ q`` + argpartition top-k over the same contiguous float32 matrix.
"""

from __future__ import annotations

import argparse
import random
import time
from datetime import UTC, datetime, timedelta

import numpy as np
import psutil

from pipeline.models.encoders import Vectors
from pipeline.recall import HotIndex, RecallEngine
from pipeline.runtime.settings import RecallPolicy
from schemas.memory import REGIONS, MemoryRecord

AT = datetime(2024, 6, 1, tzinfo=UTC)
WORDS = [f"w{n}" for n in range(5000)]
ZH_WORDS = ["数据库", "部署", "会议", "咖啡", "出差", "杭州", "接口", "缓存", "预算", "客户"]
QUERY_SHAPES = (
    "what did I say about {a} {b} last week",
    "how did we fix {a} {b}",
    "what {a} do we use for {b}",
    "order SF{n} status",
    "上周关于{z}说了什么",
    "{a} {b} {c}",
)


class QueueEncoder:
    """Hands out precomputed query vectors: recall cost without model cost."""

    name = "probe"
    id = "probe/precomputed"

    def __init__(self, vectors: np.ndarray) -> None:
        self.dimension = int(vectors.shape[1])
        self._vectors = vectors
        self._next = 0

    def encode(self, texts: list[str]) -> Vectors:
        rows = self._vectors[self._next : self._next + len(texts)]
        self._next = (self._next + len(texts)) % len(self._vectors)
        return rows


def unit_rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    rows = rng.standard_normal((n, dim)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def build(n: int, dim: int, seed: int) -> tuple[HotIndex, np.ndarray, float, float]:
    """The index, its vectors, build seconds and resident-memory growth in MiB."""
    rng = np.random.default_rng(seed)
    pick = random.Random(seed)
    vectors = unit_rows(rng, n, dim)
    index = HotIndex()
    rss_before = psutil.Process().memory_info().rss
    started = time.perf_counter()
    for row in range(n):
        words = pick.choices(WORDS, k=12)
        if row % 10 == 0:
            words += pick.choices(ZH_WORDS, k=2)
        created = AT - timedelta(days=pick.uniform(0, 365))
        importance = pick.choice((0.2, 0.5, 0.65, 0.7, 0.85, 0.9))
        text = " ".join(words)
        index.apply(
            MemoryRecord(
                id=f"m{row:07d}",
                namespace="probe",
                region=REGIONS[row % 3],
                kind="fact",
                content=text,
                search_text=text,
                entities=[f"SF{row:06d}"],
                base_importance=importance,
                importance=importance,
                created_at=created,
                valid_from=created,
                updated_at=created,
                segment_id="s",
                activation=pick.random(),
                activation_at=created,
                vector=vectors[row].tolist(),
            )
        )
    build_s = time.perf_counter() - started
    return index, vectors, build_s, (psutil.Process().memory_info().rss - rss_before) / 2**20


def queries(count: int, seed: int) -> list[str]:
    pick = random.Random(seed)
    out = []
    for n in range(count):
        shape = QUERY_SHAPES[n % len(QUERY_SHAPES)]
        out.append(
            shape.format(
                a=pick.choice(WORDS),
                b=pick.choice(WORDS),
                c=pick.choice(WORDS),
                z=pick.choice(ZH_WORDS),
                n=f"{pick.randrange(100000):06d}",
            )
        )
    return out


def percentile(samples: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples), q)) * 1000.0


def probe(n: int, dim: int, count: int, seed: int) -> dict[str, float]:
    index, vectors, build_s, rss_mb = build(n, dim, seed)
    view = index.view("probe")
    assert view is not None
    query_vectors = unit_rows(np.random.default_rng(seed + 1), count, dim)
    texts = queries(count, seed)
    policy = RecallPolicy()
    engine = RecallEngine(index, QueueEncoder(query_vectors), policy)
    k = policy.candidates_per_path

    matrix = np.ascontiguousarray(vectors)  # the baseline gets its own exact copy
    brute: list[float] = []
    recall: list[float] = []
    for _ in range(2):  # warm-up round, then the measured round
        brute.clear()
        recall.clear()
        for q, text in zip(query_vectors, texts, strict=True):
            started = time.perf_counter()
            sims = matrix @ q
            top = np.argpartition(-sims, k)[:k]
            top[np.argsort(-sims[top])]
            brute.append(time.perf_counter() - started)
            started = time.perf_counter()
            engine.recall("probe", text, at=AT)
            recall.append(time.perf_counter() - started)
    return {
        "n": n,
        "build_s": build_s,
        "rss_mb": rss_mb,
        "brute_p50": percentile(brute, 50),
        "brute_p99": percentile(brute, 99),
        "recall_p50": percentile(recall, 50),
        "recall_p99": percentile(recall, 99),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(
        f"{'n':>8} {'build s':>8} {'+RSS MiB':>8} {'brute p50':>10} {'brute p99':>10} "
        f"{'recall p50':>11} {'recall p99':>11} {'p99 ratio':>9}   (ms)"
    )
    for n in args.sizes:
        row = probe(n, args.dim, args.queries, args.seed)
        print(
            f"{n:>8} {row['build_s']:>8.1f} {row['rss_mb']:>8.0f} "
            f"{row['brute_p50']:>10.3f} {row['brute_p99']:>10.3f} "
            f"{row['recall_p50']:>11.3f} {row['recall_p99']:>11.3f} "
            f"{row['recall_p99'] / row['brute_p99']:>9.1f}"
        )


if __name__ == "__main__":
    main()
