"""The learned turn classifier: remember or not, and as what kind, from a turn's embedding.

A multinomial logistic regression (see ``training/turn_classifier/RESULTS.md``) trained by
``python -m training.turn_classifier.train`` on the team's labelled corpus and shipped as a
versioned file pair under ``weights/``: the arrays (``<id>.npz``) and a manifest (``<id>.json``:
model id, the encoder it was trained on, the feature spec, the labels, the corpus hash, the library
versions, the arrays' sha256). It runs on numpy alone; the runtime never imports the training
library.

Its input is the vector the index gets anyway (the encoder's embedding of the turn's search text,
so ``prepare`` still makes one encoder call per batch), from v3 on a second, multilingual vector
of the same text (USE, which the classifier computes itself for the turns it judges: the English
MiniLM vector says little about Chinese), a few lexical features of the turn text
(length, script shares, question and exclamation marks, digits, first and second person markers)
and hashed character and word n-grams of it. The same text and vector give the same answer bit for
bit, whatever batch they come in; replay never runs it anyway, since the prepared event records
what it decided (I2).

The model is tied to the encoder it was trained on: vectors from another model mean nothing to
it, and :func:`classifier_for` says so by returning ``None`` (the rules decide instead).
"""

from __future__ import annotations

import copy
import logging
import re
import unicodedata
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import jieba
import numpy as np
import numpy.typing as npt

from pipeline.memory.rules.text import cjk_ratio, without_emoji
from pipeline.models.encoders import (
    Encoder,
    EncoderMismatch,
    EncoderUnavailable,
    VectorMemo,
    Vectors,
    encode_one_at_a_time_once,
    load_encoder_of,
)
from pipeline.models.trained_files import load_trained_file, manifest_field, shaped_arrays
from schemas.errors import HindsightError
from schemas.memory import Kind

log = logging.getLogger("hindsight.classifier")
jieba.setLogLevel(logging.WARNING)  # jieba logs its dictionary build at INFO on first use

WEIGHTS_DIR = Path(__file__).with_name("weights")
DEFAULT_MODEL = "turn-classifier-v5"

Array = npt.NDArray[np.float64]
ClassifierMode = Literal["learned", "gate"]
# The id of the gate names the rules first: they decide, the model only filters. The gate's own
# version follows, so that a prepared event says which of its rules (``prepare.GATE_*``) judged
# it: "gate-v2" since 2026-12-03 (bound 0.19, over the rules' kind patterns too, near-certain
# requests, greetings and thanks of 11-15 words); "gate-v3" since 2026-12-03, late (short turns the
# model calls a greeting, thanks or a question filtered up to its own threshold); "gate-v4" since
# 2026-12-04 (the model reads a turn without its emoji: ``text.without_emoji``); events prepared
# before say "rules-v1+gate:".
GATE_PREFIX = "rules-v1+gate-v4:"

# The corpus' labels and the memory kind each becomes. The five non-memory labels are never
# remembered; they keep the chit-chat kind (and its importance) on the analysis.
NON_MEMORY_LABELS: tuple[str, ...] = ("small_talk", "filler", "greeting", "thanks", "question")
LABEL_KIND: dict[str, Kind] = {
    "small_talk": "chit_chat",
    "filler": "chit_chat",
    "greeting": "chit_chat",
    "thanks": "chit_chat",
    "question": "chit_chat",
    "preference": "preference",
    "fact": "fact",
    "task_state": "task_state",
    "procedure": "procedure",
    "decision": "decision",
    "emotion": "emotion",
}

# -- lexical features ------------------------------------------------------------------------
# Grammar, not vocabulary: pronouns are a closed class, the rest is counting characters.
_LATIN_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
_CJK_CHAR = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_DIGIT = re.compile(r"\d")
_FIRST_PERSON_EN = re.compile(
    r"\b(i|i'm|im|i've|ive|i'd|i'll|me|my|mine|myself|we|we're|we've|we'll|us|our|ours)\b", re.I
)
_SECOND_PERSON_EN = re.compile(r"\b(you|you're|youre|you've|you'll|your|yours|u|ur)\b", re.I)
_FIRST_PERSON_ZH = re.compile(r"[我咱俺]")
_SECOND_PERSON_ZH = re.compile(r"[你您]")
_CODE_LIKE = re.compile(r"[`=<>{}\[\]|\\$#]|\w[./_]\w|--")
_SENTENCE_END = re.compile(r"[.!?。！？；;]+")

