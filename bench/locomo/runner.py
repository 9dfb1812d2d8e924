"""``hindsight bench locomo``: publish LoCoMo conversations, ask every question, score, report.

Hindsight is measured through its real client (retain -> wait until applied -> recall), the
baselines through the same ``Retriever`` protocol over the same turns, and all three are scored
by ``bench.locomo.metrics``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from tqdm import tqdm

from bench.locomo.baselines import BM25Retriever, DenseRetriever, Retriever, english_stopwords
from bench.locomo.dataset import Conversation, load_locomo
from bench.locomo.folds import fold_result, render_folds, samples_of, summarise
from bench.locomo.metrics import (
    CONTEXT_K,
    TOKENIZER_NOTE,
    QuestionScore,
    RankedResult,
    aggregate,
    flatten_provenance,
    score_question,
)
from bench.locomo.report import render_markdown, render_summary
from pipeline.runtime.settings import Settings

METHODS = ("hindsight", "bm25", "dense")
# Optional extra: BM25 without English stopwords (not run unless asked for).
EXTRA_METHODS = ("bm25_stop",)
ALL_METHODS = METHODS + EXTRA_METHODS
RECALL_LIMIT = 30
WAIT_TIMEOUT_S = 600.0
PUBLISH_BATCH = 200


class HindsightRetriever:
    """Hindsight through its public async client; memories map to turns through provenance."""

    name = "hindsight"

    def __init__(self, client: Any, limit: int = RECALL_LIMIT, timeout: float = WAIT_TIMEOUT_S):
        self._client = client
        self._limit = limit
        self._timeout = timeout
        self._dia_by_event: dict[str, str] = {}

    async def _publish(self, conversation: Conversation, bar: tqdm[Any]) -> Any:
        """Publish a conversation's turns in order; returns the receipt of the last one."""
        turns = [
            {
                "namespace": conversation.namespace,
                "text": turn.text,
                "speaker": turn.speaker,
                "session_id": turn.session_id,
                "event_time": turn.event_time,
                "metadata": {"dia_id": turn.dia_id},
                "event_id": turn.event_id,
            }
            for turn in conversation.turns
        ]
        retain_many = getattr(self._client, "retain_many", None)
        receipt = None
        if retain_many is not None:
            # Batches keep the producer pipelined (no ack wait per turn) and the bar moving.
            for start in range(0, len(turns), PUBLISH_BATCH):
                batch = turns[start : start + PUBLISH_BATCH]
                receipt = (await retain_many(batch))[-1]
                bar.update(len(batch))
            return receipt
        # Sequential within a conversation: the log order of a namespace is the turn order.
        for turn in turns:
            fields = {k: v for k, v in turn.items() if k not in ("namespace", "text")}
            receipt = await self._client.retain(turn["namespace"], turn["text"], **fields)
            bar.update(1)
        return receipt

    async def prepare(self, conversations: Sequence[Conversation]) -> None:
        for conversation in conversations:
            self._dia_by_event.update({t.event_id: t.dia_id for t in conversation.turns})
        total = sum(len(c.turns) for c in conversations)
        with tqdm(total=total, desc="hindsight: retain", unit="turn") as bar:
            # Namespaces are independent, so they are published side by side.
            receipts = await asyncio.gather(*(self._publish(c, bar) for c in conversations))
        # One namespace lives in one partition, so its last receipt covers all of its turns.
        for receipt in tqdm(receipts, desc="hindsight: wait applied", unit="conv"):
            await self._client.wait_applied(receipt, timeout=self._timeout)

    def _dialogue_id(self, source: Any) -> str | None:
        dia_id = getattr(source, "dialogue_id", None)
        if dia_id:
            return str(dia_id)
        return self._dia_by_event.get(str(getattr(source, "event_id", "")))

    async def retrieve(self, namespace: str, question: str, at: datetime) -> RankedResult:
        result = await self._client.recall(
            namespace, question, at=at, limit=self._limit, truncate=False, reinforce=False
        )
        groups: list[list[str]] = []
        context: list[str] = []
        covered = 0
        for memory in result.memories:
            group = [d for d in (self._dialogue_id(s) for s in memory.provenance) if d]
            groups.append(group)
            # The context for the top-10 ids is every memory needed to reach ten distinct ids.
            if covered < CONTEXT_K:
                context.append(str(memory.content))
                covered = len(flatten_provenance(groups))
        return RankedResult(flatten_provenance(groups), "\n".join(context))


@contextlib.asynccontextmanager
async def open_method(name: str, settings: Settings) -> AsyncIterator[Retriever]:
    if name == "bm25":
        yield BM25Retriever()
    elif name == "bm25_stop":
        yield BM25Retriever(stopwords=english_stopwords(), name=name)
    elif name == "dense":
        from pipeline.models.encoders import load_encoder

        yield DenseRetriever(load_encoder(settings.encoder, settings.encoder_threads))
    elif name == "hindsight":
        # Imported here so the baselines run without the streaming stack.
        from pipeline.interfaces.client import Hindsight
        from pipeline.runtime.stack import running_stack

        async with running_stack(settings) as live, Hindsight.connect(live) as client:
            yield HindsightRetriever(client)
    else:
        raise ValueError(f"unknown method {name!r} (choose from {', '.join(ALL_METHODS)})")


