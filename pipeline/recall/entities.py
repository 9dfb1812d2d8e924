"""Exact-entity recall: identifiers and names in a query matched against memories' entities.

Dense vectors blur "SF123456" into "some order number"; this path finds it verbatim. Memories
are indexed by their ``entities`` list plus any identifier the same extractor finds in their
content (so an id the extractor stage missed is still exact-matchable).
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from pipeline.recall.lexical import ENGLISH_STOPWORDS, _Postings

# ASCII look-arounds instead of \b: in Python \w includes CJK, so "订单SF123456" has no \b.
_A = r"(?<![A-Za-z0-9_@.\-])"
_Z = r"(?![A-Za-z0-9_@\-]|\.[A-Za-z0-9])"
_IDENTIFIER_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(_A + r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+" + _Z),  # email
    re.compile(_A + r"[A-Z][A-Z0-9]{1,9}-\d+" + _Z),  # ticket: JIRA-123, INC-42
    re.compile(r"(?<![\w#])#\d{2,}" + _Z),  # issue: #4521
    re.compile(_A + r"v?\d+(?:\.\d+){1,3}(?:-[A-Za-z0-9.]+)?" + _Z),  # version: v1.2.3, 3.11
    # Order/account/build ids: letters and digits mixed, e.g. SF123456, ab12cd34, 2fa9e1c.
    re.compile(_A + r"(?=[A-Za-z0-9_]*\d)(?=[A-Za-z0-9_]*[A-Za-z])[A-Za-z0-9_]{5,}" + _Z),
    re.compile(_A + r"\d{6,}" + _Z),  # long bare numbers (order/phone)
)
_CAPITALISED = re.compile(r"(?<![A-Za-z0-9])[A-Z][A-Za-z0-9+#]*(?:[ \-][A-Z][A-Za-z0-9+#]*)*")
_ASCII_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9+#.\-]*[A-Za-z0-9+#]|[A-Za-z0-9]")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{2,}")

STRONG = 1.0  # a verbatim identifier
NAME = 0.8  # a capitalised name or multi-word phrase
WEAK = 0.6  # a single lower-case word or Chinese substring that equals an entity


def normalise(entity: str) -> str:
    return " ".join(entity.casefold().strip(" \t\n.,;:!?\"'()[]{}<>").split())


def extract_identifiers(text: str) -> list[str]:
    """Identifiers (emails, ticket ids, versions, order numbers) in order of appearance."""
    found: dict[str, int] = {}
    for pattern in _IDENTIFIER_PATTERNS:
        for match in pattern.finditer(text):
            found.setdefault(match.group(0), match.start())
    return sorted(found, key=lambda item: found[item])


@dataclass(frozen=True)
class QueryEntity:
    key: str  # normalised
    text: str
    strength: float


def query_entities(query: str) -> list[QueryEntity]:
    """Candidate entity keys in a query, strongest evidence per key."""
    best: dict[str, QueryEntity] = {}

    def offer(text: str, strength: float) -> None:
        key = normalise(text)
        if len(key) < 2 or key in ENGLISH_STOPWORDS:
            return
        if key not in best or best[key].strength < strength:
            best[key] = QueryEntity(key, text, strength)

    for identifier in extract_identifiers(query):
        offer(identifier, STRONG)
    for match in _CAPITALISED.finditer(query):
        words = match.group(0).split()
        # Sentence-initial question words are capitalised but are not names.
        while words and normalise(words[0]) in ENGLISH_STOPWORDS:
            words = words[1:]
        if words:
            offer(" ".join(words), NAME)
    words = _ASCII_WORD.findall(query)
    for size in (3, 2, 1):
        for start in range(len(words) - size + 1):
            offer(" ".join(words[start : start + size]), NAME if size > 1 else WEAK)
    for run in _CJK_RUN.findall(query):
        for size in range(min(len(run), 12), 1, -1):
            for start in range(len(run) - size + 1):
                offer(run[start : start + size], WEAK)
    return list(best.values())


@dataclass(frozen=True)
class EntityHit:
    memory_id: str
    score: float
    matched: tuple[str, ...]


class EntityIndex:
    """Normalised entity → memories, with each memory's keys kept for updates and erasure.

    Postings are numpy arrays of document numbers (like ``BM25Index``), so a query whose entity
    is shared by thousands of memories ("Alice" in a big namespace) is scored by one ``bincount``
    instead of a Python loop over every memory that mentions it.
    """

    def __init__(self) -> None:
        self._by_key: dict[str, _Postings] = {}
        self._keys_of: dict[str, frozenset[str]] = {}
        self._doc_of: dict[str, int] = {}
        self._ids: list[str | None] = []
        self._free: list[int] = []

    def __len__(self) -> int:
        return len(self._keys_of)

    def add(self, memory_id: str, entities: Iterable[str], content: str = "") -> None:
        keys = {normalise(entity) for entity in entities}
        keys |= {normalise(identifier) for identifier in extract_identifiers(content)}
        keys.discard("")
        if self._keys_of.get(memory_id) == keys:
            return
        self.remove(memory_id)
        doc = self._free.pop() if self._free else len(self._ids)
        if doc == len(self._ids):
            self._ids.append(None)
        self._ids[doc] = memory_id
        self._doc_of[memory_id] = doc
        self._keys_of[memory_id] = frozenset(keys)
        for key in keys:
            postings = self._by_key.get(key)
            if postings is None:
                postings = self._by_key[key] = _Postings()
            postings.append(doc, 1.0)

    def remove(self, memory_id: str) -> bool:
        keys = self._keys_of.pop(memory_id, None)
        if keys is None:
            return False
        doc = self._doc_of.pop(memory_id)
        for key in keys:
            postings = self._by_key.get(key)
            if postings is not None:
                postings.remove(doc)
                if not postings.size:
                    del self._by_key[key]
        self._ids[doc] = None
        self._free.append(doc)
        return True

    def keys_of(self, memory_id: str) -> frozenset[str]:
        """The normalised entity keys a memory is indexed under."""
        return self._keys_of.get(memory_id, frozenset())

    def holders(self, key: str) -> list[str]:
        """Ids of the memories that carry the entity ``key``."""
        postings = self._by_key.get(key)
        if postings is None:
            return []
        return [self._ids[doc] or "" for doc in postings.docs[: postings.size].tolist()]

    def specificity_of(self, key: str) -> float:
        postings = self._by_key.get(key)
        return specificity(postings.size if postings else 0, len(self._keys_of))

    def search(
        self, query: str, k: int, accept: Callable[[str], bool] | None = None
    ) -> list[EntityHit]:
        """Memories sharing entities with the query, by summed evidence (strength ×
        ``specificity``), then id."""
        found = [entity for entity in query_entities(query) if entity.key in self._by_key]
        if not found or k <= 0:
            return []
        postings = [self._by_key[entity.key] for entity in found]
        docs = np.concatenate([p.docs[: p.size] for p in postings])
        strengths = np.concatenate(
            [
                np.full(p.size, entity.strength * specificity(p.size, len(self._keys_of)))
                for p, entity in zip(postings, found, strict=True)
            ]
        )
        # bincount adds each document's strengths in query-entity order, as a loop would.
        touched, inverse = np.unique(docs, return_inverse=True)
        scores = np.bincount(inverse, weights=strengths, minlength=touched.size)
        hits: list[EntityHit] = []
        # Best score level first; inside a level, ids in order (only the head is sorted fully).
        for level in np.unique(scores)[::-1].tolist():
            ids = [self._ids[doc] or "" for doc in touched[scores == level].tolist()]
            for memory_id in _ascending(ids, 4 * (k - len(hits))):
                if accept is not None and not accept(memory_id):
                    continue
                keys = self._keys_of[memory_id]
                matched = tuple(entity.text for entity in found if entity.key in keys)
                hits.append(EntityHit(memory_id, level, matched))
                if len(hits) == k:
                    return hits
        return hits


def specificity(frequency: int, total: int) -> float:
    """How much matching an entity says about one memory: 1 for an entity only one memory has,
    falling (idf-like, log(1 + N/df) / log(1 + N)) as more of the namespace shares it.

    A speaker's name that half of a conversation mentions ("Caroline") is no evidence for any one
    turn; an order number or a name mentioned once is. Without this, every memory naming a
    person tied at full name strength and the entity path ranked them by memory id.
    """
    if total <= 1 or frequency <= 1:
        return 1.0
    return math.log1p(total / frequency) / math.log1p(total)


def _ascending(ids: list[str], head: int) -> Iterator[str]:
    """``ids`` in order; a long list sorts only its first ``head`` unless more are read."""
    if len(ids) <= 2 * head:
        yield from sorted(ids)
        return
    first = heapq.nsmallest(head, ids)
    yield from first
    yield from sorted(ids)[head:]
