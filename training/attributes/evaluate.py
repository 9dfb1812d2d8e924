"""Score the shipped slot-attribute model on the corpus' held-back quarter (never used to choose).

    python -m training.attributes.evaluate [--cache DIR] [--json FILE]

Per language: top-1 accuracy over the held-back statements and questions (``none`` included),
and the pair figures the update rule depends on: pairs of held-back statements of one writer
that the model reads as one single-valued attribute at the policy's probability
(``MemoryPolicy.attribute_probability``), against the writers' labels. The same for each
release of the corpus on its own (``by_release``: "first", "r3"); and the same held-back
statements said with a chat line around them (``with_chat``: ``training.attributes.with_chat``,
the chat lines from the turn classifier corpus' held-back quarter).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.models.attributes import load_attribute_model
from pipeline.models.encoders import load_encoder
from pipeline.runtime.settings import MemoryPolicy
from training.attributes.corpus import CORPUS_DIR, LANGS, Example, load_corpus, split
from training.attributes.train import Rows, pair_figures, rates, rows
from training.attributes.with_chat import with_chat
from training.turn_classifier import split as turn_split
from training.turn_classifier.corpus_stats import load_corpus as load_turns
from training.turn_classifier.data import ENCODER, EVALUATION_FRAMING, SECOND_ENCODER


def scores(
    examples: Sequence[Example],
    probabilities: np.ndarray,
    labels: Sequence[str],
    single: dict[str, bool],
    threshold: float,
) -> dict[str, Any]:
    predicted = [labels[int(i)] for i in np.argmax(probabilities, axis=1)]
    correct = sum(p == e.attribute for p, e in zip(predicted, examples, strict=True))
    statements = np.array([e.kind == "statement" for e in examples])
    chosen = [e for e, s in zip(examples, statements, strict=True) if s]
    figures = pair_figures(chosen, probabilities[statements], labels, single, threshold)
    return {
        "texts": len(examples),
        "accuracy": round(correct / len(examples), 3) if examples else None,
        **figures,
        **rates(figures),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.attributes.evaluate")
    parser.add_argument("--cache", type=Path, default=None, help="embedding cache directory")
    parser.add_argument("--corpus", type=Path, default=CORPUS_DIR, help="the writers' files")
    parser.add_argument("--json", type=Path, default=None, help="also write the report here")
    args = parser.parse_args(argv)
    corpus = load_corpus(args.corpus)
    _, held_back = split(corpus.examples)
    model = load_attribute_model()
    encoder, second = load_encoder(ENCODER), load_encoder(SECOND_ENCODER, threads=1)
    labels = list(model.labels)
    single = dict(zip(labels, model.single_valued, strict=True))
    threshold = MemoryPolicy().attribute_probability

    def read(examples: Sequence[Example]) -> tuple[Rows, np.ndarray]:
        found = rows(examples, (EVALUATION_FRAMING,), encoder, second, args.cache)
        return found, np.stack([model.probabilities(row) for row in found.vectors])

    def scores_where(found: Rows, probabilities: np.ndarray, kept: list[bool]) -> dict[str, Any]:
        mask = np.array(kept, dtype=np.bool_)
        chosen = [e for e, m in zip(found.examples, mask, strict=True) if m]
        return scores(chosen, probabilities[mask], labels, single, threshold)

    def by_language(found: Rows, probabilities: np.ndarray) -> dict[str, Any]:
        return {
            "all": scores(found.examples, probabilities, labels, single, threshold),
            **{
                lang: scores_where(found, probabilities, [e.lang == lang for e in found.examples])
                for lang in LANGS
            },
        }

    data, probabilities = read(held_back)
    report: dict[str, Any] = {
        "model": model.id,
        "probability": threshold,
        **by_language(data, probabilities),
    }
    # Each release's quarter on its own: the first release's is the same texts whatever was added.
    report["by_release"] = {
        release or "first": scores_where(
            data, probabilities, [e.release == release for e in data.examples]
        )
        for release in sorted({e.release for e in data.examples})
    }
    # The held-back statements with chat around them: neither side was ever trained on.
    report["with_chat"] = by_language(
        *read(with_chat(held_back, turn_split.split(load_turns())[1]))
    )
    print(json.dumps(report, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
