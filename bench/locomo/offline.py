"""Offline LoCoMo harness for fast iteration: the real ingest code, no Kafka, no Milvus.

Turns are built exactly as the runner publishes them, encoded to the bytes the worker reads, and
applied by the stages' own code through ``LocalPipeline`` (real encoder, prepare batches of
``Settings.batch_size``, one conversation per namespace). The resulting records (what the state
topic would carry) are cached as JSON under /tmp, so recall-side changes are re-measured in
seconds; ingest-side changes (search text, filtering, segmentation) need ``--rebuild``. Questions
are asked through ``RecallEngine.recall`` and scored by the runner's own ``evaluate`` and
``HindsightRetriever``, so the numbers match an end-to-end run up to batching differences.

    python -m bench.locomo.offline --data /work/shared/data/locomo_dev.json [--rebuild]
        [--encoder minilm-onnx-int8]

``--encoder`` overrides ``HINDSIGHT_ENCODER``; each encoder keeps its own cached records.

    python -m bench.locomo.offline --data /work/shared/data/locomo_dev.json --loo [--out DIR]

``--loo`` measures every idea in ``bench.locomo.loo.IDEAS`` leave-one-conversation-out, with the
baseline (every idea off) in the same run; it needs both record sets (with and without time
notes), built on first use.

Only ``hindsight bench locomo`` numbers are reported; this is a development tool.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from bench.locomo.dataset import Conversation, load_locomo
from bench.locomo.folds import METRIC, pooled_mean
from bench.locomo.loo import EXCLUDE, Config, Scores, render, run_ideas, samples_of, select
from bench.locomo.metrics import QuestionScore, aggregate, score_question
from bench.locomo.report import render_summary
from bench.locomo.runner import RECALL_LIMIT, HindsightRetriever, evaluate
from pipeline.ingest.local import LocalPipeline
from pipeline.models.encoders import ENCODER_NAMES, Encoder, Vectors, known_share, load_encoder
from pipeline.recall.engine import RecallEngine
from pipeline.recall.hot_index import HotIndex
from pipeline.runtime.settings import Settings
from schemas.codec import validate
from schemas.events import TurnRecorded
from schemas.memory import MemoryRecord

DEFAULT_CACHE = Path("/tmp/hindsight-locomo-offline")


def turn_events(conversation: Conversation) -> list[TurnRecorded]:
    """The events the runner's ``retain_many`` would publish for a conversation."""
    return [
        validate(
            TurnRecorded,
            {
                "event_id": turn.event_id,
                "namespace": conversation.namespace,
                "session_id": turn.session_id,
                "speaker": turn.speaker,
                "role": "user",
                "text": turn.text,
                "event_time": turn.event_time,
                "metadata": {"dia_id": turn.dia_id},
            },
        )
        for turn in conversation.turns
    ]


def ingest(
    conversations: Sequence[Conversation], encoder: Encoder, settings: Settings
) -> list[MemoryRecord]:
    """Run every conversation through the stages' own code (``LocalPipeline``): final records."""
    pipeline = LocalPipeline.configured(encoder, settings, partitions=settings.partitions)
    for conversation in conversations:
        for event in turn_events(conversation):
            pipeline.publish(event.namespace, event)
    pipeline.run(prepare_batch_size=settings.batch_size)
    return list(pipeline.records().values())


def save_records(path: Path, records: Sequence[MemoryRecord]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps([r.model_dump(mode="json") for r in records]))


def load_records(path: Path) -> list[MemoryRecord]:
    return [MemoryRecord.model_validate(item) for item in orjson.loads(path.read_bytes())]


class CachedQueryEncoder:
    """The real encoder, with the questions encoded up front in batches (same vectors)."""

    def __init__(self, encoder: Encoder, texts: Sequence[str]) -> None:
        self.name = encoder.name
        self.id = encoder.id
        self.dimension = encoder.dimension
        self._encoder = encoder
        unique = list(dict.fromkeys(texts))
        vectors = encoder.encode(unique) if unique else np.zeros((0, encoder.dimension))
        self._cache = {text: vectors[i] for i, text in enumerate(unique)}

    def known_share(self, text: str) -> float:
        return known_share(self._encoder, text)

    def encode(self, texts: list[str]) -> Vectors:
        missing = [t for t in texts if t not in self._cache]
        if missing:
            self._cache.update(zip(missing, self._encoder.encode(missing), strict=True))
        return np.stack([self._cache[t] for t in texts]).astype(np.float32)


@dataclass(frozen=True)
class _Result:
    memories: list[Any]


class EngineClient:
    """Just enough of the async client for ``HindsightRetriever.retrieve``."""

    def __init__(self, engine: RecallEngine) -> None:
        self._engine = engine

    async def recall(
        self,
        namespace: str,
        query: str,
        *,
        at: datetime,
        limit: int | None = None,
        truncate: bool | None = None,
        reinforce: bool = True,
    ) -> _Result:
        del reinforce  # the engine never reinforces; the client would publish a signal
        memories = self._engine.recall(
            namespace, query, at=at, limit=limit, truncate=bool(truncate)
        )
        return _Result(memories)


class OfflineRetriever(HindsightRetriever):
    """The runner's retriever over an already-built index (nothing to publish)."""

    async def prepare(self, conversations: Sequence[Conversation]) -> None:
        del conversations  # records carry dialogue ids in their provenance


