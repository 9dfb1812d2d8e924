"""Large-namespace paths (HNSW dense search, decay-ordered activation) at a tiny threshold."""

import math
import random
from datetime import timedelta

import numpy as np
import pytest
from recall_support import AT, HashingEncoder, history, make_record

from pipeline.recall import HotIndex, RecallEngine
from pipeline.recall.ann import ActivationOrder, ann_available
from pipeline.recall.entities import EntityIndex
from pipeline.recall.hot_index import NamespaceSearch, NamespaceView, RowFilter
from pipeline.recall.scoring import RecallTuning
from pipeline.recall.temporal import TimeWindow
from schemas.memory import REGIONS, MemoryRecord, Region

pytestmark = pytest.mark.skipif(not ann_available(), reason="usearch not installed")

THRESHOLD = 64
EPISODIC: list[Region] = ["episodic"]
SEMANTIC: list[Region] = ["semantic"]
TUNING = RecallTuning(ann_min_rows=THRESHOLD)
WORDS = ("postgres", "redis", "kafka", "deploy", "budget", "invoice", "coffee", "berlin", "alice")


def unit(rng: np.random.Generator, dim: int = 64) -> list[float]:
    vector = rng.standard_normal(dim).astype(np.float32)
    return (vector / np.linalg.norm(vector)).tolist()


def corpus(count: int, seed: int = 1) -> list[MemoryRecord]:
    """Varied text, regions, ages, activations and a few superseded records."""
    pick = random.Random(seed)
    encoder = HashingEncoder()
    records = []
    for number in range(count):
        created = AT - timedelta(days=pick.uniform(0.5, 200))
        superseded = number % 17 == 0
        records.append(
            make_record(
                f"m{number:04d}",
                " ".join(pick.choices(WORDS, k=5)) + f" SF{100000 + number}",
                region=REGIONS[number % 3],
                created_at=created,
                encoder=encoder,
                activation=pick.uniform(0.05, 3.0),
                activation_at=created + timedelta(days=pick.uniform(0, 10)),
                importance=pick.choice((0.5, 0.9)),
                entities=[pick.choice(("Alice", "Bob", "Berlin")), f"SF{100000 + number}"],
                status="superseded" if superseded else "active",
                history=history((created + timedelta(hours=1), "superseded")) if superseded else [],
            )
        )
    return records


def build(count: int, tuning: RecallTuning = TUNING) -> HotIndex:
    index = HotIndex(tuning=tuning)
    for record in corpus(count):
        index.apply(record)
    return index


def view_of(index: HotIndex) -> NamespaceView:
    view = index.view("ns")
    assert view is not None
    return view


def self_match(view: NamespaceView) -> None:
    """Every live row is found by its own vector, at its current slot, and only live rows are."""
    assert view.ann is not None and sum(len(graph) for graph in view.ann) == view.size
    everything = RowFilter(at=math.inf, include_history=True)  # only the graphs decide
    for slot in range(view.size):
        search = NamespaceSearch(view, view.matrix[slot], AT, include_history=True)
        assert search.dense(1, everything)[0][0] == slot
        # ... and it sits in its own region's graph.
        own = RowFilter(math.inf, True, frozenset({int(view.region[slot])}))
        assert search.dense(1, own)[0][0] == slot


