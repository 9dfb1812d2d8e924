"""``hindsight bench crosslingual``: does a question in one language find a memory in the other?

    hindsight bench crosslingual --json [--encoders minilm,minilm-onnx-int8,use]

The probe set (``bench/crosslingual_probe.jsonl``, 40 everyday facts written for this probe) holds
each fact in English and Chinese and a paraphrased question in each language. Two directions:
``zh_memory_en_question`` ranks the 40 Chinese memories for each English question, and
``en_memory_zh_question`` the reverse; ``same_language_en`` and ``same_language_zh`` are the
controls. Ranking is plain cosine over the encoder's vectors, so this measures the encoder alone,
not the recall pipeline. ``hit_at_1`` / ``hit_at_5``: the share of questions whose own memory is
ranked first / in the first five.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

PROBE = Path(__file__).with_name("crosslingual_probe.jsonl")
DIRECTIONS = {
    "zh_memory_en_question": ("memory_zh", "question_en"),
    "en_memory_zh_question": ("memory_en", "question_zh"),
    "same_language_en": ("memory_en", "question_en"),
    "same_language_zh": ("memory_zh", "question_zh"),
}
FIELDS = ("id", "memory_en", "memory_zh", "question_en", "question_zh")


def load_probe(path: Path = PROBE) -> list[dict[str, str]]:
    items = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        item = orjson.loads(line)
        missing = [f for f in FIELDS if not isinstance(item.get(f), str) or not item[f].strip()]
        if missing:
            raise ValueError(f"{path}:{number}: missing or empty field(s) {', '.join(missing)}")
        items.append(item)
    if len({i["id"] for i in items}) != len(items):
        raise ValueError(f"{path}: ids are not unique")
    return items


def hits(
    memories: np.ndarray, questions: np.ndarray, ks: Sequence[int] = (1, 5)
) -> dict[str, float]:
    """Question i's own memory is row i; share of questions ranking it within the top k."""
    scores = questions @ memories.T
    own = scores[np.arange(len(scores)), np.arange(len(scores))]
    rank = (scores > own[:, None]).sum(axis=1)  # 0 = ranked first (ties count in its favour)
    return {f"hit_at_{k}": round(float((rank < k).mean()), 4) for k in ks}


def measure(name: str, items: list[dict[str, str]]) -> dict[str, Any]:
    from pipeline.models.encoders import load_encoder

    encoder = load_encoder(name)
    vectors = {f: encoder.encode([i[f] for i in items]) for f in FIELDS if f != "id"}
    return {
        "id": encoder.id,
        **{d: hits(vectors[m], vectors[q]) for d, (m, q) in DIRECTIONS.items()},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hindsight bench crosslingual", description=__doc__)
    parser.add_argument("--encoders", default="minilm,minilm-onnx-int8,use")
    parser.add_argument("--probe", type=Path, default=PROBE)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    items = load_probe(args.probe)
    encoders = {n: measure(n, items) for n in args.encoders.split(",") if n}
    report = {"pairs": len(items), "encoders": encoders}
    if args.json:
        sys.stdout.write(orjson.dumps(report).decode() + "\n")
    else:
        for name, row in encoders.items():
            print(name, row["id"])
            for direction in DIRECTIONS:
                print(f"  {direction:<24} {row[direction]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