def records_for(
    conversations: Sequence[Conversation],
    encoder: Encoder,
    settings: Settings,
    path: Path,
    rebuild: bool,
) -> list[MemoryRecord]:
    if rebuild or not path.exists():
        started = time.perf_counter()
        records = ingest(conversations, encoder, settings)
        save_records(path, records)
        print(f"ingested {len(records)} records in {time.perf_counter() - started:.1f}s")
        return records
    records = load_records(path)
    print(f"loaded {len(records)} records from {path}")
    return records


def index_of(records: Sequence[MemoryRecord], dimension: int) -> HotIndex:
    index = HotIndex(dimension)
    for record in records:
        index.apply(record)
    return index


def records_path(cache: Path, data: Path, time_notes: bool, encoder: str = "minilm") -> Path:
    # One file per encoder and ingest variant, so switching either never reuses stale records.
    suffix = "" if time_notes else ".no-time-notes"
    return cache / f"{data.stem}.{encoder}{suffix}.records.json"


def build_index(
    data: Path, cache: Path, rebuild: bool, settings: Settings
) -> tuple[list[Conversation], HotIndex, Encoder]:
    conversations = load_locomo(data)
    encoder = load_encoder(settings.encoder, settings.encoder_threads)
    path = records_path(cache, data, settings.memory.time_notes, settings.encoder)
    records = records_for(conversations, encoder, settings, path, rebuild)
    return conversations, index_of(records, encoder.dimension), encoder


async def run(
    data: Path, cache: Path, rebuild: bool, out: Path | None, encoder_name: str | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    settings = Settings.from_env().with_overrides(encoder=encoder_name)
    conversations, index, encoder = build_index(data, cache, rebuild, settings)
    questions = [q.question for c in conversations for q in c.questions]
    engine = RecallEngine(index, CachedQueryEncoder(encoder, questions), settings.recall)
    retriever = OfflineRetriever(EngineClient(engine), limit=RECALL_LIMIT)
    started = time.perf_counter()
    scored: list[QuestionScore]
    scored, traces = await evaluate(conversations, retriever)
    print(f"encoder {encoder.id}")
    print(f"asked {len(scored)} questions in {time.perf_counter() - started:.1f}s")
    results: dict[str, Any] = {"methods": {"hindsight": aggregate(scored)}}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
        (out / "questions.jsonl").write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in traces))
    return results, traces


async def _scored(
    conversations: Sequence[Conversation],
    retriever: HindsightRetriever,
    skip_categories: frozenset[int] = frozenset(),
) -> list[QuestionScore]:
    """Every question scored as ``runner.evaluate`` does, without its progress bar."""
    scored: list[QuestionScore] = []
    for conversation in conversations:
        for question in conversation.questions:
            if question.category in skip_categories:
                continue
            result = await retriever.retrieve(
                conversation.namespace, question.question, conversation.recall_at
            )
            scores = score_question(result, question.evidence)
            scored.append(QuestionScore(question.sample_id, question.category, scores))
    return scored


def run_loo(
    data: Path,
    cache: Path,
    rebuild: bool,
    out: Path | None,
    ideas: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Every idea of ``bench.locomo.loo`` leave-one-conversation-out (see that module)."""
    settings = Settings.from_env()
    conversations = load_locomo(data)
    encoder = load_encoder(settings.encoder, settings.encoder_threads)
    indexes: dict[bool, HotIndex] = {}
    for time_notes in (False, True):
        variant = dataclasses.replace(
            settings, memory=dataclasses.replace(settings.memory, time_notes=time_notes)
        )
        path = records_path(cache, data, time_notes, settings.encoder)
        records = records_for(conversations, encoder, variant, path, rebuild)
        indexes[time_notes] = index_of(records, encoder.dimension)
    questions = [q.question for c in conversations for q in c.questions]
    queries = CachedQueryEncoder(encoder, questions)

    def evaluate(config: Config) -> list[QuestionScore]:
        engine = RecallEngine(
            indexes[config.time_notes], queries, settings.recall, config.tuning, hops=config.hops
        )
        retriever = OfflineRetriever(EngineClient(engine), limit=RECALL_LIMIT)
        # The excluded category decides nothing: it is not asked.
        return asyncio.run(_scored(conversations, retriever, EXCLUDE))

    started = time.perf_counter()
    scores = Scores(evaluate, select(ideas), verbose=True)
    results = run_ideas(scores, samples_of(scores.of({})))
    results["configurations"] = {
        name: pooled_mean(scored, set(samples_of(scored)), METRIC, EXCLUDE)[0]
        for name, scored in scores.by_name.items()
    }
    print(f"evaluated {len(scores.by_name)} configurations in {time.perf_counter() - started:.1f}s")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "loo.json").write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
        (out / "loo.md").write_text(render(results) + "\n", encoding="utf-8")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.locomo.offline")
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--rebuild", action="store_true", help="re-run ingest (search text etc.)")
    parser.add_argument("--out", type=Path, default=None, help="write results and traces here")
    parser.add_argument(
        "--encoder", choices=ENCODER_NAMES, default=None, help="default: HINDSIGHT_ENCODER"
    )
    parser.add_argument(
        "--loo", action="store_true", help="every idea leave-one-conversation-out (loo.json/md)"
    )
    parser.add_argument(
        "--ideas",
        default=None,
        help="with --loo: comma-separated idea names to choose (the rest stay at the defaults)",
    )
    args = parser.parse_args(argv)
    if args.loo:
        names = [n.strip() for n in args.ideas.split(",") if n.strip()] if args.ideas else None
        print(render(run_loo(args.data, args.cache, args.rebuild, args.out, names)))
        return 0
    results, _ = asyncio.run(run(args.data, args.cache, args.rebuild, args.out, args.encoder))
    print(render_summary(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
