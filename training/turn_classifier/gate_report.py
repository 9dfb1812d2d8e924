"""What the default gate filters, and what it misses, without the held-back quarter.

    python -m training.turn_classifier.gate_report --cache DIR [--locomo PATH] [--json PATH]

Two measures that the gate's choices are made on (training/turn_classifier/RESULTS.md):

- **Folds.** The training three quarters' out-of-fold label probabilities (the shipped
  configuration refitted per fold, ``train.out_of_fold``), turned into verdicts by the shipped
  file's own threshold and judged by the runtime's ``prepare.gated_classification`` and
  ``prepare.learned_classification``: non-memory precision and recall of each, and why the gate
  keeps each non-memory turn it keeps (:func:`miss_reason`).
- **LoCoMo dev** (``--locomo``, read by path, CC BY-NC: nothing of its text is printed or
  written, only counts). Every turn as ``prepare`` presents it, judged by the shipped file: how
  many turns the gate and the model alone would filter, and how many of those hold a question's
  evidence (a gold turn of a non-adversarial question), by length (:data:`BANDS`).

The held-back quarter is never read here.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from pipeline.ingest.prepare import (
    GATE_LONG_WORDS,
    GATE_MAX_WORDS,
    gated_classification,
    learned_classification,
    turn_search_text,
)
from pipeline.memory.rules.classify import Classification, classify
from pipeline.memory.rules.text import word_count
from pipeline.models.classifier import TurnClassifier, TurnVerdict, load_turn_classifier
from pipeline.models.encoders import load_encoder
from training.turn_classifier.corpus_stats import LABELS, NON_MEMORY_LABELS, load_corpus
from training.turn_classifier.data import ENCODER, SECOND_ENCODER, embed
from training.turn_classifier.evaluate import binary
from training.turn_classifier.split import split

# Word-count bands for the LoCoMo counts: the gate's own bound first.
BANDS: tuple[tuple[int, int], ...] = (
    (0, GATE_MAX_WORDS),
    (GATE_MAX_WORDS + 1, GATE_LONG_WORDS),
    (GATE_LONG_WORDS + 1, 20),
    (21, 30),
    (31, 50),
    (51, 10_000),
)


def band_of(words: int) -> str:
    """The name of the band a turn of ``words`` words falls in ("0-10", …, "51+")."""
    for low, high in BANDS:
        if low <= words <= high:
            return f"{low}+" if high >= 10_000 else f"{low}-{high}"
    raise ValueError(f"words: {words} is negative")


def miss_reason(text: str, verdict: TurnVerdict, rules: Classification) -> str:
    """Why the gate keeps a turn (one it judged with ``verdict``), in the order it decides."""
    words = word_count(text)
    if rules.remember and words > GATE_LONG_WORDS:
        return "longer than the gate judges"
    if verdict.remember:
        return "the model keeps it"
    if words > GATE_MAX_WORDS and verdict.label == "small_talk":
        return "small talk longer than the gate filters"
    return "the model filters it, over the gate's bound"


@dataclass(frozen=True)
class Judged:
    """A turn's verdict and what the gate and the model with the rules' patterns make of it."""

    text: str
    verdict: TurnVerdict
    gated: Classification
    learned: Classification


def judge(classifier: TurnClassifier, texts: Sequence[str], rows: npt.ArrayLike) -> list[Judged]:
    """Each text judged from its row of label probabilities (columns in ``LABELS`` order)."""
    probabilities = np.asarray(rows, dtype=np.float64)
    order = [LABELS.index(label) for label in classifier.labels]  # to the file's column order
    judged = []
    for text, row in zip(texts, probabilities[:, order], strict=True):
        verdict = classifier.verdict(row)
        judged.append(
            Judged(
                text,
                verdict,
                gated_classification(text, verdict),
                learned_classification(text, verdict),
            )
        )
    return judged


def fold_report(labels: Sequence[str], judged: Sequence[Judged]) -> dict[str, Any]:
    """Non-memory P / R of the gate and of ``learned``, and the gate's misses by reason."""
    truth = [label in NON_MEMORY_LABELS for label in labels]
    misses = Counter(
        miss_reason(j.text, j.verdict, classify(j.text))
        for j, non_memory in zip(judged, truth, strict=True)
        if non_memory and j.gated.remember
    )
    return {
        "turns": len(judged),
        "gated": binary(truth, [not j.gated.remember for j in judged]),
        "learned": binary(truth, [not j.learned.remember for j in judged]),
        "gate_misses": dict(misses.most_common()),
    }