def test_graph_is_built_past_the_threshold_and_dropped_below_half() -> None:
    index = build(THRESHOLD - 1)
    view = view_of(index)
    assert view.ann is None and view.by_activation is None
    index.apply(corpus(THRESHOLD)[-1])
    assert view.ann is not None and sum(len(graph) for graph in view.ann) == THRESHOLD
    assert view.by_activation is not None and len(view.by_activation) == THRESHOLD
    for record in corpus(THRESHOLD)[: THRESHOLD // 2 + 1]:
        index.remove(record.id)
    assert view.ann is None and view.by_activation is None


def test_graph_follows_inserts_vector_changes_and_hard_erases() -> None:
    rng = np.random.default_rng(5)
    index = build(THRESHOLD + 20)
    view = view_of(index)
    records = {r.id: r for r in corpus(THRESHOLD + 20)}
    for _ in range(200):
        memory_id = f"m{int(rng.integers(THRESHOLD + 60)):04d}"
        if memory_id in records and rng.random() < 0.3:
            index.remove(memory_id)
            del records[memory_id]
        else:
            base = records.get(memory_id) or corpus(1)[0].model_copy(update={"id": memory_id})
            # New vectors and, now and then, a new region: the row moves between graphs.
            region = REGIONS[int(rng.integers(3))] if rng.random() < 0.3 else base.region
            changed = base.model_copy(update={"vector": unit(rng), "region": region})
            index.apply(changed)
            records[memory_id] = changed
    assert view.size == len(records) >= THRESHOLD // 2
    self_match(view)
    # An erased memory's vector finds nothing of it: it left the graph with the record.
    gone = next(iter(records))
    vector = np.asarray(records[gone].vector, dtype=np.float32)
    index.remove(gone)
    search = NamespaceSearch(view, vector, AT, include_history=True)
    found = {view.ids[slot] for slot, _ in search.dense(10, search.base)}
    assert gone not in found
    self_match(view)


def test_approximate_dense_matches_exact_on_a_small_namespace() -> None:
    index = build(400)
    view = view_of(index)
    encoder = HashingEncoder()
    agree = []
    for words in (["postgres", "deploy"], ["coffee"], ["kafka", "queue", "alice"], ["budget"]):
        query = encoder.encode([" ".join(words)])[0]
        for regions in (None, EPISODIC):
            approx = NamespaceSearch(view, query, AT, include_history=False, regions=regions)
            exact = NamespaceSearch(
                view, query, AT, include_history=False, regions=regions, exact=True
            )
            assert approx.approximate and not exact.approximate
            got = approx.dense(10, approx.filter(["semantic", "episodic"]))
            want = exact.dense(10, exact.filter(["semantic", "episodic"]))
            # Every answer passes the filters; scores are exact cosines.
            for slot, score in got:
                assert approx.filter(["semantic", "episodic"]).accepts(view, slot)
                assert score == pytest.approx(float(view.matrix[slot] @ query), abs=1e-5)
            # Hashed bags of words tie often: compare the cosines found, not which tied row.
            floor = want[-1][1] - 1e-5
            agree.append(sum(score >= floor for _, score in got) / max(1, len(want)))
    assert np.mean(agree) >= 0.95


def test_filters_hold_on_the_graph_path() -> None:
    index = build(300)
    view = view_of(index)
    query = np.asarray(unit(np.random.default_rng(0)), dtype=np.float32)
    early = AT - timedelta(days=100)
    search = NamespaceSearch(view, query, early, include_history=False, regions=["procedural"])
    for slot, _ in search.dense(30, search.base):
        record = view.records[view.ids[slot]]
        assert record.region == "procedural" and record.created_at <= early
        assert record.status != "superseded" or record.history[-1].at > early
    # A narrow window is scored exactly over its own rows.
    window = TimeWindow(AT - timedelta(days=20), AT - timedelta(days=10))
    inside = set(view.ids_in_window(window))
    search = NamespaceSearch(view, query, AT, include_history=False)
    exact = NamespaceSearch(view, query, AT, include_history=False, exact=True)
    got = search.dense(5, search.filter(window=window))
    want = exact.dense(5, exact.filter(window=window))
    assert got and {view.ids[s] for s, _ in got} <= inside
    assert [s for s, _ in got] == [s for s, _ in want]
    assert [v for _, v in got] == pytest.approx([v for _, v in want], abs=1e-5)


def test_activation_order_matches_an_exact_scan() -> None:
    index = build(300)
    view = view_of(index)
    for at in (AT, AT - timedelta(days=60), AT + timedelta(days=400)):
        for regions in (None, SEMANTIC):
            for history_too in (False, True):
                fast = NamespaceSearch(
                    view, view.matrix[0], at, include_history=history_too, regions=regions
                )
                slow = NamespaceSearch(
                    view, view.matrix[0], at, include_history=history_too, regions=regions,
                    exact=True,
                )  # fmt: skip
                got = fast.active(30, fast.base)
                want = slow.active(30, slow.base)
                assert [round(v, 9) for _, v in got] == [round(v, 9) for _, v in want]
                assert {s for s, _ in got} == {s for s, _ in want}


def test_activation_walk_gives_up_on_a_selective_filter() -> None:
    order = ActivationOrder()
    for number in range(100):
        order.set(f"m{number}", 0.01 if number % 2 else 0.05, float(number))
    assert order.top(0.0, 3, lambda memory_id: None, max_steps=10) is None
    top = order.top(0.0, 3, lambda memory_id: 1.0 if memory_id == "m7" else None, 1000)
    assert top == [("m7", 1.0)]
    order.discard("m99")
    best = order.top(0.0, 2, lambda memory_id: float(memory_id[1:]), 1000)
    assert best == [("m98", 98.0), ("m97", 97.0)]


def test_engine_with_graph_agrees_with_exact_engine() -> None:
    index = build(400)
    encoder = HashingEncoder()
    fast = RecallEngine(index, encoder, tuning=TUNING)
    slow = RecallEngine(index, encoder, tuning=TUNING, exact=True)
    queries = ["order SF100042", "alice postgres deploy", "what about coffee in berlin last week"]
    for query in queries:
        got = [m.id for m in fast.recall("ns", query, at=AT, truncate=False, limit=5)]
        want = [m.id for m in slow.recall("ns", query, at=AT, truncate=False, limit=5)]
        assert got[0] == want[0] and len(set(got) & set(want)) >= 4
    assert fast.recall("ns", "order SF100042", at=AT)[0].id == "m0042"
    index.remove("m0042")
    assert "m0042" not in [m.id for m in fast.recall("ns", "order SF100042", at=AT)]


def test_entity_ties_go_to_the_smaller_id_past_the_head() -> None:
    index = EntityIndex()
    for number in range(200):
        index.add(f"m{number:03d}", ["Alice"] + (["Berlin"] if number % 50 == 0 else []))
    hits = index.search("Alice in Berlin", k=6)
    assert [h.memory_id for h in hits] == ["m000", "m050", "m100", "m150", "m001", "m002"]
    assert hits[0].score > hits[-1].score and set(hits[0].matched) == {"Alice", "Berlin"}
    # The filter rejects the whole sorted head: the search reads on past it.
    late = index.search("alice", k=2, accept=lambda memory_id: memory_id >= "m190")
    assert [h.memory_id for h in late] == ["m190", "m191"]
    index.remove("m190")
    assert [h.memory_id for h in index.search("alice", 1, lambda i: i >= "m190")] == ["m191"]


def test_close_rows_on_the_graphs_agree_with_the_exact_scan() -> None:
    """Links' near copies come from the graphs past the threshold, with exact cosines."""
    index = build(400)
    view = view_of(index)
    assert view.ann is not None
    graphs = view.ann
    agree = []
    slots = list(range(0, view.size, 23))
    view.ann = None
    together = view.close_rows(slots, 0.3, 8)  # one matrix product for every row
    for slot, rows in zip(slots, together, strict=True):
        [alone] = view.close_rows([slot], 0.3, 8)
        # Hashed bags of words tie often, and the product's rounding may order a tie either way.
        assert [c for _, c in rows] == pytest.approx([c for _, c in alone], abs=1e-5)
    view.ann = graphs
    for slot in slots:
        [got] = view.close_rows([slot], 0.3, 8)
        view.ann = None  # the same view, scanned exactly
        [want] = view.close_rows([slot], 0.3, 8)
        view.ann = graphs
        assert slot not in {other for other, _ in got}
        assert len(got) <= 8 and all(cosine >= 0.3 for _, cosine in got)
        for other, cosine in got:
            assert cosine == pytest.approx(float(view.matrix[other] @ view.matrix[slot]), abs=1e-5)
        assert [cosine for _, cosine in got] == sorted((c for _, c in got), reverse=True)
        if want:
            floor = want[-1][1] - 1e-5
            agree.append(sum(cosine >= floor for _, cosine in got) / len(want))
    assert agree and np.mean(agree) >= 0.95
