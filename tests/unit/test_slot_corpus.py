"""The update-pair corpus (``training/slots/corpus/``): it loads, it is what CORPUS.md says, and
its test quarter is pinned, so pairs added later can never move a pair across the split."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path

import orjson
import pytest

from training.slots.evaluate import CORPUS_DIR, corpus_half, load_corpus

_CJK = re.compile(r"[\u4e00-\u9fff]")
# sha256 of the sorted test-quarter ids, one per line (first 16 hex digits).
TEST_QUARTER_DIGEST = "26c78e1933211613"


def test_the_corpus_is_what_its_documentation_says() -> None:
    pairs = load_corpus()
    assert len(pairs) == 1280
    assert Counter(p.lang for p in pairs) == {"en": 640, "zh": 640}
    assert Counter((p.lang, p.supersedes) for p in pairs) == {
        ("en", True): 288,
        ("en", False): 352,
        ("zh", True): 288,
        ("zh", False): 352,
    }
    for pair in pairs:
        chinese = bool(_CJK.search(pair.older["text"] + pair.newer["text"]))
        assert chinese == (pair.lang == "zh"), pair.id


def test_the_test_quarter_is_pinned() -> None:
    test_ids = sorted(p.id for p in load_corpus() if p.half == "test")
    assert len(test_ids) == 314
    digest = hashlib.sha256("\n".join(test_ids).encode()).hexdigest()[:16]
    assert digest == TEST_QUARTER_DIGEST


def test_the_half_depends_on_the_id_alone() -> None:
    halves = Counter(corpus_half(f"pw9-{n:04d}") for n in range(4000))
    assert 0.2 < halves["test"] / 4000 < 0.3
    assert corpus_half("pw1-0001") == corpus_half("pw1-0001")


def test_a_malformed_pair_is_named(tmp_path: Path) -> None:
    row = orjson.loads((CORPUS_DIR / "pw1.jsonl").read_bytes().splitlines()[0])
    row["sub"] = "switch" if row["label"] == "keep" else "adds"
    (tmp_path / "bad.jsonl").write_bytes(orjson.dumps(row) + b"\n")
    with pytest.raises(ValueError, match=r"bad\.jsonl:1: sub"):
        load_corpus(tmp_path)
