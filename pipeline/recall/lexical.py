"""Keyword recall: English + Chinese tokenisation and an incremental BM25 index keyed by memory id.

Why not ``bm25s`` for the index: it builds a static sparse matrix whose stored scores already fold
in N, avgdl and every idf, so one added, changed or erased memory means re-indexing the whole
namespace. The hot view changes with every state-topic record, so this is a small inverted index
that scores at query time instead: per term a growable numpy posting list (doc slots + term
frequencies), per document its term ids (for update/removal). Scoring touches only the query's
postings and is vectorised per term; idf and avgdl are always current.

Tokenisation: ASCII runs are lower-cased words (identifiers such as ``sf123456`` stay whole),
stemmed with Snowball English via PyStemmer when installed (C, ~0.2 µs a word; maps
deploy/deployed/deployment to one stem) and otherwise with a light suffix stripper; CJK runs go
through jieba's search mode (overlapping words, so 数据库 also yields 数据). Stopwords: bm25s's
English list plus a short Chinese list of function words (bm25s's Chinese list drops content words
such as 决定/使用 that memories need).
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jieba
import numpy as np
import numpy.typing as npt
from bm25s.stopwords import STOPWORDS_EN_PLUS

jieba.setLogLevel(logging.WARNING)  # jieba logs its dictionary build at INFO on first use

ENGLISH_STOPWORDS: frozenset[str] = frozenset(STOPWORDS_EN_PLUS) | {
    "also",
    "could",
    "would",
    "may",
    "might",
    "must",
    "shall",
    "us",
    "let",
    "get",
    "got",
}
# Function words only (see the module docstring for why not bm25s's list).
_CHINESE_STOPWORD_TEXT = (
    "的 了 着 过 是 在 和 与 及 或 也 都 就 还 又 而 但 吗 呢 吧 啊 呀 哦 嗯 么 之 其 "
    "这 那 这个 那个 这些 那些 这样 那样 我 你 他 她 它 我们 你们 他们 她们 咱们 自己 "
    "一个 一些 一下 有 没 没有 不 很 太 把 被 给 让 从 对 向 为 为了 以 于 上 下 中 里 "
    "什么 怎么 怎样 如何 哪 哪个 哪些 哪里 为什么 多少 几 请 要 想 会 能 可以 "
    "说 问 告诉 一 个 些 啥 嘛 的话 时候 啥时候"
)
CHINESE_STOPWORDS: frozenset[str] = frozenset(_CHINESE_STOPWORD_TEXT.split())

_RUN = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def _light_stem(word: str) -> str:
    """A conservative S-stemmer plus -ing/-ed, used only when PyStemmer is not installed."""
    if len(word) <= 3 or any(char.isdigit() for char in word):
        return word
    for suffix, replacement in (
        ("ies", "y"),
        ("sses", "ss"),
        ("ing", ""),
        ("ed", ""),
        ("es", ""),
        ("s", ""),
    ):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                return word
            return word[: len(word) - len(suffix)] + replacement
    return word


def _load_stemmer() -> tuple[str, Callable[[str], str]]:
    try:
        import Stemmer  # PyStemmer: Snowball algorithms in C
    except ImportError:
        return "light", _light_stem
    snowball = Stemmer.Stemmer("english")
    return "snowball", snowball.stemWord


STEMMER_NAME, _stem_word = _load_stemmer()


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    # Identifiers (anything with a digit) are matched verbatim.
    if any(char.isdigit() for char in word):
        return word
    return _stem_word(word)


def is_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


def cjk_share(text: str) -> float:
    """Fraction of non-space characters that are CJK (used to pick a display language)."""
    chars = [char for char in text if not char.isspace()]
    return sum(1 for char in chars if _CJK.match(char)) / len(chars) if chars else 0.0


def tokenize(text: str) -> list[str]:
    """Index/query terms for ``text``: stemmed English words and jieba search-mode Chinese words."""
    tokens: list[str] = []
    for run in _RUN.findall(text):
        if _CJK.match(run):
            for word in jieba.cut_for_search(run):
                if word.strip() and word not in CHINESE_STOPWORDS:
                    tokens.append(word)
        else:
            word = run.lower().replace("’", "'")
            if word in ENGLISH_STOPWORDS:
                continue
            word = word.split("'", 1)[0]  # "user's" → "user"
            if word and word not in ENGLISH_STOPWORDS:
                tokens.append(stem(word))
    return tokens


def search_terms(text: str) -> list[str]:
    """BM25 terms for ``text``: ``tokenize``'s words plus every Chinese character on its own.

    Chinese compounds share their head morphemes (水果/芒果, 存/存进, 姨/小姨/大姨), and jieba's
    dictionary decides alone whether a query word and a memory word are the same token: "存"
    never matched "存进", "水果" never matched "芒果". Characters as terms of their own (as in
    character-n-gram retrieval for Chinese) let such words meet part-way, while idf keeps common
    characters cheap and the whole word still scores above its parts. Function characters (的, 了,
    我 …, the single-character stopwords) are left out as words are.
    """
    terms = tokenize(text)
    for run in _CJK_RUN.findall(text):
        for word in jieba.cut(run):
            # A one-character word is already a term of its own; a function word has no parts.
            if len(word) > 1 and word not in CHINESE_STOPWORDS:
                terms.extend(char for char in word if char not in CHINESE_STOPWORDS)
    return terms


# ---------- incremental BM25 ----------

IntArray = npt.NDArray[np.int32]
FloatArray = npt.NDArray[np.float32]


class _Postings:
    """One term's posting list: parallel growable arrays, swap-remove on delete."""

    __slots__ = ("docs", "size", "tfs")

    def __init__(self) -> None:
        self.docs: IntArray = np.empty(4, dtype=np.int32)
        self.tfs: FloatArray = np.empty(4, dtype=np.float32)
        self.size = 0

    def append(self, slot: int, tf: float) -> None:
        if self.size == len(self.docs):
            self.docs = np.resize(self.docs, 2 * self.size)
            self.tfs = np.resize(self.tfs, 2 * self.size)
        self.docs[self.size] = slot
        self.tfs[self.size] = tf
        self.size += 1

    def remove(self, slot: int) -> None:
        hits = np.flatnonzero(self.docs[: self.size] == slot)
        if hits.size == 0:
            return
        position = int(hits[0])
        last = self.size - 1
        self.docs[position] = self.docs[last]
        self.tfs[position] = self.tfs[last]
        self.size = last


