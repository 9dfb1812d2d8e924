"""The encoder benchmark's arithmetic and its JSON contract."""

from __future__ import annotations

import numpy as np
import pytest

from bench.cli import BENCHMARKS
from bench.encoders import cos_min, percentile, summarise, targets


def test_the_benchmarks_are_registered() -> None:
    assert BENCHMARKS["encoders"] == "bench.encoders"
    assert BENCHMARKS["crosslingual"] == "bench.crosslingual"


def test_percentile_is_nearest_rank() -> None:
    samples = [float(x) for x in range(1, 101)]
    assert percentile(samples, 50) == 50.0
    assert percentile(samples, 99) == 99.0
    assert percentile([3.0], 99) == 3.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_cos_min_compares_only_the_same_shape() -> None:
    reference = np.eye(3, dtype=np.float32)
    moved = reference.copy()
    moved[2] = [0.0, 0.6, 0.8]
    assert cos_min(moved, reference) == pytest.approx(0.8)
    assert cos_min(np.ones((3, 4), dtype=np.float32), reference) is None
    assert cos_min(moved, None) is None


def _round(p50: float, p99: float, rate: float, rss: float) -> dict[str, object]:
    return {
        "query_p50_ms": p50, "query_p99_ms": p99, "batch_turns_per_s": rate, "rss_mb": rss,
        "threads": 2, "load_s": 1.0, "torch_imported": False,
    }  # fmt: skip


def test_summary_takes_medians_and_the_worst_rss_and_keeps_rounds() -> None:
    row = summarise([_round(3, 5, 100, 200), _round(4, 9, 80, 250), _round(5, 6, 120, 210)])
    assert (row["query_p50_ms"], row["query_p99_ms"], row["batch_turns_per_s"]) == (4, 6, 100)
    assert row["rss_mb"] == 250
    assert len(row["rounds"]) == 3


def test_targets_compare_the_default_with_the_reference() -> None:
    report = {
        "reference": "torch",
        "default": "onnx",
        "encoders": {
            "torch": {"query_p99_ms": 20.0, "batch_turns_per_s": 100.0, "cos_min_vs_reference": 1},
            "onnx": {
                "query_p99_ms": 5.0,
                "batch_turns_per_s": 150.0,
                "cos_min_vs_reference": 0.99999,
            },
        },
    }
    assert targets(report) == {
        "default_query_p99_over_reference": 0.25,
        "default_query_p99_within_0.35x": True,
        "default_batch_at_least_reference": True,
        "default_cos_min_at_least_0.9999": True,
    }
    report["encoders"]["onnx"]["query_p99_ms"] = 8.0
    assert targets(report)["default_query_p99_within_0.35x"] is False
