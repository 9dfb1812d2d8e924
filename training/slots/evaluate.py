"""Precision and recall of "the newer statement supersedes the older one" on the labelled pairs.

Each pair of ``pairs.jsonl`` runs through the stages' own code (``LocalPipeline``: the real
encoder and the configured classifier in ``prepare`` — by default the small-talk gate, which may
filter a statement or keep it as a preference — then ``consolidate``), in a namespace of its own:
the older statement at T0, the newer one ten days later. A pair counts as superseded when the
older statement's memory ends ``superseded`` by the newer statement's memory.

    python -m training.slots.evaluate --half tune [--show]
    python -m training.slots.evaluate --half test        # once, at the end; never with --show

``--set corpus`` scores the pair corpus instead (``corpus/``, 1,280 pairs written by four
writers who never saw the rules; ``corpus/CORPUS.md``): its tune part (three quarters, fixed by
``corpus_half``) may be looked at, its test quarter only scored.

``--one-namespace`` runs a half's pairs of each language as one user's statements in a single
namespace instead (all the older statements, then all the newer ones, each in a session of its
own): a statement then meets hundreds of others, as in a real bank, and the report adds how many
memories were superseded by a statement of another pair (in all, and by the update rule that
did it: ``superseded_by_another_pair/<rule>``) and how many turns were merged away.

Prints JSON: precision, recall and counts per half, per language and per category.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from pipeline.ingest.local import LocalPipeline
from pipeline.memory.rules.extraction import memory_id
from pipeline.models.encoders import Encoder, load_encoder
from pipeline.runtime.settings import Settings
from schemas.events import TurnRecorded
from schemas.memory import MemoryRecord

PAIRS = Path(__file__).with_name("pairs.jsonl")
T0 = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)
GAP = timedelta(days=10)


@dataclass(frozen=True)
class Pair:
    id: str
    half: str
    lang: str
    category: str
    sub: str
    older: dict[str, str]
    newer: dict[str, str]
    supersedes: bool


@dataclass(frozen=True)
class Outcome:
    pair: Pair
    superseded: bool
    older_kept: bool  # the older statement formed a memory at all
    newer_kept: bool
    detail: str


def load_pairs(path: Path = PAIRS) -> list[Pair]:
    return [Pair(**orjson.loads(line)) for line in path.read_bytes().splitlines() if line.strip()]


CORPUS_DIR = Path(__file__).with_name("corpus")
CORPUS_SEED = "hindsight-update-pairs/"
CORPUS_TEST_EVERY = 4  # one pair in four is the test quarter
CORPUS_FIELDS = {"id", "lang", "domain", "label", "sub", "older", "newer"}
CORPUS_SUBS = {
    "update": {"switch", "number", "state", "silent", "correction", "procedure", "ended"},
    "keep": {"adds", "same", "other_subject", "other_attribute", "tentative", "unrelated"},
}


def corpus_half(pair_id: str) -> str:
    """``test`` for one pair in four, by a seeded hash of the id alone (never the text)."""
    digest = hashlib.sha256((CORPUS_SEED + pair_id).encode()).digest()
    return "test" if digest[0] % CORPUS_TEST_EVERY == 0 else "tune"


def load_corpus(directory: Path = CORPUS_DIR) -> list[Pair]:
    """Every pair of ``directory/*.jsonl`` (a writer per file), checked, as :class:`Pair`."""
    pairs: list[Pair] = []
    for path in sorted(directory.glob("*.jsonl")):
        for number, line in enumerate(path.read_bytes().splitlines(), 1):
            row = orjson.loads(line)
            where = f"{path.name}:{number}"
            if set(row) != CORPUS_FIELDS:
                raise ValueError(f"{where}: fields {sorted(row)}, expected {sorted(CORPUS_FIELDS)}")
            if row["lang"] not in {"en", "zh"}:
                raise ValueError(f"{where}: lang {row['lang']!r}")
            if row["sub"] not in CORPUS_SUBS.get(row["label"], set()):
                raise ValueError(f"{where}: sub {row['sub']!r} for label {row['label']!r}")
            pairs.append(
                Pair(
                    id=row["id"],
                    half=corpus_half(row["id"]),
                    lang=row["lang"],
                    category=row["label"],
                    sub=row["sub"],
                    older={"speaker": "user", "text": row["older"]},
                    newer={"speaker": "user", "text": row["newer"]},
                    supersedes=row["label"] == "update",
                )
            )
    ids = [pair.id for pair in pairs]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{directory}: duplicate pair ids")
    return pairs


def _turn(pair: Pair, which: str, at: datetime, namespace: str | None = None) -> TurnRecorded:
    side = pair.older if which == "older" else pair.newer
    return TurnRecorded(
        event_id=f"{pair.id}-{which}",
        namespace=namespace or f"pairs-{pair.id}",
        event_time=at,
        session_id=f"{pair.id}-{which}",
        speaker=side["speaker"],
        text=side["text"],
    )


def run_pairs(
    pairs: Sequence[Pair], encoder: Encoder, settings: Settings, one_namespace: bool = False
) -> tuple[list[Outcome], dict[str, dict[str, int]]]:
    """Each pair's outcome, and per language how many memories a statement of another pair
    superseded and how many turns formed no memory of their own (``one_namespace`` only; else
    every pair is alone in its namespace and both are 0)."""
    pipeline = LocalPipeline.configured(encoder, settings)
    turns: dict[str, tuple[TurnRecorded, TurnRecorded]] = {}
    for pair in pairs:
        if one_namespace:  # one user: the statements a minute apart, in the corpus' order
            crowd, step = f"crowd-{pair.lang}", timedelta(minutes=len(turns))
        else:
            crowd, step = None, timedelta(0)
        older = _turn(pair, "older", T0 + step, crowd)
        newer = _turn(pair, "newer", T0 + GAP + step, crowd)
        turns[pair.id] = (older, newer)
    if one_namespace:  # every older statement before any newer one
        ordered = [both[0] for both in turns.values()] + [both[1] for both in turns.values()]
    else:
        ordered = [turn for both in turns.values() for turn in both]
    for turn in ordered:
        pipeline.publish(turn.namespace, turn)
    pipeline.run(prepare_batch_size=settings.batch_size)
    records = pipeline.records()
    return _outcomes(pairs, turns, records), _crowding(pairs, turns, records)


def _crowding(
    pairs: Sequence[Pair],
    turns: dict[str, tuple[TurnRecorded, TurnRecorded]],
    records: dict[str, MemoryRecord],
) -> dict[str, dict[str, int]]:
    pair_of = {
        memory_id(turn.namespace, [turn.event_id], turn.text): pair.id
        for pair in pairs
        for turn in turns[pair.id]
    }
    counts = {
        lang: {"superseded_by_another_pair": 0, "turns_merged_away": 0}
        for lang in {p.lang for p in pairs}
    }
    lang_of = {pair.id: pair.lang for pair in pairs}
    for record_id, record in records.items():
        if record_id not in pair_of:
            continue
        lang = lang_of[pair_of[record_id]]
        counts[lang]["turns_merged_away"] += len(record.provenance) - 1
        successor = pair_of.get(record.superseded_by or "")
        if record.status == "superseded" and successor not in {None, pair_of[record_id]}:
            counts[lang]["superseded_by_another_pair"] += 1
            # Which update rule did it: where to look when the count grows.
            by_rule = f"superseded_by_another_pair/{rule_of(record)}"
            counts[lang][by_rule] = counts[lang].get(by_rule, 0) + 1
    return {
        lang: dict(sorted(c.items(), key=lambda kv: ("/" in kv[0], kv[0])))
        for lang, c in counts.items()
    }


def rule_of(record: MemoryRecord) -> str:
    """The update rule that superseded ``record``, as its history entry names it ("attribute",
    "words", "state", "value of" …; "" when none is named)."""
    entry = next((h for h in reversed(record.history) if h.change == "superseded"), None)
    if entry is None:
        return ""
    _, _, reason = entry.detail.partition("; ")
    name = reason.partition(":")[0].strip()
    return "value of" if name.startswith("value of ") else name


def _outcomes(
    pairs: Sequence[Pair],
    turns: dict[str, tuple[TurnRecorded, TurnRecorded]],
    records: dict[str, MemoryRecord],
) -> list[Outcome]:
    outcomes = []
    for pair in pairs:
        older, newer = turns[pair.id]
        older_id = memory_id(older.namespace, [older.event_id], older.text)
        newer_id = memory_id(newer.namespace, [newer.event_id], newer.text)
        old, new = records.get(older_id), records.get(newer_id)
        superseded = (
            old is not None and old.status == "superseded" and old.superseded_by == newer_id
        )
        detail = ""
        if old is not None:
            detail = f"old {old.kind}/{old.region} {old.status}"
            if any(h.change == "confirmed" for h in old.history):
                detail += " (merged)"
        if new is not None:
            detail += f"; new {new.kind}/{new.region}"
            entry = (
                next((h for h in old.history if h.change == "superseded"), None) if old else None
            )
            if entry is not None:
                detail += f"; {entry.detail}"
        outcomes.append(Outcome(pair, superseded, old is not None, new is not None, detail))
    return outcomes


def _scores(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    tp = sum(o.superseded and o.pair.supersedes for o in outcomes)
    fp = sum(o.superseded and not o.pair.supersedes for o in outcomes)
    fn = sum(not o.superseded and o.pair.supersedes for o in outcomes)
    return {
        "pairs": len(outcomes),
        "precision": round(tp / (tp + fp), 3) if tp + fp else None,
        "recall": round(tp / (tp + fn), 3) if tp + fn else None,
        "true_supersedes": tp,
        "false_supersedes": fp,
        "missed_updates": fn,
    }


def report(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    by_lang = {
        lang: _scores([o for o in outcomes if o.pair.lang == lang])
        for lang in sorted({o.pair.lang for o in outcomes})
    }
    by_category = {
        category: dict(
            superseded=sum(o.superseded for o in outcomes if o.pair.category == category),
            of=sum(o.pair.category == category for o in outcomes),
        )
        for category in sorted({o.pair.category for o in outcomes})
    }
    by_sub = {
        f"{category}/{sub}": dict(
            superseded=sum(
                o.superseded for o in outcomes if (o.pair.category, o.pair.sub) == (category, sub)
            ),
            of=sum((o.pair.category, o.pair.sub) == (category, sub) for o in outcomes),
        )
        for category, sub in sorted({(o.pair.category, o.pair.sub) for o in outcomes})
    }
    return {
        "all": _scores(outcomes),
        "by_language": by_lang,
        "by_category": by_category,
        "by_sub": by_sub,
    }


def pairs_digest(pairs: Sequence[Pair]) -> str:
    return hashlib.sha256(b"".join(orjson.dumps(p.__dict__) for p in pairs)).hexdigest()[:12]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.slots.evaluate")
    parser.add_argument("--half", choices=["tune", "test", "all"], required=True)
    parser.add_argument("--show", action="store_true", help="list the errors (tune half only)")
    parser.add_argument("--pairs", type=Path, default=PAIRS)
    parser.add_argument(
        "--set", choices=["pairs", "corpus"], default="pairs", help="pairs.jsonl or corpus/"
    )
    parser.add_argument(
        "--one-namespace",
        action="store_true",
        help="every pair of a language in one namespace, as one user's statements",
    )
    args = parser.parse_args(argv)
    if args.show and args.half != "tune":
        parser.error("--show lists pairs: only for the tune half")
    loaded = load_corpus() if args.set == "corpus" else load_pairs(args.pairs)
    pairs = [p for p in loaded if args.half in {"all", p.half}]
    settings = Settings.from_env()
    outcomes, crowding = run_pairs(
        pairs, load_encoder(settings.encoder), settings, args.one_namespace
    )
    result = {
        "set": args.set,
        "half": args.half,
        "one_namespace": args.one_namespace,
        "pairs_digest": pairs_digest(pairs),
        **report(outcomes),
    }
    if args.one_namespace:
        result["crowding"] = crowding
    if args.show:
        for o in outcomes:
            if o.superseded != o.pair.supersedes:
                kind = "FALSE SUPERSEDE" if o.superseded else "MISSED"
                print(
                    f"{kind:16} {o.pair.id} {o.pair.lang} {o.pair.category}/{o.pair.sub}: "
                    f"{o.pair.older['text']!r} -> {o.pair.newer['text']!r} [{o.detail}]",
                    file=sys.stderr,
                )
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