LEXICAL_FEATURES: tuple[str, ...] = (
    "log_chars",
    "log_tokens",
    "cjk_share",
    "latin_share",
    "digit_share",
    "has_digit",
    "has_question_mark",
    "ends_with_question_mark",
    "has_exclamation",
    "first_person_en",
    "first_person_zh",
    "second_person_en",
    "second_person_zh",
    "has_symbol_or_emoji",
    "code_like",
    "log_sentences",
)


def lexical_features(text: str) -> Array:
    """The cheap features of a turn's text, in :data:`LEXICAL_FEATURES` order (unscaled; emoji
    left out, as the encoders see the text: ``without_emoji``)."""
    folded = unicodedata.normalize("NFKC", without_emoji(text)).strip()
    chars = [ch for ch in folded if not ch.isspace()]
    n_chars = len(chars)
    latin_words = _LATIN_WORD.findall(folded)
    cjk_chars = _CJK_CHAR.findall(folded)
    digits = _DIGIT.findall(folded)
    latin_letters = sum(1 for ch in chars if ch.isascii() and ch.isalpha())
    sentences = [part for part in _SENTENCE_END.split(folded) if part.strip()]
    values = [
        np.log1p(n_chars),
        np.log1p(len(latin_words) + len(cjk_chars) + len(re.findall(r"\d+", folded))),
        cjk_ratio(folded),
        latin_letters / n_chars if n_chars else 0.0,
        len(digits) / n_chars if n_chars else 0.0,
        1.0 if digits else 0.0,
        1.0 if "?" in folded else 0.0,
        1.0 if folded.rstrip(" .~…").endswith("?") else 0.0,
        1.0 if "!" in folded else 0.0,
        1.0 if _FIRST_PERSON_EN.search(folded) else 0.0,
        1.0 if _FIRST_PERSON_ZH.search(folded) else 0.0,
        1.0 if _SECOND_PERSON_EN.search(folded) else 0.0,
        1.0 if _SECOND_PERSON_ZH.search(folded) else 0.0,
        1.0 if any(unicodedata.category(ch) in {"So", "Sk", "Cs"} for ch in folded) else 0.0,
        1.0 if _CODE_LIKE.search(folded) else 0.0,
        np.log1p(len(sentences)),
    ]
    return np.asarray(values, dtype=np.float64)


# -- hashed character and word n-grams ---------------------------------------------------------
# Learned from the corpus like any bag-of-words model: no list is written by hand. Character
# 1-3-grams carry Chinese (where the English encoder is weak) and misspellings; jieba's words
# carry whole words in both languages. crc32 keeps the buckets the same in every process.
_SPACES = re.compile(r"\s+")
_WORDLIKE = re.compile(r"\w")
CHAR_NGRAMS = 3


def gram_features(text: str, buckets: int) -> tuple[npt.NDArray[np.int64], Array]:
    """Bucket indices and weights (log counts, unit norm) of a text's hashed n-grams (emoji
    left out: ``without_emoji``)."""
    folded = _SPACES.sub(" ", unicodedata.normalize("NFKC", without_emoji(text)).casefold()).strip()
    counts: dict[int, int] = {}

    def add(key: str) -> None:
        bucket = zlib.crc32(key.encode("utf-8")) % buckets
        counts[bucket] = counts.get(bucket, 0) + 1

    padded = f" {folded} "
    for n in range(1, CHAR_NGRAMS + 1):
        for start in range(len(padded) - n + 1):
            gram = padded[start : start + n]
            if gram.strip():
                add(f"c{n}:{gram}")
    for word in jieba.lcut(folded):
        if word.strip() and _WORDLIKE.search(word):
            add(f"w:{word}")
    if not counts:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    indices = np.fromiter(sorted(counts), dtype=np.int64)
    values = np.log1p(np.asarray([counts[int(i)] for i in indices], dtype=np.float64))
    return indices, values / np.linalg.norm(values)


# -- the model -------------------------------------------------------------------------------
class ClassifierFileError(HindsightError):
    """A weights file or manifest that does not load or does not match; names the field."""


@dataclass(frozen=True)
class TurnVerdict:
    """What the classifier made of one turn."""

    remember: bool
    label: str  # the most probable corpus label among those the filter decision allows
    kind: Kind
    confidence: float  # that label's probability
    keep_probability: float  # the probability mass on the memory labels

    @property
    def reason(self) -> str:
        return f"learned: {self.label} {self.confidence:.2f} (keep {self.keep_probability:.2f})"


