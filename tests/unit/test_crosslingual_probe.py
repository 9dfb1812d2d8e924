"""The cross-lingual probe set and its hit@k arithmetic."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.crosslingual import PROBE, hits, load_probe


def test_the_bundled_probe_has_forty_distinct_bilingual_facts() -> None:
    items = load_probe(PROBE)
    assert len(items) == 40
    assert all(any("\u4e00" <= ch <= "\u9fff" for ch in i["memory_zh"]) for i in items)
    assert len({i["question_en"] for i in items}) == 40


def test_a_probe_line_missing_a_field_is_named(tmp_path: Path) -> None:
    path = tmp_path / "probe.jsonl"
    path.write_text('{"id": "a", "memory_en": "x", "memory_zh": "", "question_en": "q"}\n')
    with pytest.raises(ValueError, match=r"probe.jsonl:1: .*memory_zh, question_zh"):
        load_probe(path)


def test_hits_count_the_own_memory_rank() -> None:
    memories = np.eye(3, dtype=np.float32)
    questions = np.array([[1, 0, 0], [0.9, 0.1, 0], [0, 0.2, 0.8]], dtype=np.float32)
    # q0 ranks m0 first; q1 ranks m0 above its own m1 (rank 2nd); q2 ranks m2 first
    assert hits(memories, questions, ks=(1, 2)) == {
        "hit_at_1": pytest.approx(2 / 3, abs=1e-4),
        "hit_at_2": 1.0,
    }
