"""Runner, baselines and report on a hand-made conversation (no broker, no model download)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.locomo.baselines import (
    BM25Retriever,
    DenseRetriever,
    english_stopwords,
    indexed_text,
    tokenize,
)
from bench.locomo.dataset import Conversation, parse_sample
from bench.locomo.metrics import METRIC_NAMES, RankedResult
from bench.locomo.report import render_markdown, render_summary
from bench.locomo.runner import HindsightRetriever, build_parser, evaluate, run_locomo
from pipeline.runtime.settings import Settings

SAMPLE = {
    "sample_id": "conv-t",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat named Miso."},
            {"speaker": "Bo", "dia_id": "D1:2", "text": "Lovely. I bought a red kayak."},
            {"speaker": "Ana", "dia_id": "D1:3", "text": "The weather is nice today."},
        ],
        "session_2_date_time": "9:05 am on 2 June, 2023",
        "session_2": [
            {"speaker": "Bo", "dia_id": "D2:1", "text": "Paddled the kayak on the lake."},
            {"speaker": "Ana", "dia_id": "D2:2", "text": "Miso the cat slept all day."},
        ],
    },
    "qa": [
        {
            "question": "What is the cat called?",
            "answer": "Miso",
            "evidence": ["D1:1"],
            "category": 4,
        },
        {"question": "kayak lake", "answer": "x", "evidence": ["D1:2; D2:1"], "category": 1},
        {"question": "A dog?", "adversarial_answer": "Rex", "evidence": ["D1:3"], "category": 5},
    ],
}


@pytest.fixture
def conversation() -> Conversation:
    return parse_sample(SAMPLE)


class FixedRetriever:
    name = "fixed"

    def __init__(self, ranked: list[str]) -> None:
        self.ranked = ranked
        self.calls: list[tuple[str, str, datetime]] = []

    async def prepare(self, conversations: Sequence[Conversation]) -> None:
        return None

    async def retrieve(self, namespace: str, question: str, at: datetime) -> RankedResult:
        self.calls.append((namespace, question, at))
        return RankedResult(self.ranked, "a b c")


async def test_evaluate_asks_every_question_after_the_last_session(
    conversation: Conversation,
) -> None:
    retriever = FixedRetriever(["D1:1", "D1:2", "D2:1"])
    scored, traces = await evaluate([conversation], retriever)
    assert [s.category for s in scored] == [4, 1, 5]
    assert scored[0].scores["recall_all@5"] == 1.0
    assert scored[1].scores["recall_all@5"] == 1.0
    assert scored[2].scores["recall_any@10"] == 0.0
    assert all(at == conversation.recall_at for _, _, at in retriever.calls)
    assert {ns for ns, _, _ in retriever.calls} == {"locomo-conv-t"}
    assert traces[1]["gold"] == ["D1:2", "D2:1"]


def test_tokenize_lowercase_words() -> None:
    assert tokenize("Miso's KAYAK, red!") == ["miso", "s", "kayak", "red"]
    assert tokenize("The red kayak", frozenset({"the"})) == ["red", "kayak"]


def test_baselines_index_the_speaker(conversation: Conversation) -> None:
    assert indexed_text(conversation.turns[0]) == "Ana: I adopted a cat named Miso."


async def test_bm25_finds_a_turn_by_its_speaker(conversation: Conversation) -> None:
    retriever = BM25Retriever(stopwords=english_stopwords(), name="bm25_stop")
    await retriever.prepare([conversation])
    result = await retriever.retrieve(
        conversation.namespace, "Did Bo paddle?", conversation.recall_at
    )
    assert retriever.name == "bm25_stop"
    assert result.dialogue_ids[0] in {"D1:2", "D2:1"}


async def test_bm25_ranks_the_matching_turn_first(conversation: Conversation) -> None:
    retriever = BM25Retriever()
    await retriever.prepare([conversation])
    result = await retriever.retrieve(conversation.namespace, "red kayak", conversation.recall_at)
    assert result.dialogue_ids[0] == "D1:2"
    assert sorted(result.dialogue_ids) == sorted(t.dia_id for t in conversation.turns)
    assert "Bo: Lovely. I bought a red kayak." in result.context_text


@dataclass
class KeywordEncoder:
    """A tiny deterministic encoder: one dimension per keyword."""

    keywords: tuple[str, ...] = ("cat", "kayak", "weather")
    name: str = "keywords"
    dimension: int = 3

    def encode(self, texts: list[str]) -> Any:
        rows = np.array(
            [[float(k in t.lower()) for k in self.keywords] for t in texts], dtype=np.float32
        ).reshape(len(texts), self.dimension)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return rows / np.maximum(norms, 1e-12)


async def test_dense_uses_cosine(conversation: Conversation) -> None:
    retriever = DenseRetriever(KeywordEncoder())
    await retriever.prepare([conversation])
    result = await retriever.retrieve(conversation.namespace, "weather?", conversation.recall_at)
    assert result.dialogue_ids[0] == "D1:3"


async def test_dense_encodes_known_questions_once(conversation: Conversation) -> None:
    encoder = KeywordEncoder()
    calls: list[int] = []
    original = encoder.encode

    def counting(texts: list[str]) -> Any:
        calls.append(len(texts))
        return original(texts)

    encoder.encode = counting  # type: ignore[method-assign]
    retriever = DenseRetriever(encoder)
    await retriever.prepare([conversation])
    before = len(calls)
    result = await retriever.retrieve(conversation.namespace, "kayak lake", conversation.recall_at)
    assert len(calls) == before
    assert result.dialogue_ids[0] in {"D1:2", "D2:1"}


@dataclass
class Source:
    event_id: str
    dialogue_id: str | None = None


@dataclass
class Memory:
    id: str
    content: str
    provenance: list[Source]
    score: float = 1.0


@dataclass
class Recall:
    memories: list[Memory]
    context: str = ""


@dataclass
class FakeClient:
    retained: list[dict[str, Any]] = field(default_factory=list)
    waited: list[Any] = field(default_factory=list)
    recalls: list[dict[str, Any]] = field(default_factory=list)

    async def retain(self, namespace: str, text: str, **kwargs: Any) -> str:
        self.retained.append({"namespace": namespace, "text": text, **kwargs})
        return f"receipt-{len(self.retained)}"

    async def wait_applied(self, receipt: Any, timeout: float) -> None:
        self.waited.append(receipt)

    async def recall(self, namespace: str, query: str, **kwargs: Any) -> Recall:
        self.recalls.append({"namespace": namespace, "query": query, **kwargs})
        big = Memory("m1", "one two", [Source(f"conv-t:D1:{i}", f"D1:{i}") for i in (1, 2, 3)])
        # Provenance without dialogue_id falls back to the deterministic event id.
        other = Memory("m2", "three", [Source("conv-t:D2:1"), Source("conv-t:D1:2")])
        return Recall([big, other])


async def test_hindsight_retriever_publishes_and_flattens(conversation: Conversation) -> None:
    client = FakeClient()
    retriever = HindsightRetriever(client)
    await retriever.prepare([conversation])
    assert len(client.retained) == 5
    first = client.retained[0]
    assert first["event_id"] == "conv-t:D1:1" and first["metadata"] == {"dia_id": "D1:1"}
    assert first["speaker"] == "Ana" and first["session_id"] == "session_1"
    times = [r["event_time"] for r in client.retained]
    assert times == sorted(times)
    assert client.waited == ["receipt-5"]
    result = await retriever.retrieve(conversation.namespace, "q", conversation.recall_at)
    assert result.dialogue_ids == ["D1:1", "D1:2", "D1:3", "D2:1"]
    assert result.context_text == "one two\nthree"
    call = client.recalls[0]
    assert call["reinforce"] is False and call["truncate"] is False
    assert call["at"] == conversation.recall_at


@dataclass
class BatchClient(FakeClient):
    batches: list[int] = field(default_factory=list)

    async def retain_many(self, turns: Sequence[dict[str, Any]]) -> list[str]:
        self.batches.append(len(turns))
        return [await self.retain(t["namespace"], t["text"]) for t in turns]


async def test_hindsight_retriever_prefers_retain_many(conversation: Conversation) -> None:
    client = BatchClient()
    await HindsightRetriever(client).prepare([conversation, conversation])
    assert client.batches == [5, 5]
    assert len(client.waited) == 2


async def test_run_locomo_writes_results(tmp_path: Path) -> None:
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps([SAMPLE]))
    results = await run_locomo(data, tmp_path / "out", Settings(), methods=("bm25",))
    written = json.loads((tmp_path / "out" / "results.json").read_text())
    assert written["methods"] == json.loads(json.dumps(results["methods"]))
    bm25 = written["methods"]["bm25"]
    assert set(bm25) == {"overall", "overall_excl_adversarial", "by_category"}
    assert set(bm25["by_category"]) == {"1", "4", "5"}
    assert set(bm25["overall"]) == {"n", *METRIC_NAMES}
    assert bm25["overall"]["n"] == 3 and bm25["overall_excl_adversarial"]["n"] == 2
    markdown = (tmp_path / "out" / "results.md").read_text()
    assert "| bm25 |" in markdown and "Category 1 (multi-hop)" in markdown
    assert (tmp_path / "out" / "questions.jsonl").read_text().count("\n") == 3


async def test_run_locomo_scores_each_conversation_as_a_held_out_fold(tmp_path: Path) -> None:
    data = tmp_path / "tiny.json"
    second = {**SAMPLE, "sample_id": "conv-2"}
    data.write_text(json.dumps([SAMPLE, second]))
    results = await run_locomo(data, tmp_path / "out", Settings(), methods=("bm25",), folds="loo")
    folds = json.loads((tmp_path / "out" / "folds.json").read_text())["bm25"]
    assert [fold["held_out"] for fold in folds["folds"]] == sorted([SAMPLE["sample_id"], "conv-2"])
    assert {"mean", "min", "spread", "per_category"} <= set(folds)
    assert results["folds"]["bm25"]["mean"] == folds["mean"]
    assert "held-out" in (tmp_path / "out" / "folds.md").read_text()


async def test_run_locomo_rejects_unknown_folds(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="folds"):
        await run_locomo(tmp_path / "x.json", tmp_path, Settings(), methods=("bm25",), folds="k5")


async def test_run_locomo_rejects_unknown_methods(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown method"):
        await run_locomo(tmp_path / "x.json", tmp_path, Settings(), methods=("nope",))


def test_report_side_by_side() -> None:
    block = {"n": 2, **{name: 0.5 for name in METRIC_NAMES}}
    method = {"overall": block, "overall_excl_adversarial": block, "by_category": {"2": block}}
    results = {"methods": {"hindsight": method, "bm25": method, "dense": method}}
    summary = render_summary(results)
    assert "| hindsight | 2 | 0.500 |" in summary
    assert "cat 2" in summary
    markdown = render_markdown(results)
    assert "| metric | hindsight | bm25 | dense |" in markdown
    assert "| recall_all@10 | 0.500 | 0.500 | 0.500 |" in markdown


def test_parser_defaults() -> None:
    args = build_parser().parse_args(["--data", "f.json"])
    assert args.methods == "hindsight,bm25,dense"
    assert args.out == Path("locomo-results")