class TurnClassifier:
    """A loaded classifier file: multinomial logistic regression over three feature blocks.

    logits = [vector, scaled lexical] · W_dense + Σ gram weight · W_grams[bucket] + bias
    """

    def __init__(self, manifest: dict[str, Any], arrays: dict[str, Array]) -> None:
        self.manifest = manifest
        self.id: str = _field(manifest, "model_id", str)
        self.encoder_id: str = _field(manifest, "encoder_id", str)
        self.encoder_name: str = _field(manifest, "encoder_name", str)
        self.dimension: int = _field(manifest, "embedding_dimension", int)
        # From v3 on, a second (multilingual) vector of the same search text follows the first;
        # the classifier embeds it itself (:meth:`input_vectors`), one turn at a time.
        second = manifest.get("second_encoder")
        if second is not None and not isinstance(second, dict):
            raise ClassifierFileError(f"second_encoder: expected an object, got {second!r}")
        self.second_encoder_name: str | None = (
            _field(second, "name", str) if second is not None else None
        )
        self.second_encoder_id: str | None = (
            _field(second, "id", str) if second is not None else None
        )
        self.second_dimension: int = _field(second, "dimension", int) if second else 0
        self.input_dimension = self.dimension + self.second_dimension
        self._second: Encoder | None = None
        self.labels: tuple[str, ...] = tuple(_field(manifest, "labels", list))
        self.threshold: float = float(_field(manifest, "keep_threshold", float))
        self.buckets: int = _field(manifest, "gram_buckets", int)
        # "learned": the model decides (with the rules' precise patterns); "gate": the rules
        # decide and the model may only filter short small talk.
        self.mode: ClassifierMode = "learned"
        unknown = [label for label in self.labels if label not in LABEL_KIND]
        if unknown:
            raise ClassifierFileError(f"labels: unknown label(s) {unknown} in {self.id}")
        features = tuple(_field(manifest, "lexical_features", list))
        if features != LEXICAL_FEATURES:
            raise ClassifierFileError(
                f"lexical_features: {self.id} was trained on {list(features)}, "
                f"this code computes {list(LEXICAL_FEATURES)}"
            )
        self._keep = np.asarray([label not in NON_MEMORY_LABELS for label in self.labels])
        shapes = {
            "lexical_mean": (len(LEXICAL_FEATURES),),
            "lexical_scale": (len(LEXICAL_FEATURES),),
            "weight_dense": (self.input_dimension + len(LEXICAL_FEATURES), len(self.labels)),
            "weight_grams": (self.buckets, len(self.labels)),
            "bias": (len(self.labels),),
        }
        checked = shaped_arrays(arrays, shapes, self.id, ClassifierFileError)
        self._lexical_mean, self._lexical_scale, self._dense, self._grams, self._bias = (
            checked[name] for name in shapes
        )

    def input_vectors(
        self, search_texts: Sequence[str], vectors: npt.ArrayLike, memo: VectorMemo | None = None
    ) -> Array:
        """What :meth:`probabilities` reads: the encoder's ``vectors`` of the turns' search texts,
        followed by the second encoder's (if the file has one), computed here one text at a time
        so that a turn's vector, like its answer, does not depend on its batch (``memo`` shares
        them with other models of the batch)."""
        first = np.asarray(vectors, dtype=np.float64)
        if not search_texts:
            return np.zeros((0, self.input_dimension))
        first = first.reshape(len(search_texts), -1)
        if self.second_encoder_name is None:
            return first
        second = self.second_vectors(search_texts, memo)
        return np.hstack([first, second.astype(np.float64)])

    def second_vectors(
        self, search_texts: Sequence[str], memo: VectorMemo | None = None
    ) -> Vectors:
        """The second encoder's vectors of ``search_texts`` (each text's own, whatever its batch),
        read from and added to ``memo``; a file without a second encoder reads none."""
        if self.second_encoder_name is None:
            return np.zeros((len(search_texts), 0), dtype=np.float32)
        return encode_one_at_a_time_once(self._second_encoder(), search_texts, memo)

    def _second_encoder(self) -> Encoder:
        if self._second is None:
            assert self.second_encoder_name is not None and self.second_encoder_id is not None
            try:
                self._second = load_encoder_of(self.second_encoder_name, self.second_encoder_id)
            except EncoderMismatch as error:
                raise ClassifierFileError(f"second_encoder: {self.id}: {error}") from None
        return self._second

    def probabilities(self, texts: Sequence[str], vectors: npt.ArrayLike) -> Array:
        """Label probabilities, one row per turn, columns in :attr:`labels` order.

        ``vectors`` are :meth:`input_vectors` (for a file without a second encoder, the
        encoder's vectors as they are)."""
        if not texts:
            return np.zeros((0, len(self.labels)))
        embedded = np.asarray(vectors, dtype=np.float64).reshape(len(texts), -1)
        if embedded.shape[1] != self.input_dimension:
            raise ClassifierFileError(
                f"vector: {self.id} takes {self.input_dimension} dimensions, "
                f"got {embedded.shape[1]}"
            )
        rows = zip(texts, embedded, strict=True)
        return np.stack([self._row(text, vector) for text, vector in rows])

    def _row(self, text: str, vector: Array) -> Array:
        # One turn at a time: a matrix product over a whole batch may round differently from
        # the same rows one by one, and a turn's answer must not depend on its batch.
        scaled = (lexical_features(text) - self._lexical_mean) / self._lexical_scale
        logits = np.concatenate([vector, scaled]) @ self._dense + self._bias
        if self.buckets:
            indices, values = gram_features(text, self.buckets)
            logits = logits + values @ self._grams[indices]
        exp = np.exp(logits - logits.max())
        probabilities: Array = exp / exp.sum()
        return probabilities

    def verdict(self, row: Array) -> TurnVerdict:
        """The filter decision and the kind from one row of label probabilities."""
        keep = float(row[self._keep].sum())
        remember = keep >= self.threshold
        allowed = np.where(self._keep == remember, row, -1.0)
        best = int(np.argmax(allowed))
        label = self.labels[best]
        return TurnVerdict(remember, label, LABEL_KIND[label], float(row[best]), keep)

    def classify_many(self, texts: Sequence[str], vectors: npt.ArrayLike) -> list[TurnVerdict]:
        return [self.verdict(row) for row in self.probabilities(texts, vectors)]

    def classify(self, text: str, vector: npt.ArrayLike) -> TurnVerdict:
        """Remember or not, the kind and the confidence for one turn text and its vector."""
        [verdict] = self.classify_many([text], np.asarray(vector).reshape(1, -1))
        return verdict

    def fits(self, encoder_name: str) -> bool:
        """True when vectors of this encoder (by model name, any backend) are what it reads."""
        return encoder_name == self.encoder_name

    def as_gate(self) -> TurnClassifier:
        """The same model as the rules' small-talk gate (``HINDSIGHT_CLASSIFIER=gated``).

        Same weights and answers; only the id recorded with each prepared event says that the
        rules decided and the model could only filter (``prepare.gated_classification``).
        """
        gate = copy.copy(self)
        gate.mode = "gate"
        gate.id = f"{GATE_PREFIX}{self.id}"
        return gate