def locomo_counts(
    words: Sequence[int], evidence: Sequence[bool], judged: Sequence[Judged]
) -> dict[str, dict[str, int]]:
    """Per band and in all: turns, the rules' own filter, what the gate filters of the turns the
    rules keep, and what the model alone filters; each with ``_evidence``, the evidence turns
    among them."""
    table: dict[str, Counter[str]] = {band_of(high): Counter() for _, high in BANDS}
    for count, gold, j in zip(words, evidence, judged, strict=True):
        kept_by_rules = classify(j.text).remember
        for name, counted in (
            ("turns", True),
            ("rules_filter", not kept_by_rules),
            ("gate_filters", kept_by_rules and not j.gated.remember),
            ("model_filters", not j.verdict.remember),
        ):
            for row in (table[band_of(count)], table.setdefault("all", Counter())):
                row[name] += int(counted)
                row[f"{name}_evidence"] += int(counted and gold)
    return {band: dict(row) for band, row in table.items()}


def _folds(cache: Path | None, classifier: TurnClassifier) -> dict[str, Any]:
    from training.turn_classifier import train  # sklearn: training only

    training_turns, _ = split(load_corpus())  # the held-back quarter is dropped here
    encoder = load_encoder(ENCODER)
    second = load_encoder(SECOND_ENCODER, threads=1)
    data = train.fold_inputs(training_turns, encoder, cache, second)
    probabilities = train.out_of_fold(data, train.CHOSEN)
    texts = [turn.text for turn in data.scoring.turns]
    return fold_report(
        [turn.label for turn in data.scoring.turns], judge(classifier, texts, probabilities)
    )


def _locomo(path: Path, cache: Path | None, classifier: TurnClassifier) -> dict[str, Any]:
    from bench.locomo.dataset import load_locomo
    from bench.locomo.offline import turn_events

    texts: list[str] = []
    search: list[str] = []
    evidence: list[bool] = []
    for conversation in load_locomo(path):
        gold = {d for q in conversation.questions if not q.adversarial for d in q.evidence}
        for turn, event in zip(conversation.turns, turn_events(conversation), strict=True):
            texts.append(turn.text)
            search.append(turn_search_text(event))
            evidence.append(turn.dia_id in gold)
    vectors = classifier.input_vectors(search, embed(load_encoder(ENCODER), search, cache))
    probabilities = classifier.probabilities(texts, vectors)
    columns = [classifier.labels.index(label) for label in LABELS]  # to LABELS order
    judged = judge(classifier, texts, probabilities[:, columns])
    return locomo_counts([word_count(text) for text in texts], evidence, judged)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.turn_classifier.gate_report")
    parser.add_argument("--cache", type=Path, default=None, help="embedding cache directory")
    parser.add_argument("--locomo", type=Path, default=None, help="LoCoMo JSON, read by path")
    parser.add_argument("--no-folds", action="store_true", help="skip the cross-validation")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    classifier = load_turn_classifier()
    report: dict[str, Any] = {"classifier": classifier.id}
    with threadpool_limits(1):
        if not args.no_folds:
            report["folds"] = _folds(args.cache, classifier)
        if args.locomo is not None:
            report["locomo"] = _locomo(args.locomo, args.cache, classifier)
    print(json.dumps(report, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
