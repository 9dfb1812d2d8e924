"""Score the shipped classifier and the rules on the held-back quarter of the corpus.

    python -m training.turn_classifier.evaluate [--cache DIR] [--json PATH]
        [--model ID --weights DIR]

Reads the file ``prepare`` loads (``pipeline/models/weights/``) through the runtime loader, embeds
the held-back turns as ``prepare`` would (``"<speaker>: <text>"``, one speaker per turn drawn by
hash), and prints: per-label precision/recall/F1 of the learned model, its confusion matrix, the
binary filter figures (the five non-memory labels against the six memory kinds) for the learned
model and for ``pipeline.memory.rules.classify.classify``, and both side by side on the memory
kinds (a label becomes the kind ``prepare`` stores, non-memory labels become "not remembered").
Nothing here feeds back into training.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from threadpoolctl import threadpool_limits

from pipeline.ingest.prepare import gated_classification, learned_classification
from pipeline.memory.rules.classify import classify
from pipeline.models.classifier import (
    DEFAULT_MODEL,
    LABEL_KIND,
    WEIGHTS_DIR,
    TurnClassifier,
    load_turn_classifier,
)
from pipeline.models.encoders import load_encoder
from training.turn_classifier.corpus_stats import LABELS, NON_MEMORY_LABELS, Turn, load_corpus
from training.turn_classifier.data import ENCODER, EVALUATION_FRAMING, inputs, search_text
from training.turn_classifier.split import split

NOT_REMEMBERED = "(not remembered)"
CHATTER_LABELS = ("small_talk", "filler", "greeting", "thanks")
KIND_CLASSES = (
    NOT_REMEMBERED,
    "preference",
    "fact",
    "task_state",
    "procedure",
    "decision",
    "emotion",
)


def per_class(
    truth: Sequence[str], predicted: Sequence[str], classes: Sequence[str]
) -> dict[str, Any]:
    """Precision, recall, F1 and support per class, and their macro average."""
    table: dict[str, Any] = {}
    for name in classes:
        tp = sum(1 for t, p in zip(truth, predicted, strict=True) if t == name and p == name)
        predicted_n = sum(1 for p in predicted if p == name)
        support = sum(1 for t in truth if t == name)
        precision = tp / predicted_n if predicted_n else 0.0
        recall = tp / support if support else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        table[name] = {
            "precision": round(precision, 3),
            "recall": round(recall, 3),
            "f1": round(f1, 3),
            "support": support,
        }
    table["macro"] = {
        key: round(sum(table[name][key] for name in classes) / len(classes), 3)
        for key in ("precision", "recall", "f1")
    }
    return table


def binary(truth: Sequence[bool], dropped: Sequence[bool]) -> dict[str, Any]:
    """The filter as a binary classifier of non-memory turns (dropped = predicted non-memory)."""
    hits = sum(1 for t, d in zip(truth, dropped, strict=True) if t and d)
    n_dropped, n_true = sum(dropped), sum(truth)
    kept_memories = sum(1 for t, d in zip(truth, dropped, strict=True) if not t and not d)
    precision = hits / n_dropped if n_dropped else 1.0
    recall = hits / n_true if n_true else 1.0
    return {
        "non_memory_precision": round(precision, 3),
        "non_memory_recall": round(recall, 3),
        "non_memory_f1": round(2 * precision * recall / (precision + recall), 3)
        if precision + recall
        else 0.0,
        "memory_kept": round(kept_memories / (len(truth) - n_true), 3),
        "turns": len(truth),
    }


def confusion(
    truth: Sequence[str], predicted: Sequence[str], rows: Sequence[str], columns: Sequence[str]
) -> list[list[int]]:
    return [
        [
            sum(1 for t, p in zip(truth, predicted, strict=True) if t == row and p == column)
            for column in columns
        ]
        for row in rows
    ]


def kind_of_label(label: str) -> str:
    return NOT_REMEMBERED if label in NON_MEMORY_LABELS else LABEL_KIND[label]


def evaluate(
    held_back: Sequence[Turn], classifier: TurnClassifier, cache: Path | None
) -> dict[str, Any]:
    encoder = load_encoder(ENCODER)
    data = inputs(held_back, encoder, (EVALUATION_FRAMING,), cache)
    # The second vector (v3 on) as prepare gets it: from the classifier, one turn at a time.
    vectors = classifier.input_vectors(
        [search_text(t, EVALUATION_FRAMING) for t in held_back], data.vectors
    )
    verdicts = classifier.classify_many([t.text for t in held_back], vectors)
    rules = [classify(t.text) for t in held_back]
    # As prepare decides with the model: the rules' precise patterns first, then the model.
    combined = [learned_classification(t.text, v) for t, v in zip(held_back, verdicts, strict=True)]
    combined_kinds = [c.kind if c.remember else NOT_REMEMBERED for c in combined]
    # The default: the rules decide, the model only filters their short plain facts.
    gated = [gated_classification(t.text, v) for t, v in zip(held_back, verdicts, strict=True)]
    gated_kinds = [g.kind if g.remember else NOT_REMEMBERED for g in gated]
    truth = [t.label for t in held_back]
    learned_labels = [v.label for v in verdicts]
    truth_kinds = [kind_of_label(label) for label in truth]
    learned_kinds = [v.kind if v.remember else NOT_REMEMBERED for v in verdicts]
    rules_kinds = [r.kind if r.remember else NOT_REMEMBERED for r in rules]
    is_non_memory = [label in NON_MEMORY_LABELS for label in truth]
    # Chatter: the four social labels (questions are the fifth non-memory label). Turns of the
    # other non-memory label are left out of its figures, so a filtered question counts neither way.
    chatter = [i for i, label in enumerate(truth) if label != "question"]
    by_language: dict[str, Any] = {}
    for lang in ("en", "zh", "mixed"):
        picks = [i for i, t in enumerate(held_back) if t.lang == lang]
        by_language[lang] = {
            "learned": binary(
                [is_non_memory[i] for i in picks], [not verdicts[i].remember for i in picks]
            ),
            "rules": binary(
                [is_non_memory[i] for i in picks], [not rules[i].remember for i in picks]
            ),
            "combined": binary(
                [is_non_memory[i] for i in picks], [not combined[i].remember for i in picks]
            ),
            "gated": binary(
                [is_non_memory[i] for i in picks], [not gated[i].remember for i in picks]
            ),
        }
    return {
        "classifier": classifier.id,
        "encoder": classifier.encoder_id,
        "keep_threshold": classifier.threshold,
        "held_back_turns": len(held_back),
        "filter": {
            "learned": binary(is_non_memory, [not v.remember for v in verdicts]),
            "rules": binary(is_non_memory, [not r.remember for r in rules]),
            "combined": binary(is_non_memory, [not c.remember for c in combined]),
            "gated": binary(is_non_memory, [not g.remember for g in gated]),
        },
        "filter_by_language": by_language,
        "chatter_filter": {
            "learned": binary(
                [label in CHATTER_LABELS for label in (truth[i] for i in chatter)],
                [not verdicts[i].remember for i in chatter],
            ),
            "rules": binary(
                [label in CHATTER_LABELS for label in (truth[i] for i in chatter)],
                [not rules[i].remember for i in chatter],
            ),
            "combined": binary(
                [label in CHATTER_LABELS for label in (truth[i] for i in chatter)],
                [not combined[i].remember for i in chatter],
            ),
            "gated": binary(
                [label in CHATTER_LABELS for label in (truth[i] for i in chatter)],
                [not gated[i].remember for i in chatter],
            ),
        },
        "labels_learned_by_language": {
            lang: per_class(
                [truth[i] for i, t in enumerate(held_back) if t.lang == lang],
                [learned_labels[i] for i, t in enumerate(held_back) if t.lang == lang],
                LABELS,
            )
            for lang in ("en", "zh", "mixed")
        },
        "labels_learned": per_class(truth, learned_labels, LABELS),
        "kinds": {
            "learned": per_class(truth_kinds, learned_kinds, KIND_CLASSES),
            "rules": per_class(truth_kinds, rules_kinds, KIND_CLASSES),
            "combined": per_class(truth_kinds, combined_kinds, KIND_CLASSES),
            "gated": per_class(truth_kinds, gated_kinds, KIND_CLASSES),
        },
        "confusion_learned": {
            "labels": list(LABELS),
            "rows_true_columns_predicted": confusion(truth, learned_labels, LABELS, LABELS),
        },
        "confusion_kinds_rules": {
            "rows": list(LABELS),
            "columns": list(KIND_CLASSES),
            "counts": confusion(truth, rules_kinds, LABELS, KIND_CLASSES),
        },
    }


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def render(report: dict[str, Any]) -> str:
    out = [
        f"classifier {report['classifier']} on {report['encoder']} vectors, "
        f"keep threshold {report['keep_threshold']}, {report['held_back_turns']} held-back turns",
        "",
        "Filter (non-memory = small_talk, filler, greeting, thanks, question):",
    ]
    rows = []
    for scope, figures in [("all", report["filter"])] + [
        (lang, report["filter_by_language"][lang]) for lang in ("en", "zh", "mixed")
    ]:
        for who in ("learned", "rules", "combined", "gated"):
            f = figures[who]
            rows.append(
                [
                    scope,
                    who,
                    f["non_memory_precision"],
                    f["non_memory_recall"],
                    f["non_memory_f1"],
                    f["memory_kept"],
                    f["turns"],
                ]
            )
    header = ["turns", "classifier", "non-memory P", "non-memory R", "F1", "memories kept", "n"]
    out += [_table(header, rows), "", "Chatter filter (small_talk, filler, greeting, thanks"]
    out += ["against the memory kinds; questions left out):"]
    rows = [
        [who, f["non_memory_precision"], f["non_memory_recall"], f["non_memory_f1"], f["turns"]]
        for who, f in report["chatter_filter"].items()
    ]
    out += [_table(["classifier", "chatter P", "chatter R", "F1", "n"], rows)]
    out += ["", "Kinds as prepare stores them (P / R / F1):"]
    kinds = report["kinds"]
    rows = [
        [
            name,
            kinds["learned"][name]["support"] if name != "macro" else "",
            *(
                f"{kinds[who][name]['precision']:.2f} / {kinds[who][name]['recall']:.2f} / "
                f"{kinds[who][name]['f1']:.2f}"
                for who in ("learned", "rules", "combined", "gated")
            ),
        ]
        for name in [*KIND_CLASSES, "macro"]
    ]
    header = ["kind", "n", "learned", "rules", "combined (learned)", "gated (default)"]
    out += [_table(header, rows), "", "Learned, per corpus label:"]
    labels = report["labels_learned"]
    rows = [
        [
            name,
            labels[name].get("support", ""),
            labels[name]["precision"],
            labels[name]["recall"],
            labels[name]["f1"],
        ]
        for name in [*LABELS, "macro"]
    ]
    out += [_table(["label", "n", "precision", "recall", "F1"], rows), ""]
    out += ["Learned, per corpus label and language (P / R, n):"]
    by_lang = report["labels_learned_by_language"]
    rows = [
        [
            name,
            *(
                f"{by_lang[lang][name]['precision']:.2f} / {by_lang[lang][name]['recall']:.2f}"
                + (f" ({by_lang[lang][name]['support']})" if name != "macro" else "")
                for lang in ("en", "zh", "mixed")
            ),
        ]
        for name in [*LABELS, "macro"]
    ]
    out += [_table(["label", "en", "zh", "mixed"], rows), ""]
    matrix = report["confusion_learned"]["rows_true_columns_predicted"]
    short = [label[:6] for label in LABELS]
    out += ["Learned confusion matrix (rows: true label, columns: predicted):"]
    out += [_table(["", *short], [[label, *row] for label, row in zip(short, matrix, strict=True)])]
    out += ["", "Rules confusion (rows: true label, columns: kind stored):"]
    counts = report["confusion_kinds_rules"]["counts"]
    kinds = ["not rem.", *KIND_CLASSES[1:]]
    out += [_table(["", *kinds], [[label, *row] for label, row in zip(short, counts, strict=True)])]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.turn_classifier.evaluate")
    parser.add_argument("--cache", type=Path, default=None, help="embedding cache directory")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="the file name of the weights")
    parser.add_argument("--weights", type=Path, default=WEIGHTS_DIR, help="where they are")
    args = parser.parse_args(argv)
    _, held_back = split(load_corpus())
    with threadpool_limits(1):
        report = evaluate(held_back, load_turn_classifier(args.model, args.weights), args.cache)
    print(render(report))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