@dataclass(frozen=True)
class LexicalHit:
    memory_id: str
    score: float
    # Share of the query's idf mass present in the document, in [0, 1]: a length-free measure
    # of how much of the query a memory covers (BM25 scores are not comparable across queries).
    coverage: float


class BM25Index:
    """Incremental Okapi BM25 (Lucene idf) over documents keyed by memory id."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._vocab: dict[str, int] = {}
        self._postings: list[_Postings] = []
        self._slot_of: dict[str, int] = {}
        self._ids: list[str | None] = []
        self._free: list[int] = []
        self._doc_terms: list[IntArray | None] = []
        self._doc_len: FloatArray = np.zeros(16, dtype=np.float32)
        self._total_len = 0.0

    def __len__(self) -> int:
        return len(self._slot_of)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._slot_of

    def add(self, memory_id: str, tokens: Iterable[str]) -> None:
        """Insert or replace ``memory_id``'s document."""
        if memory_id in self._slot_of:
            self.remove(memory_id)
        counts = Counter(tokens)
        slot = self._free.pop() if self._free else len(self._ids)
        if slot == len(self._ids):
            self._ids.append(None)
            self._doc_terms.append(None)
            if slot >= len(self._doc_len):
                self._doc_len = np.resize(self._doc_len, 2 * len(self._doc_len))
        term_ids = np.empty(len(counts), dtype=np.int32)
        for position, (term, tf) in enumerate(counts.items()):
            term_id = self._vocab.get(term)
            if term_id is None:
                term_id = self._vocab[term] = len(self._postings)
                self._postings.append(_Postings())
            self._postings[term_id].append(slot, float(tf))
            term_ids[position] = term_id
        length = float(sum(counts.values()))
        self._ids[slot] = memory_id
        self._doc_terms[slot] = term_ids
        self._doc_len[slot] = length
        self._total_len += length
        self._slot_of[memory_id] = slot

    def remove(self, memory_id: str) -> bool:
        slot = self._slot_of.pop(memory_id, None)
        if slot is None:
            return False
        term_ids = self._doc_terms[slot]
        if term_ids is not None:
            for term_id in term_ids.tolist():
                self._postings[term_id].remove(slot)
        self._total_len -= float(self._doc_len[slot])
        self._doc_len[slot] = 0.0
        self._ids[slot] = None
        self._doc_terms[slot] = None
        self._free.append(slot)
        return True

    def search(
        self,
        tokens: Iterable[str],
        k: int,
        accept: Callable[[str], bool] | None = None,
    ) -> list[LexicalHit]:
        """Top ``k`` documents for the query terms, best first; ``accept`` filters by id.

        Coverage: a term no live document has still counts against it, at the idf of df = 0 —
        except a Chinese character of a longer query word (``search_terms``): that word counts
        as missing already, and its characters would count it again ("现在住在哪个城市" against
        "我住在杭州": 现, 城, 市 are in no memory).
        """
        live = len(self._slot_of)
        query_terms = set(tokens)
        if not live or not query_terms or k <= 0:
            return []
        avgdl = self._total_len / live if self._total_len > 0 else 1.0
        unseen_idf = math.log(1.0 + (live + 0.5) / 0.5)
        parts = {
            char for word in query_terms if len(word) > 1 and _CJK.match(word) for char in word
        }
        idf_total = 0.0
        slot_parts: list[IntArray] = []
        score_parts: list[npt.NDArray[np.floating[Any]]] = []
        mass_parts: list[npt.NDArray[np.floating[Any]]] = []
        for term in sorted(query_terms):
            term_id = self._vocab.get(term)
            df = self._postings[term_id].size if term_id is not None else 0
            if term_id is None or df == 0:
                if term not in parts:
                    idf_total += unseen_idf
                continue
            postings = self._postings[term_id]
            idf = math.log(1.0 + (live - df + 0.5) / (df + 0.5))
            idf_total += idf
            docs = postings.docs[:df]
            tfs = postings.tfs[:df]
            norm = self.k1 * (1.0 - self.b + self.b * self._doc_len[docs] / avgdl)
            slot_parts.append(docs)
            score_parts.append(idf * tfs * (self.k1 + 1.0) / (tfs + norm))
            mass_parts.append(np.full(df, idf, dtype=np.float32))
        if not slot_parts:
            return []
        all_slots = np.concatenate(slot_parts)
        # Sum per document over the touched postings only: cost follows the query's postings,
        # not the namespace size.
        slots, inverse = np.unique(all_slots, return_inverse=True)
        scores = np.bincount(inverse, weights=np.concatenate(score_parts), minlength=slots.size)
        mass = np.bincount(inverse, weights=np.concatenate(mass_parts), minlength=slots.size)
        touched = int(slots.size)
        hits: list[LexicalHit] = []
        want = min(touched, max(k * 2, 16))
        seen = 0
        while seen < touched and len(hits) < k:
            # Widen the partial sort only when the filter rejected too many.
            want = min(touched, max(want, seen + k))
            top = (
                np.argpartition(-scores, want - 1)[:want] if want < touched else np.arange(touched)
            )
            order = top[np.lexsort((slots[top], -scores[top]))]
            for position in order[seen:want].tolist():
                memory_id = self._ids[int(slots[position])]
                if memory_id is None:
                    continue
                if accept is None or accept(memory_id):
                    coverage = min(1.0, float(mass[position]) / idf_total)
                    hits.append(LexicalHit(memory_id, float(scores[position]), coverage))
                    if len(hits) == k:
                        break
            seen = want
            want *= 2
        return hits
