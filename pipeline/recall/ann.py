"""Sub-linear structures for large namespaces: an HNSW graph for the dense path and a
decay-ordered list for the activation path.

Below ``RecallTuning.ann_min_rows`` a namespace is scanned exactly (one matrix-vector product is
cheap and exact); above it these keep one recall's cost from growing with the namespace.

Why usearch for the graph: its HNSW supports remove and rename by key, so the hot matrix's
swap-remove maps to one ``remove`` + one ``rename`` and a hard erase leaves nothing searchable
(faiss's HNSW has no remove: tombstones and rebuilds). Keys are matrix slots, so a search answer
indexes the matrix and the per-row columns directly, with no id lookups. The hot view keeps one
graph per region: a routed query searches its region's graph alone, where one shared graph would
return the query's neighbours from other regions and need ever larger over-fetches.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AnnParams:
    # HNSW defaults measured on MiniLM vectors at 100k rows (docs/BENCHMARKS.md, "Recall latency").
    connectivity: int = 16
    expansion_add: int = 128
    expansion_search: int = 64
    # f16 halves the graph's copy of the vectors; candidates are re-scored from the f32 matrix.
    dtype: str = "f16"


def _load_usearch() -> Any:
    """``usearch.index``, with onnxruntime loaded first when it is installed.

    Loading onnxruntime's extension after usearch's (its numkong kernels) crashes the process with
    a segfault (usearch 2.26.6, numkong 7.8.6, onnxruntime 1.24-1.32); the other order works. The
    ONNX encoder may load after a namespace crossed the graph threshold, so the order is fixed here.
    """
    with contextlib.suppress(ImportError):
        import onnxruntime  # noqa: F401
    import usearch.index

    return usearch.index


@functools.cache
def ann_available() -> bool:
    """Whether usearch imports; without it every namespace is scanned exactly (logged once)."""
    try:
        _load_usearch()
    except ImportError:
        log.warning("usearch is not installed: large namespaces are scanned exactly")
        return False
    return True


class AnnIndex:
    """HNSW over unit vectors (inner product), keyed by hot-matrix slot. Not thread-safe."""

    def __init__(self, dimension: int, params: AnnParams = AnnParams()) -> None:
        Index = _load_usearch().Index

        self.dimension = dimension
        self._index = Index(
            ndim=dimension,
            metric="ip",  # rows are unit vectors: ip is the cosine, and zero rows stay finite
            dtype=params.dtype,
            connectivity=params.connectivity,
            expansion_add=params.expansion_add,
            expansion_search=params.expansion_search,
        )

    def __len__(self) -> int:
        return len(self._index)

    def add(self, slots: IntArray, vectors: FloatArray) -> None:
        if len(slots):
            # One thread: the hot view shares the machine with the worker and other recalls.
            self._index.add(slots.astype(np.uint64), vectors, threads=1)

    def replace(self, slot: int, vector: FloatArray) -> None:
        self._index.remove(slot)
        self._index.add(slot, vector, threads=1)

    def remove(self, slot: int) -> None:
        self._index.remove(slot)

    def rename(self, old: int, new: int) -> None:
        """Re-key a row the hot matrix moved (swap-remove): no vector copy, no graph change."""
        self._index.rename(old, new)

    def search(self, query: FloatArray, count: int) -> IntArray:
        """Up to ``count`` slots, nearest first (approximate)."""
        if count <= 0 or len(self._index) == 0:
            return np.zeros(0, dtype=np.int64)
        matches = self._index.search(query, count, threads=1)
        result: IntArray = np.asarray(matches.keys, dtype=np.int64)
        return result

    def contains(self, slot: int) -> bool:
        return bool(self._index.contains(slot))


class ActivationOrder:
    """Memory ids per decay rate λ, sorted by ``activation_base`` = log A + λ·t0, highest first.

    At a query time ``at`` ≥ t0 the log activation is ``activation_base − λ·at``, so within one
    rate the order is the same for every ``at``; for ``at`` < t0 the true value is lower than that
    (it is capped at log A), so ``activation_base − λ·at`` is an upper bound everywhere. Top-k is
    then a threshold walk down a few sorted lists that stops once no unread entry can beat the
    k-th best, instead of a scan of the namespace.
    """

    def __init__(self) -> None:
        self._lists: dict[float, list[tuple[float, str]]] = {}
        self._entry: dict[str, tuple[float, float]] = {}  # id -> (rate, -base)

    def __len__(self) -> int:
        return len(self._entry)

    def set(self, memory_id: str, rate: float, base: float) -> None:
        entry = (rate, -base)
        if self._entry.get(memory_id) == entry:
            return
        self.discard(memory_id)
        self._entry[memory_id] = entry
        bisect.insort(self._lists.setdefault(rate, []), (-base, memory_id))

    def discard(self, memory_id: str) -> None:
        entry = self._entry.pop(memory_id, None)
        if entry is None:
            return
        rate, negative_base = entry
        ordered = self._lists[rate]
        position = bisect.bisect_left(ordered, (negative_base, memory_id))
        if position < len(ordered) and ordered[position] == (negative_base, memory_id):
            del ordered[position]

    def top(
        self,
        at: float,
        k: int,
        value_of: Callable[[str], float | None],
        max_steps: int,
    ) -> list[tuple[str, float]] | None:
        """The ``k`` best ``(id, log activation)`` by ``value_of`` (None: not eligible).

        Returns None after ``max_steps`` entries without a settled answer (a very selective
        filter): the caller scans instead, so the worst case stays one vectorised pass.
        """
        if k <= 0:
            return []
        cursors = {rate: 0 for rate, ordered in self._lists.items() if ordered}
        found: list[tuple[float, str]] = []  # (value, id), kept sorted best first
        steps = 0
        while cursors:
            # Next entry: the list whose unread head has the highest bound at ``at``.
            rate = max(cursors, key=lambda r: -self._lists[r][cursors[r]][0] - r * at)
            negative_base, memory_id = self._lists[rate][cursors[rate]]
            bound = -negative_base - rate * at
            if len(found) >= k and (bound < found[k - 1][0] or bound == -math.inf):
                break
            steps += 1
            if steps > max_steps:
                return None
            cursors[rate] += 1
            if cursors[rate] == len(self._lists[rate]):
                del cursors[rate]
            value = value_of(memory_id)
            if value is not None:
                # Ties go to the smaller id: a stable order whatever the list lengths.
                bisect.insort(found, (value, memory_id), key=lambda item: (-item[0], item[1]))
                del found[k:]
        return [(memory_id, value) for value, memory_id in found]