async def evaluate(
    conversations: Sequence[Conversation], retriever: Retriever
) -> tuple[list[QuestionScore], list[dict[str, Any]]]:
    """Ask every question; returns the scores and one trace row per question."""
    scored: list[QuestionScore] = []
    traces: list[dict[str, Any]] = []
    total = sum(len(c.questions) for c in conversations)
    with tqdm(total=total, desc=f"{retriever.name}: questions", unit="q") as bar:
        for conversation in conversations:
            at = conversation.recall_at
            for question in conversation.questions:
                result = await retriever.retrieve(conversation.namespace, question.question, at)
                scores = score_question(result, question.evidence)
                scored.append(QuestionScore(question.sample_id, question.category, scores))
                traces.append(
                    {
                        "method": retriever.name,
                        "sample_id": question.sample_id,
                        "qa_index": question.index,
                        "category": question.category,
                        "gold": list(question.evidence),
                        "top10": result.dialogue_ids[:10],
                        "scores": scores,
                    }
                )
                bar.update(1)
    return scored, traces


async def run_locomo(
    data_path: str | Path,
    out_dir: str | Path,
    settings: Settings,
    methods: Sequence[str] = METHODS,
    limit_conversations: int | None = None,
    folds: str | None = None,
) -> dict[str, Any]:
    """Run the methods over the file, write results.json / results.md, return the results.

    ``folds="loo"`` also scores every method per conversation, as the held-out fold of a
    leave-one-conversation-out split (folds.json / folds.md). Nothing is chosen here: each
    method runs its shipped configuration, whose choices ``python -m bench.locomo.offline --loo``
    made fold by fold.
    """
    if folds not in (None, "loo"):
        raise ValueError(f"folds: expected 'loo', got {folds!r}")
    unknown = [m for m in methods if m not in ALL_METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown} (choose from {', '.join(ALL_METHODS)})")
    started = time.perf_counter()
    conversations = load_locomo(data_path, limit_conversations)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"methods": {}}
    fold_tables: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    traces: list[dict[str, Any]] = []
    for name in methods:
        method_started = time.perf_counter()
        async with open_method(name, settings) as retriever:
            await retriever.prepare(conversations)
            scored, method_traces = await evaluate(conversations, retriever)
        results["methods"][name] = aggregate(scored)
        if folds == "loo":
            samples = samples_of(scored)
            fold_tables[name] = summarise(
                [fold_result(scored, sample, "fixed", 0.0) for sample in samples]
            )
        traces += method_traces
        seconds[name] = time.perf_counter() - method_started
    seconds["total"] = time.perf_counter() - started
    results["meta"] = {
        "data": str(data_path),
        "conversations": len(conversations),
        "turns": sum(len(c.turns) for c in conversations),
        "questions": sum(len(c.questions) for c in conversations),
        "skipped_questions": sum(c.skipped_questions for c in conversations),
        "unknown_evidence_ids": sorted(
            f"{c.sample_id}:{d}" for c in conversations for d in c.unknown_evidence()
        ),
        "tokenizer": TOKENIZER_NOTE,
        "recall_limit": RECALL_LIMIT,
        "seconds": seconds,
    }
    (out / "results.json").write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    (out / "results.md").write_text(render_markdown(results), encoding="utf-8")
    # Per-question traces (ids and scores only) make regressions easy to locate.
    (out / "questions.jsonl").write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in traces))
    if fold_tables:
        results["folds"] = fold_tables
        (out / "folds.json").write_bytes(orjson.dumps(fold_tables, option=orjson.OPT_INDENT_2))
        (out / "folds.md").write_text(
            render_folds("LoCoMo per held-out conversation", fold_tables) + "\n", encoding="utf-8"
        )
    return results


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hindsight bench locomo",
        description="LoCoMo retrieval benchmark: Hindsight vs BM25 vs dense, over the same turns.",
    )
    parser.add_argument("--data", required=True, type=Path, help="a file in the LoCoMo format")
    parser.add_argument("--out", type=Path, default=Path("locomo-results"), help="output dir")
    parser.add_argument(
        "--methods",
        default=",".join(METHODS),
        help=f"comma-separated, from {','.join(ALL_METHODS)}",
    )
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument(
        "--folds",
        choices=["loo"],
        default=None,
        help="also score each conversation as a held-out fold (folds.json, folds.md)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="Hindsight data dir for the embedded stack (default: a fresh temporary dir)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    settings = Settings.from_env()
    with contextlib.ExitStack() as stack:
        data_dir = args.data_dir
        if data_dir is None and "HINDSIGHT_DATA_DIR" not in os.environ:
            # A fresh log per run: the benchmark must not see turns from an earlier run.
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="locomo-")))
        if data_dir is not None:
            settings = settings.with_overrides(data_dir=data_dir)
        results = asyncio.run(
            run_locomo(args.data, args.out, settings, methods, args.limit_conversations, args.folds)
        )
    print(render_summary(results))
    if "folds" in results:
        print(render_folds("LoCoMo per held-out conversation", results["folds"]))
    print(f"\n{TOKENIZER_NOTE}")
    print(f"wrote {args.out / 'results.json'} and {args.out / 'results.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
