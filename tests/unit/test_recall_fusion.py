import pytest

from pipeline.recall.fusion import max_rrf, rrf_fuse


def test_rrf_sums_weighted_reciprocal_ranks_and_keeps_path_evidence() -> None:
    fused = rrf_fuse(
        {"dense": [("a", 0.9), ("b", 0.8)], "bm25": [("b", 7.0), ("c", 3.0)]},
        weights={"dense": 1.0, "bm25": 2.0},
        k=60,
    )
    by_id = {item.memory_id: item for item in fused}
    assert by_id["b"].rrf == pytest.approx(1 / 62 + 2 / 61)
    assert by_id["a"].rrf == pytest.approx(1 / 61)
    assert [item.memory_id for item in fused] == ["b", "c", "a"]
    assert by_id["b"].paths["dense"].rank == 2 and by_id["b"].paths["bm25"].score == 7.0


def test_zero_weight_path_is_ignored_and_ties_break_by_id() -> None:
    fused = rrf_fuse(
        {"dense": [("z", 1.0)], "bm25": [("y", 1.0)], "activation": [("x", 1.0)]},
        weights={"dense": 1.0, "bm25": 1.0, "activation": 0.0},
    )
    assert [item.memory_id for item in fused] == ["y", "z"]


def test_duplicate_in_one_path_counts_once() -> None:
    fused = rrf_fuse({"dense": [("a", 1.0), ("a", 0.5)]}, weights={"dense": 1.0}, k=60)
    assert fused[0].rrf == pytest.approx(1 / 61)


def test_max_rrf() -> None:
    assert max_rrf(["dense", "bm25"], {"dense": 1.0, "bm25": 0.5}, k=60) == pytest.approx(1.5 / 61)
