"""Reference retrievers over the raw turns: BM25 (the dataset README's reference) and dense top-k.

Both see exactly the turns Hindsight receives (same text, captions included) and answer through
the same ``Retriever`` protocol, so the runner scores all methods with one code path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from bench.locomo.dataset import Conversation, LocomoTurn
from bench.locomo.metrics import CONTEXT_K, RankedResult
from pipeline.models.encoders import Encoder

# Deep enough for the session metric (top sessions by first appearance) and every k we report.
DEFAULT_DEPTH = 50

_WORD = re.compile(r"\w+")


class Retriever(Protocol):
    name: str

    async def prepare(self, conversations: Sequence[Conversation]) -> None:
        """Make every conversation's turns searchable (index them, or publish and wait)."""
        ...

    async def retrieve(self, namespace: str, question: str, at: datetime) -> RankedResult: ...


def tokenize(text: str, stopwords: frozenset[str] = frozenset()) -> list[str]:
    """Lowercase word tokens, as in the README's reference BM25 (optionally without stopwords)."""
    return [word for word in _WORD.findall(text.lower()) if word not in stopwords]


def indexed_text(turn: LocomoTurn) -> str:
    """What a baseline indexes for a turn: the speaker and the text, as Hindsight receives them.

    Questions name the speakers ("When did Caroline ...") while turns rarely name their own
    speaker, so dropping the speaker would handicap the baselines (dense recall_all@10 falls from
    about 0.45 to 0.27 on the dev slice).
    """
    return f"{turn.speaker}: {turn.text}"


def english_stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN_PLUS

    return frozenset(STOPWORDS_EN_PLUS)


def context_of(turns: Sequence[LocomoTurn]) -> str:
    return "\n".join(indexed_text(turn) for turn in turns[:CONTEXT_K])


def _ranked(turns: Sequence[LocomoTurn], scores: np.ndarray, depth: int) -> RankedResult:
    # Stable sort: ties keep dialogue order, so runs are reproducible.
    order = np.argsort(-scores, kind="stable")[:depth]
    chosen = [turns[int(i)] for i in order]
    return RankedResult([turn.dia_id for turn in chosen], context_of(chosen))


@dataclass
class _Index:
    turns: tuple[LocomoTurn, ...]
    model: Any


class BM25Retriever:
    """rank_bm25's BM25Okapi over one conversation's turns, the question as the query.

    With ``stopwords`` (method ``bm25_stop``) the same tokens minus English stopwords: a stronger
    lexical baseline than the README's reference, kept as an option to bound Hindsight's BM25 path.
    """

    def __init__(
        self,
        depth: int = DEFAULT_DEPTH,
        stopwords: frozenset[str] = frozenset(),
        name: str = "bm25",
    ) -> None:
        self.name = name
        self._depth = depth
        self._stopwords = stopwords
        self._indexes: dict[str, _Index] = {}

    async def prepare(self, conversations: Sequence[Conversation]) -> None:
        try:
            from rank_bm25 import BM25Okapi
        except ImportError as error:  # rank-bm25 is a test/bench extra, not a runtime dependency
            raise RuntimeError(
                "the bm25 baseline needs rank-bm25 (pip install rank-bm25)"
            ) from error
        for conversation in conversations:
            corpus = [tokenize(indexed_text(t), self._stopwords) for t in conversation.turns]
            self._indexes[conversation.namespace] = _Index(conversation.turns, BM25Okapi(corpus))

    async def retrieve(self, namespace: str, question: str, at: datetime) -> RankedResult:
        index = self._indexes[namespace]
        query = tokenize(question, self._stopwords)
        scores = np.asarray(index.model.get_scores(query), dtype=np.float64)
        return _ranked(index.turns, scores, self._depth)


class DenseRetriever:
    """Cosine top-k over turn embeddings from the encoder Hindsight uses."""

    name = "dense"

    def __init__(self, encoder: Encoder, depth: int = DEFAULT_DEPTH, batch: int = 256) -> None:
        self._encoder = encoder
        self._depth = depth
        self._batch = batch
        self._indexes: dict[str, _Index] = {}
        self._queries: dict[str, np.ndarray] = {}

    async def prepare(self, conversations: Sequence[Conversation]) -> None:
        from tqdm import tqdm

        total = sum(len(c.turns) for c in conversations)
        with tqdm(total=total, desc="dense: encode turns", unit="turn") as bar:
            for conversation in conversations:
                texts = [indexed_text(turn) for turn in conversation.turns]
                parts = []
                for start in range(0, len(texts), self._batch):
                    parts.append(self._encoder.encode(texts[start : start + self._batch]))
                    bar.update(len(parts[-1]))
                self._indexes[conversation.namespace] = _Index(
                    conversation.turns, np.concatenate(parts)
                )
        # Questions are known up front: one batched encode beats a thousand single calls.
        questions = list(dict.fromkeys(q.question for c in conversations for q in c.questions))
        for start in range(0, len(questions), self._batch):
            batch = questions[start : start + self._batch]
            self._queries.update(zip(batch, self._encoder.encode(batch), strict=True))

    async def retrieve(self, namespace: str, question: str, at: datetime) -> RankedResult:
        index = self._indexes[namespace]
        query = self._queries.get(question)
        if query is None:
            query = self._encoder.encode([question])[0]
        scores = np.asarray(index.model @ query, dtype=np.float64)  # unit vectors: dot = cosine
        return _ranked(index.turns, scores, self._depth)