def _field(manifest: dict[str, Any], name: str, kind: type) -> Any:
    return manifest_field(manifest, name, kind, ClassifierFileError, "the classifier")


def load_turn_classifier(
    model_id: str = DEFAULT_MODEL, directory: Path = WEIGHTS_DIR
) -> TurnClassifier:
    """Load ``<directory>/<model_id>.json`` and its arrays; the arrays' hash must match.

    ``model_id`` names the file; the loaded classifier's :attr:`TurnClassifier.id` adds the
    arrays' hash, so a retrained file is a new id on every event it prepares.
    """
    manifest, arrays = load_trained_file(model_id, directory, ClassifierFileError)
    return TurnClassifier(manifest, arrays)


_WARNED: set[tuple[str, str]] = set()


def classifier_for(choice: str, encoder_name: str) -> TurnClassifier | None:
    """The learned classifier for ``learned``, its small-talk gate for ``gated``, if it fits the
    encoder (and its second encoder is installed); else None.

    ``None`` means the rules decide alone. A mismatch is logged once per process and encoder.
    """
    if choice == "rules":
        return None
    if choice not in ("learned", "gated"):
        raise ClassifierFileError(f"classifier: expected gated, learned or rules, got {choice!r}")
    classifier = _cached()
    if classifier.fits(encoder_name):
        try:
            if classifier.second_encoder_name is not None:
                classifier._second_encoder()
        except EncoderUnavailable as error:
            if (classifier.id, str(error)) not in _WARNED:
                _WARNED.add((classifier.id, str(error)))
                log.warning("classifier %s: %s; the rules decide instead", classifier.id, error)
            return None
        return classifier.as_gate() if choice == "gated" else classifier
    if (classifier.id, encoder_name) not in _WARNED:
        _WARNED.add((classifier.id, encoder_name))
        log.warning(
            "classifier %s was trained on %s vectors, the encoder is %s: the rules decide instead",
            classifier.id,
            classifier.encoder_name,
            encoder_name,
        )
    return None


_LOADED: dict[str, TurnClassifier] = {}


def _cached() -> TurnClassifier:
    if DEFAULT_MODEL not in _LOADED:
        _LOADED[DEFAULT_MODEL] = load_turn_classifier(DEFAULT_MODEL)
    return _LOADED[DEFAULT_MODEL]
