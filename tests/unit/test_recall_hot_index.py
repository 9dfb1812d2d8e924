import random
from datetime import timedelta

import numpy as np
import pytest
from recall_support import AT, HashingEncoder, history, make_record

from pipeline.recall.hot_index import HotIndex, HotIndexError, top_k
from pipeline.recall.lexical import tokenize
from pipeline.recall.temporal import TimeWindow
from schemas.memory import Watermark


def unit(rng: random.Random, dim: int = 8) -> list[float]:
    v = np.array([rng.gauss(0, 1) for _ in range(dim)], dtype=np.float32)
    return (v / np.linalg.norm(v)).tolist()


def test_matrix_rows_follow_records_through_inserts_replaces_and_erases() -> None:
    rng = random.Random(3)
    index = HotIndex()
    live: dict[str, list[float]] = {}
    for step in range(600):
        memory_id = f"m{rng.randrange(150)}"
        if rng.random() < 0.3 and memory_id in live:
            assert index.remove(memory_id)
            del live[memory_id]
        else:
            vector = unit(rng)
            index.apply(make_record(memory_id, f"text {step}", vector=vector))
            live[memory_id] = vector
    view = index.view("ns")
    assert view is not None and view.size == len(live) == len(index)
    for memory_id, vector in live.items():
        slot = view.slot_of[memory_id]
        assert view.ids[slot] == memory_id
        np.testing.assert_allclose(view.matrix[slot], vector, atol=1e-6)
    # Erased rows leave nothing behind past the live region.
    assert not view.matrix[view.size :].any()
    assert len(view.bm25) == len(live)


def test_records_apply_in_the_order_read_without_staleness_checks() -> None:
    # The state topic has one transactional writer per partition: its order is the truth, so
    # the record read last is the current one, whatever it says.
    index = HotIndex()

    assert index.apply(make_record("m", "first words"))
    assert index.apply(make_record("m", "second words"))
    assert index.get("m").content == "second words"  # type: ignore[union-attr]
    assert index.apply(make_record("m", "first words"))

    assert index.get("m").content == "first words"  # type: ignore[union-attr]
    view = index.view("ns")
    assert view is not None and view.size == len(index) == 1
    assert view.bm25.search(tokenize("second"), 5) == []


def test_text_changes_reindex_and_status_changes_do_not_lose_terms() -> None:
    index = HotIndex()
    index.apply(make_record("m", "we use redis"))
    view = index.view("ns")
    assert view is not None
    redis = tokenize("redis")
    assert [h.memory_id for h in view.bm25.search(redis, 5)] == ["m"]
    index.apply(make_record("m", "we use redis", activation=3.0))
    assert [h.memory_id for h in view.bm25.search(redis, 5)] == ["m"]
    index.apply(make_record("m", "we use postgres"))
    assert view.bm25.search(redis, 5) == []
    assert [h.memory_id for h in view.bm25.search(tokenize("postgres"), 5)] == ["m"]


def test_namespaces_are_isolated() -> None:
    index = HotIndex()
    index.apply(make_record("a", "secret plan", namespace="alice"))
    index.apply(make_record("b", "other plan", namespace="bob"))
    assert [r.id for r in index.records("alice")] == ["a"]
    assert index.namespaces() == ["alice", "bob"]
    assert index.records("carol") == []


def test_dimension_mismatch_names_the_memory() -> None:
    index = HotIndex()
    index.apply(make_record("a", "x", vector=[1.0, 0.0]))
    with pytest.raises(HotIndexError, match="memory b"):
        index.apply(make_record("b", "y", vector=[1.0, 0.0, 0.0]))


def test_vectorised_columns() -> None:
    encoder = HashingEncoder()
    index = HotIndex()
    old = AT - timedelta(days=40)
    index.apply(make_record("a", "alpha", created_at=old, region="episodic", encoder=encoder))
    index.apply(make_record("b", "beta", created_at=AT + timedelta(days=1), encoder=encoder))
    index.apply(
        make_record(
            "c",
            "gamma",
            created_at=old,
            status="superseded",
            history=history((old + timedelta(days=1), "superseded")),
            encoder=encoder,
        )
    )
    view = index.view("ns")
    assert view is not None
    slots = {memory_id: view.slot_of[memory_id] for memory_id in "abc"}
    visible = view.visible_mask(AT, include_history=False)
    assert visible[slots["a"]] and not visible[slots["b"]] and not visible[slots["c"]]
    assert view.visible_mask(AT, include_history=True)[slots["c"]]
    # Before it was superseded, c is visible.
    assert view.visible_mask(old + timedelta(hours=1), include_history=False)[slots["c"]]
    assert view.region_mask(["episodic"]).tolist() == [s == slots["a"] for s in range(3)]
    window = TimeWindow(old - timedelta(days=1), old + timedelta(days=1))
    assert set(view.ids_in_window(window)) == {"a", "c"}
    assert view.window_mask(window).sum() == 2
    sims = view.similarities(encoder.encode(["alpha"])[0])
    assert int(np.argmax(sims)) == slots["a"]


def test_top_k_orders_and_masks() -> None:
    values = np.array([0.1, 0.9, 0.5, 0.9, 0.3])
    assert top_k(values, None, 3).tolist() == [1, 3, 2]
    mask = np.array([True, False, True, False, True])
    assert top_k(values, mask, 2).tolist() == [2, 4]
    assert top_k(values, np.zeros(5, dtype=bool), 2).tolist() == []


def test_watermarks_only_move_forward() -> None:
    index = HotIndex()
    index.apply_watermark(Watermark(topic="t", partition=0, offset=5))
    index.apply_watermark(Watermark(topic="t", partition=0, offset=3))
    assert index.watermark("t", 0) == 5 and index.watermark("t", 1) == -1
