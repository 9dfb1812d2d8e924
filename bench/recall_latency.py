"""Recall latency next to the classic-RAG baseline and the brute-force limit, in one run.

    hindsight bench recall-latency --sizes 1000,10000,100000 --json

For every size n and two layouts (all n memories in one namespace; n spread over ten namespaces,
the query namespace holding n/10) it builds a ``HotIndex`` and a Milvus Lite collection holding
the same records, then times, per query and interleaved in a rotating order:

- ``recall``: ``RecallEngine.recall`` (routing, every path, fusion, scoring, as-of filter) over
  the hot index, including the query embedding;
- ``dense_baseline``: query embedding + ``MilvusView.dense_search`` top-k in that namespace (a
  flushed FLAT collection, what a plain RAG stack does);
- ``bruteforce``: query embedding + exact numpy top-k over the namespace's vectors (the physical
  limit for an exact answer);
- ``recall_exact`` (namespaces that have an HNSW graph only): ``recall`` forced to exact scans.

Every method pays for its own embedding with the real encoder; ``*_search_*`` keys give the time
without it. Memories are realistic MemoryRecords: English and Chinese sentences from templates
(names, tools, projects, cities, order and ticket ids), regions and kinds that match them, a year
of creation times, some superseded and cold records, varied activation. Vectors: a pool of main
sentences and of detail clauses is embedded once with the real encoder; a memory's vector is
``normalise(main + 0.5·detail + noise)``, the text being the main sentence, the detail clause and
a per-memory id where the template has one (embedding 100k texts would take about half an hour on
one core; the pool keeps the neighbourhood structure of real MiniLM vectors).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import psutil

from pipeline.models.encoders import Encoder, Vectors, load_encoder
from pipeline.recall import HotIndex, RecallEngine
from pipeline.recall.hot_index import NamespaceSearch
from pipeline.recall.scoring import DEFAULT_TUNING, RecallTuning
from pipeline.runtime.settings import RecallPolicy
from schemas.memory import HistoryEntry, Kind, MemoryRecord, Region, SourceTurn, Status

AT = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
SPREAD_NAMESPACES = 10
NOISE_NORM = 0.3  # length of the per-memory perturbation added to main + 0.5·detail
FloatArray = npt.NDArray[np.float32]

# ---------- vocabulary ----------

NAMES = (
    "Alice", "Bob", "Chen Wei", "Priya", "Marco", "Yuki", "Fatima", "Lars", "Sofia", "Omar",
    "Li Na", "Diego", "Hana", "Ivan", "Grace", "Zhang Min", "Tom", "Aisha", "Pedro", "Mei",
)  # fmt: skip
TOOLS = (
    "Postgres", "Redis", "Kafka", "Milvus", "Docker", "Kubernetes", "Terraform", "React",
    "Rust", "Go", "Python", "Grafana", "Airflow", "Spark", "Nginx", "GitHub Actions",
    "ClickHouse", "Elasticsearch", "FastAPI", "Celery",
)  # fmt: skip
PROJECTS = (
    "billing service", "search revamp", "mobile app", "data warehouse", "onboarding flow",
    "recommendation model", "payment gateway", "analytics dashboard", "auth migration",
    "notification service", "pricing page", "fraud detector",
)  # fmt: skip
CITIES = ("Hangzhou", "Berlin", "Tokyo", "Lisbon", "Shanghai", "Austin", "Nairobi", "Toronto")
TASKS = (
    "background jobs", "caching", "metrics", "local development", "schema migrations",
    "feature flags", "log search", "batch exports",
)  # fmt: skip
FOODS = ("oat milk latte", "green tea", "spicy noodles", "sushi", "black coffee", "dumplings")
ALLERGENS = ("peanuts", "shellfish", "gluten", "penicillin")
WHEN = (
    "on Monday", "last Tuesday", "after the sprint review", "before the launch",
    "during the offsite", "at the weekly sync",
)  # fmt: skip
Z_NAMES = ("张伟", "李娜", "王芳", "刘洋", "陈静", "赵磊", "孙悦", "周杰")
Z_CITIES = ("杭州", "北京", "上海", "深圳", "成都", "西安", "南京", "苏州")
Z_PROJECTS = ("支付网关", "推荐系统", "数据仓库", "会员系统", "搜索改版", "风控模型")
Z_TASKS = ("缓存", "日志检索", "数据迁移", "定时任务", "监控告警")
Z_STATES = ("已发货", "运输中", "已签收", "退款中")

# (region, kind, base importance, template); {order}/{ticket} are filled per memory.
TEMPLATES: tuple[tuple[Region, Kind, float, str], ...] = (
    ("semantic", "preference", 0.7, "{name} prefers {tool} over {tool2} for {task}."),
    ("semantic", "preference", 0.6, "{name} likes a {food} before the standup."),
    ("semantic", "fact", 0.9, "{name} is allergic to {allergen}, never order food with it."),
    ("semantic", "fact", 0.6, "{name} works on the {project} team in {city}."),
    ("semantic", "fact", 0.6, "The {project} runs on {tool} version {major}.{minor}."),
    ("semantic", "fact", 0.7, "Our {project} budget is {amount} thousand dollars this quarter."),
    ("procedural", "procedure", 0.7, "To deploy the {project}, run the {tool} pipeline first."),
    ("procedural", "procedure", 0.7, "When {tool} times out, restart the worker and clear {task}."),
    ("procedural", "procedure", 0.6, "For {task} in the {project}, always use {tool}."),
    ("episodic", "decision", 0.8, "We decided to move the {project} from {tool} to {tool2}."),
    ("episodic", "task_state", 0.5, "{name} said the {project} demo went well {when}."),
    ("episodic", "task_state", 0.6, "Order {order} for {name} was delayed {when}."),
    ("episodic", "task_state", 0.6, "Ticket {ticket} about {tool} was closed by {name} {when}."),
    ("episodic", "emotion", 0.4, "{name} was frustrated with {tool} {when}."),
    ("semantic", "preference", 0.7, "{zname}更喜欢用{tool}做{ztask}。"),
    ("episodic", "decision", 0.8, "我们决定把{zproject}迁移到{tool}。"),
    ("episodic", "task_state", 0.6, "{zname}下周要去{zcity}出差，住在公司附近。"),
    ("semantic", "fact", 0.7, "{zproject}的预算是{amount}万元。"),
    ("procedural", "procedure", 0.7, "部署{zproject}之前要先跑{tool}的测试。"),
    ("episodic", "task_state", 0.6, "订单{order}的物流状态是{zstate}。"),
)
DETAILS_EN = (
    "because the old setup kept timing out", "as agreed with {name}",
    "according to the notes from the retro", "which saves about {amount} minutes a day",
    "and {name} will double-check it", "so the on-call load goes down",
    "after the incident in {city}", "pending approval from {name}",
)  # fmt: skip
DETAILS_ZH = (
    "因为旧的方案太慢了", "这是上次复盘时定下的", "{zname}会再确认一下", "这样值班压力会小很多",
)  # fmt: skip
QUERIES_EN = (
    "what does {name} prefer for {task}",
    "which {tool} version does the {project} run on",
    "what did we decide about the {project} last week",
    "order {order} status",
    "how do I deploy the {project}",
    "ticket {ticket}",
    "is {name} allergic to anything",
    "what happened with {tool} in March",
    "who works on the {project} in {city}",
    "{name} {tool}",
)
QUERIES_ZH = (
    "{zname}下周去哪里出差",
    "上个月{zproject}的预算是多少",
    "订单{order}到哪了",
    "{zname}做{ztask}喜欢用什么",
)


def _fill(template: str, pick: random.Random, **fixed: str) -> str:
    slots = {
        "name": pick.choice(NAMES),
        "tool": pick.choice(TOOLS),
        "tool2": pick.choice(TOOLS),
        "project": pick.choice(PROJECTS),
        "city": pick.choice(CITIES),
        "task": pick.choice(TASKS),
        "food": pick.choice(FOODS),
        "allergen": pick.choice(ALLERGENS),
        "when": pick.choice(WHEN),
        "major": str(pick.randrange(1, 17)),
        "minor": str(pick.randrange(0, 10)),
        "amount": str(pick.randrange(5, 500)),
        "zname": pick.choice(Z_NAMES),
        "zcity": pick.choice(Z_CITIES),
        "zproject": pick.choice(Z_PROJECTS),
        "ztask": pick.choice(Z_TASKS),
        "zstate": pick.choice(Z_STATES),
        "order": "{order}",
        "ticket": "{ticket}",
    }
    slots.update(fixed)
    return template.format(**slots)


_IDS = re.compile(r"SF\d+|INC-\d+")


def _entities(text: str) -> list[str]:
    """What the rule-based extractor would keep: known names, tools, projects, cities, ids."""
    found = [word for word in (*NAMES, *TOOLS, *CITIES, *Z_NAMES, *Z_CITIES) if word in text]
    found += [project for project in (*PROJECTS, *Z_PROJECTS) if project in text]
    found += _IDS.findall(text)
    return found


@dataclass
class Pool:
    """Main sentences and detail clauses, embedded once; memories combine and perturb them."""

    mains: list[tuple[Region, Kind, float, str]]
    details_en: list[str]
    details_zh: list[str]
    main_vectors: FloatArray
    detail_en_vectors: FloatArray
    detail_zh_vectors: FloatArray


def build_pool(encoder: Encoder, mains: int, details: int, seed: int, cache: Path | None) -> Pool:
    pick = random.Random(seed)
    seen: dict[str, tuple[Region, Kind, float, str]] = {}
    while len(seen) < mains:
        region, kind, importance, template = pick.choice(TEMPLATES)
        # The pooled text keeps a fixed id; each memory gets its own (ids barely move MiniLM).
        text = _fill(template, pick).replace("{order}", "SF100000").replace("{ticket}", "INC-1000")
        seen.setdefault(text, (region, kind, importance, text))
    details_en = sorted({_fill(pick.choice(DETAILS_EN), pick) for _ in range(details * 4)})
    details_zh = sorted({_fill(pick.choice(DETAILS_ZH), pick) for _ in range(details)})
    details_en = details_en[:details]
    main_list = list(seen.values())
    texts = [text for *_, text in main_list] + details_en + details_zh
    key = hashlib.sha256(("\n".join(texts) + encoder.id).encode()).hexdigest()[:16]
    path = cache / f"recall-latency-pool-{key}.npy" if cache else None
    if path is not None and path.exists():
        vectors = np.load(path)
    else:
        vectors = encoder.encode(texts)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, vectors)
    m, d = len(main_list), len(details_en)
    return Pool(
        main_list, details_en, details_zh, vectors[:m], vectors[m : m + d], vectors[m + d :]
    )


def _unit(vector: FloatArray) -> FloatArray:
    result: FloatArray = (vector / max(float(np.linalg.norm(vector)), 1e-12)).astype(np.float32)
    return result


def generate(pool: Pool, n: int, namespaces: list[str], seed: int) -> Iterator[MemoryRecord]:
    """``n`` memories, round-robin over ``namespaces``, deterministic for a seed."""
    pick = random.Random(seed)
    rng = np.random.default_rng(seed)
    dim = pool.main_vectors.shape[1]
    sigma = NOISE_NORM / np.sqrt(dim)
    for number in range(n):
        main_at = pick.randrange(len(pool.mains))
        region, kind, base, text = pool.mains[main_at]
        chinese = any("\u4e00" <= char <= "\u9fff" for char in text)
        if chinese:
            detail_at = pick.randrange(len(pool.details_zh))
            detail, detail_vector = pool.details_zh[detail_at], pool.detail_zh_vectors[detail_at]
            content = f"{text.rstrip('。')}，{detail}。"
        else:
            detail_at = pick.randrange(len(pool.details_en))
            detail, detail_vector = pool.details_en[detail_at], pool.detail_en_vectors[detail_at]
            content = f"{text.rstrip('.')}, {detail}."
        content = content.replace("SF100000", f"SF{100000 + number}").replace(
            "INC-1000", f"INC-{1000 + number}"
        )
        noise = (rng.standard_normal(dim) * sigma).astype(np.float32)
        vector = _unit(pool.main_vectors[main_at] + 0.5 * detail_vector + noise)
        created = AT - timedelta(seconds=pick.uniform(60, 365 * 86400))
        status: Status = "active"
        history = [HistoryEntry(at=created, change="created", cause_event_id=f"t{number}")]
        roll = pick.random()
        if roll < 0.04:
            # Superseded some time after creation, before the query time.
            status = "superseded"
            when = created + (AT - created) * pick.random()
            history.append(HistoryEntry(at=when, change="superseded", cause_event_id=f"c{number}"))
        elif roll < 0.08:
            status = "cold"
            when = created + (AT - created) * pick.random()
            history.append(HistoryEntry(at=when, change="cooled", cause_event_id=f"c{number}"))
        touched = created + (AT - created) * pick.random()
        namespace = namespaces[number % len(namespaces)]
        yield MemoryRecord(
            id=f"m{number:07d}-{namespace}",
            namespace=namespace,
            region=region,
            kind=kind,
            content=content,
            search_text=content,
            entities=_entities(content),
            base_importance=base,
            importance=min(1.0, base + 0.05 * pick.randrange(3)),
            created_at=created,
            valid_from=created,
            updated_at=history[-1].at,
            status=status,
            segment_id=f"seg-{number // 8}",
            access_count=pick.randrange(5),
            activation=pick.lognormvariate(0.0, 0.7),
            activation_at=touched,
            history=history,
            vector=vector.tolist(),
            provenance=[
                SourceTurn(
                    event_id=f"t{number}",
                    session_id=f"s{number // 40}",
                    speaker="user",
                    event_time=created,
                )
            ],
        )


def make_queries(count: int, orders: list[str], tickets: list[str], seed: int) -> list[str]:
    pick = random.Random(seed)
    out = []
    for number in range(count):
        chinese = number % 5 == 4  # one query in five in Chinese
        template = pick.choice(QUERIES_ZH if chinese else QUERIES_EN)
        out.append(_fill(template, pick, order=pick.choice(orders), ticket=pick.choice(tickets)))
    return out


# ---------- measuring ----------


class TimedEncoder:
    """The real encoder, remembering how long its last call took (to split model from index)."""

    def __init__(self, inner: Encoder) -> None:
        self.inner = inner
        self.name = inner.name
        self.id = inner.id
        self.dimension = inner.dimension
        self.last_s = 0.0

    def encode(self, texts: list[str]) -> Vectors:
        started = time.perf_counter()
        vectors = self.inner.encode(texts)
        self.last_s = time.perf_counter() - started
        return vectors


@dataclass
class Samples:
    total: list[float] = field(default_factory=list)
    search: list[float] = field(default_factory=list)  # without the query embedding
    rounds: list[list[float]] = field(default_factory=list)


def _ms(samples: list[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(samples), q)) * 1000.0, 3)


def _brute_top(matrix: FloatArray, query: FloatArray, k: int) -> list[int]:
    sims = matrix @ query
    top = np.argpartition(-sims, k - 1)[:k] if sims.shape[0] > k else np.arange(sims.shape[0])
    return top[np.argsort(-sims[top])].tolist()  # type: ignore[no-any-return]


@dataclass
class Layout:
    name: str  # "one_namespace" or "namespaces_10"
    namespaces: list[str]


def measure_layout(
    args: argparse.Namespace,
    n: int,
    layout: Layout,
    pool: Pool,
    encoder: TimedEncoder,
    milvus_dir: Path,
    tuning: RecallTuning,
) -> dict[str, Any]:
    from pipeline.views.milvus import MilvusView

    load_before = os.getloadavg()
    target = layout.namespaces[0]
    index = HotIndex(tuning=tuning)
    milvus: MilvusView | None = None
    if not args.no_milvus:
        milvus = MilvusView(
            str(milvus_dir / "bench.db"),
            encoder.dimension,
            collection=f"rl_{layout.name}_{n}",
        )
        milvus.drop()
        milvus.ensure()
    rss_before = psutil.Process().memory_info().rss
    hot_s = milvus_s = 0.0
    batch: list[MemoryRecord] = []
    orders: list[str] = []
    tickets: list[str] = []
    for record in generate(pool, n, layout.namespaces, args.seed):
        started = time.perf_counter()
        index.apply(record)
        hot_s += time.perf_counter() - started
        if record.namespace == target:
            for entity in record.entities:
                if entity.startswith("SF"):
                    orders.append(entity)
                elif entity.startswith("INC-"):
                    tickets.append(entity)
        if milvus is not None:
            batch.append(record)
            if len(batch) >= 2000:
                started = time.perf_counter()
                milvus.upsert(batch)
                milvus_s += time.perf_counter() - started
                batch.clear()
    if milvus is not None:
        started = time.perf_counter()
        if batch:
            milvus.upsert(batch)
        milvus.flush()
        milvus_s += time.perf_counter() - started
        batch.clear()
    # Let Milvus Lite's background sealing and compaction finish before anything is timed.
    settle_s = settle() if milvus is not None else 0.0
    hot_rss_mb = (psutil.Process().memory_info().rss - rss_before) / 2**20
    view = index.view(target)
    assert view is not None
    matrix = np.ascontiguousarray(view.matrix[: view.size])  # brute force gets its own copy
    policy = RecallPolicy()
    engine = RecallEngine(index, encoder, policy, tuning)
    exact_engine = RecallEngine(index, encoder, policy, tuning, exact=True)
    has_graph = view.ann is not None
    queries = make_queries(args.queries, orders or ["SF100000"], tickets or ["INC-1000"], args.seed)
    k = args.k

    def run_recall() -> Callable[[str], float]:
        def one(text: str) -> float:
            engine.recall(target, text, at=AT)
            return encoder.last_s

        return one

    def run_exact(text: str) -> float:
        exact_engine.recall(target, text, at=AT)
        return encoder.last_s

    def run_milvus(text: str) -> float:
        assert milvus is not None
        started = time.perf_counter()
        vector = encoder.inner.encode([text])[0]
        spent = time.perf_counter() - started
        milvus.dense_search(target, vector.tolist(), k)
        return spent

    def run_brute(text: str) -> float:
        started = time.perf_counter()
        vector = encoder.inner.encode([text])[0]
        spent = time.perf_counter() - started
        _brute_top(matrix, vector, k)
        return spent

    methods: dict[str, Callable[[str], float]] = {"recall": run_recall(), "bruteforce": run_brute}
    if milvus is not None:
        methods["dense_baseline"] = run_milvus
    if has_graph:
        methods["recall_exact"] = run_exact
    samples = {name: Samples() for name in methods}
    names = list(methods)
    # Long-lived records would make every gen-2 collection walk ~n objects mid-query; production
    # processes do the same freeze after loading a view.
    gc.collect()
    gc.freeze()
    for round_number in range(args.rounds + 1):  # round 0 warms caches and is dropped
        per_round: dict[str, list[float]] = {name: [] for name in names}
        for position, text in enumerate(queries):
            # Rotate the order so no method always runs first (cache, scheduler quanta).
            shift = position % len(names)
            for name in names[shift:] + names[:shift]:
                started = time.perf_counter()
                encode_s = methods[name](text)
                spent = time.perf_counter() - started
                if round_number:
                    samples[name].total.append(spent)
                    samples[name].search.append(spent - encode_s)
                    per_round[name].append(spent)
        if round_number:
            for name in names:
                samples[name].rounds.append(per_round[name])
    gc.unfreeze()

    result: dict[str, Any] = {
        "namespace_rows": view.size,
        "total_rows": len(index),
        "graph": has_graph,
        "build_hot_s": round(hot_s, 1),
        "build_milvus_s": round(milvus_s, 1),
        "milvus_settle_s": round(settle_s, 1),
        "hot_rss_mb": round(hot_rss_mb),
    }
    for name, got in samples.items():
        result[f"{name}_p50_ms"] = _ms(got.total, 50)
        result[f"{name}_p99_ms"] = _ms(got.total, 99)
        result[f"{name}_search_p50_ms"] = _ms(got.search, 50)
        result[f"{name}_search_p99_ms"] = _ms(got.search, 99)
        result[f"{name}_p99_ms_per_round"] = [_ms(r, 99) for r in got.rounds]
    brute = samples["bruteforce"]
    encode = [t - s for t, s in zip(brute.total, brute.search, strict=True)]
    result["encode_p50_ms"] = _ms(encode, 50)
    result["encode_p99_ms"] = _ms(encode, 99)
    if has_graph:
        result.update(ann_quality(index, engine, exact_engine, encoder, target, queries))
    load_after = os.getloadavg()
    result["loadavg_1m_before_after"] = [round(load_before[0], 2), round(load_after[0], 2)]
    if milvus is not None:
        milvus.drop()
        milvus.close()
    return result


def settle(idle_percent: float = 10.0, quiet_s: int = 3, limit_s: float = 300.0) -> float:
    """Wait until this process is idle (< ``idle_percent`` CPU for ``quiet_s`` consecutive
    seconds, at most ``limit_s``) and return the seconds waited.

    Milvus Lite runs inside this process: after a flush its threads seal and compact segments,
    and on a pinned core that work would be charged to whichever method runs next.
    """
    started = time.perf_counter()
    me = psutil.Process()
    me.cpu_percent(None)  # primes the counter
    quiet = 0
    while quiet < quiet_s and time.perf_counter() - started < limit_s:
        time.sleep(1.0)
        quiet = quiet + 1 if me.cpu_percent(None) < idle_percent else 0
    return time.perf_counter() - started


def ann_quality(
    index: HotIndex,
    engine: RecallEngine,
    exact_engine: RecallEngine,
    encoder: TimedEncoder,
    namespace: str,
    queries: list[str],
) -> dict[str, float]:
    """recall@10 of the graph's dense top-10 vs exact, and top-10 overlap of whole recalls."""
    view = index.view(namespace)
    assert view is not None
    vectors = encoder.inner.encode(queries)
    dense_hits: list[float] = []
    overlap: list[float] = []
    for text, vector in zip(queries, vectors, strict=True):
        with index.lock:
            approximate = NamespaceSearch(view, vector, AT, include_history=False)
            exact = NamespaceSearch(view, vector, AT, include_history=False, exact=True)
            got = {slot for slot, _ in approximate.dense(10, approximate.base)}
            want = {slot for slot, _ in exact.dense(10, exact.base)}
        dense_hits.append(len(got & want) / max(1, len(want)))
        fast = [m.id for m in engine.recall(namespace, text, at=AT, truncate=False, limit=10)]
        slow = [m.id for m in exact_engine.recall(namespace, text, at=AT, truncate=False, limit=10)]
        overlap.append(len(set(fast) & set(slow)) / max(1, len(slow)))
    return {
        "ann_dense_recall_at_10": round(statistics.fmean(dense_hits), 4),
        "recall_top10_overlap_vs_exact": round(statistics.fmean(overlap), 4),
    }


