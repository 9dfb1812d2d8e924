"""What the classifier is trained and scored on: corpus turns as ``prepare`` would present them.

``prepare`` embeds a turn's search text (``pipeline.memory.rules.extraction.search_text``:
``"<speaker>: <text>"`` and, in brackets, the dates its relative time phrases point at) and the
classifier reads that vector, so training embeds the same text, made by the same function, with
one fixed event time (:data:`EVENT_TIME`; the corpus has none). The corpus has no speakers
either, so each turn is framed with speaker names drawn by a hash of its id from a fixed, mixed
list (a role, English and Chinese names); training uses two framings per turn so that the name
is noise the model learns to ignore. The held-back evaluation uses one framing per turn, drawn
the same way.

Embeddings can be cached on disk (keyed by encoder id and text) to make reruns fast. Each text
is embedded on its own, as the classifier's second encoder embeds a turn at inference: a batched
encoder pads to the batch's longest text, which moves the last bits of a vector (USE: up to 2e-7),
so a cache filled over several runs gave other weights than a fresh one (v4 retrained from an
empty cache chose keep threshold 0.40 where the shipped file has 0.39). One text at a time, the
cache only saves time and a fresh clone retrains the same bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt

from pipeline.memory.rules.extraction import search_text as runtime_search_text
from pipeline.models.classifier import lexical_features
from pipeline.models.encoders import Encoder, encode_one_at_a_time, encoder_id
from training.turn_classifier.corpus_stats import CORPUS_PATH, LABELS, Turn

ENCODER = "minilm"
# The second, multilingual vector the classifier reads from v3 on (the English MiniLM vector says
# little about Chinese); RESULTS.md has what it buys and costs.
SECOND_ENCODER = "use"
SPEAKERS: tuple[str, ...] = (
    "user",
    "assistant",
    "Alex",
    "Sam",
    "Priya",
    "Jordan",
    "Maria",
    "Tom",
    "Wei",
    "小明",
    "王芳",
    "Kenji",
    "Fatima",
    "Lena",
    "Omar",
    "Mei",
)
TRAINING_FRAMINGS = (1, 2)  # two speakers per training turn
EVALUATION_FRAMING = 1
EVENT_TIME = datetime(2024, 5, 8, 12, 0, tzinfo=UTC)  # a Wednesday; only time notes read it


def speaker_for(turn_id: str, framing: int) -> str:
    digest = hashlib.sha256(f"hindsight-turn-speaker/{framing}/{turn_id}".encode()).digest()
    return SPEAKERS[digest[0] % len(SPEAKERS)]


def search_text(turn: Turn, framing: int) -> str:
    """The text ``prepare`` embeds for this turn said by the framing's speaker."""
    return runtime_search_text(speaker_for(turn.id, framing), turn.text, EVENT_TIME)


def corpus_sha256(path: Path = CORPUS_PATH) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class Inputs:
    """One row per (turn, framing): the embedding, the lexical features and the label index."""

    turns: list[Turn]  # the turn of each row
    vectors: npt.NDArray[np.float32]
    lexical: npt.NDArray[np.float64]
    labels: npt.NDArray[np.int64]


# Part of the cache file's name: vectors cached before texts were embedded one at a time (the
# batched ones) are never mixed with these.
_CACHE_VERSION = "/one-at-a-time"


def embed(encoder: Encoder, texts: Sequence[str], cache: Path | None) -> npt.NDArray[np.float32]:
    """The encoder's vectors for ``texts``, read from / added to ``cache`` when given."""
    if cache is None:
        return encode_one_at_a_time(encoder, texts)
    cache.mkdir(parents=True, exist_ok=True)
    model = encoder_id(encoder)
    keys = [hashlib.sha256(f"{model}\n{text}".encode()).hexdigest() for text in texts]
    store = cache / f"{hashlib.sha256(f'{model}{_CACHE_VERSION}'.encode()).hexdigest()[:16]}.npz"
    known: dict[str, npt.NDArray[np.float32]] = {}
    if store.exists():
        with np.load(store, allow_pickle=False) as saved:
            known = dict(zip(saved["keys"].tolist(), saved["vectors"], strict=True))
    by_key = dict(zip(keys, texts, strict=True))
    missing = sorted(key for key in by_key if key not in known)
    if missing:
        fresh = encode_one_at_a_time(encoder, [by_key[key] for key in missing])
        known.update(zip(missing, fresh, strict=True))
        np.savez(store, keys=np.array(list(known)), vectors=np.stack(list(known.values())))
    return np.stack([known[key] for key in keys]).astype(np.float32)


def both_vectors(
    encoder: Encoder, second: Encoder, texts: Sequence[str], cache: Path | None
) -> npt.NDArray[np.float64]:
    """[encoder vector, second vector] of each text: the rows the attribute and stage models
    read (the order ``prepare`` concatenates them in)."""
    return np.hstack([embed(encoder, texts, cache), embed(second, texts, cache)]).astype(np.float64)


def inputs(
    turns: Sequence[Turn],
    encoder: Encoder,
    framings: Sequence[int],
    cache: Path | None,
    second: Encoder | None = None,
) -> Inputs:
    """The rows of ``turns`` in each framing; with a ``second`` encoder its vector of the same
    search text follows the first encoder's in each row (the order the runtime concatenates)."""
    rows = [(turn, framing) for framing in framings for turn in turns]
    texts = [search_text(turn, framing) for turn, framing in rows]
    vectors = embed(encoder, texts, cache)
    if second is not None:
        vectors = np.hstack([vectors, embed(second, texts, cache)]).astype(np.float32)
    return Inputs(
        turns=[turn for turn, _ in rows],
        vectors=vectors,
        lexical=np.stack([lexical_features(turn.text) for turn, _ in rows]),
        labels=np.array([LABELS.index(turn.label) for turn, _ in rows], dtype=np.int64),
    )
