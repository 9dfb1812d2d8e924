"""Exact-entity recall: identifiers and names in a query matched against memories' entities.

Dense vectors blur "SF123456" into "some order number"; this path finds it verbatim. Memories
are indexed by their ``entities`` list plus any identifier the same extractor finds in their
content (so an id the extractor stage missed is still exact-matchable).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pipeline.recall.lexical import ENGLISH_STOPWORDS

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
    """Normalised entity → memory ids, with each memory's keys kept for updates and erasure."""

    def __init__(self) -> None:
        self._by_key: dict[str, set[str]] = {}
        self._keys_of: dict[str, frozenset[str]] = {}

    def __len__(self) -> int:
        return len(self._keys_of)

    def add(self, memory_id: str, entities: Iterable[str], content: str = "") -> None:
        keys = {normalise(entity) for entity in entities}
        keys |= {normalise(identifier) for identifier in extract_identifiers(content)}
        keys.discard("")
        if self._keys_of.get(memory_id) == keys:
            return
        self.remove(memory_id)
        self._keys_of[memory_id] = frozenset(keys)
        for key in keys:
            self._by_key.setdefault(key, set()).add(memory_id)

    def remove(self, memory_id: str) -> bool:
        keys = self._keys_of.pop(memory_id, None)
        if keys is None:
            return False
        for key in keys:
            ids = self._by_key.get(key)
            if ids is not None:
                ids.discard(memory_id)
                if not ids:
                    del self._by_key[key]
        return True

    def search(
        self, query: str, k: int, accept: Callable[[str], bool] | None = None
    ) -> list[EntityHit]:
        """Memories sharing entities with the query, by summed evidence, then id."""
        scores: dict[str, float] = {}
        matched: dict[str, list[str]] = {}
        for entity in query_entities(query):
            for memory_id in self._by_key.get(entity.key, ()):
                if accept is not None and not accept(memory_id):
                    continue
                scores[memory_id] = scores.get(memory_id, 0.0) + entity.strength
                matched.setdefault(memory_id, []).append(entity.text)
        ranked = sorted(scores, key=lambda memory_id: (-scores[memory_id], memory_id))[:k]
        return [EntityHit(i, scores[i], tuple(matched[i])) for i in ranked]