def pin(cpus: list[int] | None, threads: int) -> dict[str, Any]:
    """Same CPU set and thread count for every method (children such as Milvus Lite inherit)."""
    if cpus:
        os.sched_setaffinity(0, cpus)
    from threadpoolctl import threadpool_limits

    threadpool_limits(threads)
    import torch

    torch.set_num_threads(threads)
    return {"cpus": sorted(os.sched_getaffinity(0)), "threads": threads}


def _targets(sizes: dict[str, dict[str, Any]], smallest: str, largest: str) -> dict[str, Any]:
    ratios = {
        n: round(row["recall_p99_ms"] / row["bruteforce_p99_ms"], 2) for n, row in sizes.items()
    }
    growth = round(sizes[largest]["recall_p99_ms"] / sizes[smallest]["recall_p99_ms"], 2)
    return {
        "recall_p99_over_bruteforce_p99": ratios,
        "within_3x_of_bruteforce": all(ratio <= 3.0 for ratio in ratios.values()),
        f"recall_p99_growth_{smallest}_to_{largest}": growth,
        "growth_at_most_2x": growth <= 2.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hindsight bench recall-latency", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated")
    parser.add_argument("--layouts", default="one,spread", help="one (1 namespace), spread (10)")
    parser.add_argument("--queries", type=int, default=200, help="queries per round")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds after a warm-up")
    parser.add_argument("--k", type=int, default=10, help="top-k of the two baselines")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--encoder", default="minilm")
    parser.add_argument("--pool-mains", type=int, default=3000)
    parser.add_argument("--pool-details", type=int, default=200)
    parser.add_argument("--cpus", default="", help="CPU ids to pin to, e.g. 1 (default: no pin)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS/torch threads")
    parser.add_argument("--ann-min-rows", type=int, default=DEFAULT_TUNING.ann_min_rows or 0)
    parser.add_argument("--no-milvus", action="store_true", help="skip the Milvus baseline")
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "hindsight-bench"))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",") if size]
    cpus = [int(cpu) for cpu in args.cpus.split(",") if cpu]
    pinning = pin(cpus or None, args.threads)
    tuning = RecallTuning(ann_min_rows=args.ann_min_rows or None)
    encoder = TimedEncoder(load_encoder(args.encoder, args.threads))
    started = time.perf_counter()
    pool = build_pool(
        encoder.inner, args.pool_mains, args.pool_details, args.seed, Path(args.cache)
    )
    pool_s = time.perf_counter() - started
    layouts = []
    if "one" in args.layouts:
        layouts.append(Layout("one_namespace", ["bench-one"]))
    if "spread" in args.layouts:
        spread = [f"bench-{i}" for i in range(SPREAD_NAMESPACES)]
        layouts.append(Layout(f"namespaces_{SPREAD_NAMESPACES}", spread))
    report: dict[str, Any] = {"sizes": {}}
    with tempfile.TemporaryDirectory(prefix="recall-latency-") as tmp:
        for n in sizes:
            row: dict[str, Any] = {}
            for layout in layouts:
                got = measure_layout(args, n, layout, pool, encoder, Path(tmp), tuning)
                if layout.name == "one_namespace":
                    row.update(got)
                else:
                    row[layout.name] = got
                # Progress on stderr either way: stdout carries only the report.
                print(f"n={n} {layout.name}: {json.dumps(got)}", file=sys.stderr, flush=True)
                gc.collect()
            report["sizes"][str(n)] = row
    keys = [str(n) for n in sizes]
    if len(keys) >= 2 and "one" in args.layouts:
        report["targets"] = {"one_namespace": _targets(report["sizes"], keys[0], keys[-1])}
    if len(keys) >= 2 and "spread" in args.layouts:
        spread_rows = {n: report["sizes"][n][f"namespaces_{SPREAD_NAMESPACES}"] for n in keys}
        report.setdefault("targets", {})[f"namespaces_{SPREAD_NAMESPACES}"] = _targets(
            spread_rows, keys[0], keys[-1]
        )
    report["config"] = {
        "queries_per_round": args.queries,
        "rounds": args.rounds,
        "baseline_k": args.k,
        "recall_policy_candidates_per_path": RecallPolicy().candidates_per_path,
        "ann_min_rows": tuning.ann_min_rows,
        "ann": asdict(tuning.ann),
        "encoder": encoder.name,
        "pool": {"mains": len(pool.mains), "details": len(pool.details_en) + len(pool.details_zh)},
        "pool_embed_s": round(pool_s, 1),
        "noise_norm": NOISE_NORM,
    }
    report["machine"] = {
        **pinning,
        "cores": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "loadavg_end": [round(value, 2) for value in os.getloadavg()],
    }
    if args.json:
        print(json.dumps(report))
    else:
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
