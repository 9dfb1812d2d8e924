"""Reciprocal rank fusion over recall paths, keeping each path's rank and raw score.

RRF needs no score calibration between paths (a cosine, a BM25 score and an activation are not
comparable), and the per-path ranks it keeps are exactly what an explanation should show.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

PATHS: tuple[str, ...] = (
    "dense",
    "bm25",
    "entity",
    "temporal",
    "activation",
    "follow_up",
    "linked",
    "decomposed",
    "feedback",
)

DEFAULT_PATH_WEIGHTS: Mapping[str, float] = {
    "dense": 1.0,
    "bm25": 1.0,
    "entity": 1.2,  # an exact identifier is the strongest single signal
    "temporal": 0.8,
    "activation": 0.3,  # query-independent: a tie-breaker, never a reason on its own
    "follow_up": 0.5,  # second-hand: the reply to a keyword hit (``neighbours``)
    "linked": 0.5,  # second-hand: one hop across sessions from the best answers (``links``)
    "decomposed": 1.0,  # the parts of a question joining two facts (``decompose``)
    "feedback": 0.5,  # second-hand: the query moved towards its best answers (``hops``)
}
RRF_K = 60


@dataclass(frozen=True)
class PathHit:
    rank: int  # 1-based
    score: float


@dataclass
class Fused:
    memory_id: str
    rrf: float
    paths: dict[str, PathHit] = field(default_factory=dict)


def rrf_fuse(
    ranked: Mapping[str, Sequence[tuple[str, float]]],
    weights: Mapping[str, float] = DEFAULT_PATH_WEIGHTS,
    k: int = RRF_K,
) -> list[Fused]:
    """Fuse ``{path: [(memory_id, score), ...best first]}``; ties broken by memory id."""
    fused: dict[str, Fused] = {}
    for path, hits in ranked.items():
        weight = weights.get(path, 1.0)
        if weight <= 0.0:
            continue
        for position, (memory_id, score) in enumerate(hits, start=1):
            entry = fused.get(memory_id)
            if entry is None:
                entry = fused[memory_id] = Fused(memory_id, 0.0)
            if path in entry.paths:
                continue  # a path lists each memory once; keep its best rank
            entry.paths[path] = PathHit(position, score)
            entry.rrf += weight / (k + position)
    return sorted(fused.values(), key=lambda item: (-item.rrf, item.memory_id))


def max_rrf(
    paths: Sequence[str], weights: Mapping[str, float] = DEFAULT_PATH_WEIGHTS, k: int = RRF_K
) -> float:
    """The fused score of a memory ranked first on every given path (for normalising)."""
    return sum(weights.get(path, 1.0) / (k + 1) for path in paths if weights.get(path, 1.0) > 0)
