"""How well the small-talk gate filters short turns nobody tuned it on.

``probe.jsonl`` (README.md) holds short turns in English and Chinese, written without reading
the rules, the classifier's corpus or the code, each labelled with the turn classifier's labels.
Each item belongs to one half by a seeded hash of its id: ``tune`` may be looked at while the
gate changes, ``test`` is only scored.

    python -m bench.short_turns.score --half tune [--show]
    python -m bench.short_turns.score --half test          # rates only

Prints JSON: non-memory precision and recall (a turn filtered is a turn not remembered) of the
shipped gate (``prepare.gated_classification``), of the model with the rules' patterns
(``prepare.learned_classification``) and of the rules alone, per half and language; ``--show``
lists the gate's misses on the tune half. Each turn is framed as ``prepare`` frames a user's.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import probe_halves
from pipeline.ingest.prepare import gated_classification, learned_classification
from pipeline.memory.rules.classify import classify
from pipeline.memory.rules.extraction import search_text
from pipeline.models.classifier import DEFAULT_MODEL, TurnVerdict, load_turn_classifier
from pipeline.models.encoders import load_encoder
from training.turn_classifier.corpus_stats import NON_MEMORY_LABELS
from training.turn_classifier.data import ENCODER

PROBE = Path(__file__).with_name("probe.jsonl")
SPLIT_SEED = "hindsight-short-turns-probe/"
SAID_AT = datetime(2024, 6, 12, 10, 0, tzinfo=UTC)


def half_of(item_id: str) -> str:
    return probe_halves.half_of(SPLIT_SEED, item_id)


def verdicts(texts: Sequence[str], model: str = DEFAULT_MODEL) -> list[TurnVerdict]:
    """The shipped classifier's verdict on each text, said by the user at ``SAID_AT``."""
    classifier = load_turn_classifier(model)
    framed = [search_text("user", text, SAID_AT) for text in texts]
    encoder = load_encoder(ENCODER)  # the encoder the shipped file was trained on
    vectors = classifier.input_vectors(framed, encoder.encode(framed))
    return classifier.classify_many(texts, vectors)


def _rates(rows: Sequence[dict[str, Any]], filtered: str) -> dict[str, Any]:
    truth = [row["label"] in NON_MEMORY_LABELS for row in rows]
    said = [row[filtered] for row in rows]
    true = sum(t and s for t, s in zip(truth, said, strict=True))
    return {
        "precision": round(true / max(1, sum(said)), 3),
        "recall": round(true / max(1, sum(truth)), 3),
        "filtered": sum(said),
        "non_memory": sum(truth),
    }


def scores(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {
        "turns": len(rows),
        "gate": _rates(rows, "gate_filters"),
        "learned": _rates(rows, "learned_filters"),
        "rules": _rates(rows, "rules_filter"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = probe_halves.parse_arguments(__doc__.splitlines()[0], argv)
    items = probe_halves.read_half(PROBE, SPLIT_SEED, args.half)
    texts = [item["text"] for item in items]
    rows = []
    for item, verdict in zip(items, verdicts(texts), strict=True):
        text = item["text"]
        rows.append(
            {
                **item,
                "gate_filters": not gated_classification(text, verdict).remember,
                "learned_filters": not learned_classification(text, verdict).remember,
                "rules_filter": not classify(text).remember,
                "keep": verdict.keep_probability,
                "model_label": verdict.label,
            }
        )
    probe_halves.write_report(args.half, rows, scores)
    if args.show:
        probe_halves.write_misses(
            rows,
            lambda row: (row["label"] in NON_MEMORY_LABELS) != row["gate_filters"],
            lambda row: (
                f"{'LOST MEMORY' if row['gate_filters'] else 'KEPT CHATTER':13} {row['id']} "
                f"{row['label']:10} keep {row['keep']:.3f} {row['model_label']:10} {row['text']}"
            ),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
