"""The in-memory recall view, fed with ``MemoryRecord``s from the compacted memory-state topic.

A derived view (I1): the caller replays the state topic into ``apply``/``remove`` and gets the
same index back. Per namespace it keeps

- a contiguous float32 matrix of unit vectors (capacity doubles; delete = swap-remove the last
  row into the hole), so dense recall is one exact matrix-vector product — at 100k × 384 that is a
  few milliseconds and needs no ANN build, no training and gives exact answers;
- per-row numpy columns (region, created time, importance, activation, hidden-since) so
  prefilters and the activation path are vectorised too;
- the BM25 index, the entity index and a created-time-sorted index for temporal windows.

Namespaces never share a structure (I8): a recall only ever touches its own namespace's view.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Iterable
from datetime import datetime

import numpy as np
import numpy.typing as npt

from pipeline.recall.entities import EntityIndex
from pipeline.recall.lexical import BM25Index, tokenize
from pipeline.recall.scoring import (
    DEFAULT_TUNING,
    SECONDS_PER_DAY,
    RecallTuning,
    activation_lambda,
    hidden_since,
)
from pipeline.recall.temporal import TimeWindow
from schemas.errors import HindsightError
from schemas.memory import REGIONS, MemoryRecord, Region, Watermark

FloatArray = npt.NDArray[np.float32]
DoubleArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

REGION_CODE: dict[str, int] = {region: code for code, region in enumerate(REGIONS)}
_INITIAL_CAPACITY = 64
_NEVER = math.inf
_FILL = {"hidden_since": _NEVER, "log_activation": -math.inf, "activation_base": -math.inf}


class HotIndexError(HindsightError):
    pass


class NamespaceView:
    """All recall structures of one namespace. Not thread-safe on its own: HotIndex locks."""

    def __init__(self, namespace: str, dimension: int | None = None,
                 tuning: RecallTuning = DEFAULT_TUNING) -> None:
        self.namespace = namespace
        self.dimension = dimension
        self._tuning = tuning
        self.size = 0
        self.ids: list[str] = []
        self.slot_of: dict[str, int] = {}
        self.records: dict[str, MemoryRecord] = {}
        capacity = _INITIAL_CAPACITY
        self.matrix: FloatArray = np.zeros((capacity, dimension or 0), dtype=np.float32)
        self.region = np.zeros(capacity, dtype=np.int8)
        self.created = np.zeros(capacity, dtype=np.float64)
        self.importance = np.zeros(capacity, dtype=np.float64)
        # Activation in log form, so ranking by A·e^(−λΔt) at any ``at`` needs no exp over the
        # namespace: log A − λ·max(0, at − t0) = min(log A, (log A + λ·t0) − λ·at).
        self.log_activation = np.full(capacity, -np.inf, dtype=np.float64)
        self.activation_base = np.full(capacity, -np.inf, dtype=np.float64)
        self.activation_rate = np.zeros(capacity, dtype=np.float64)  # λ per second
        self.hidden_since = np.full(capacity, _NEVER, dtype=np.float64)
        self.bm25 = BM25Index()
        self.entities = EntityIndex()
        # (created epoch, id), sorted: temporal windows are two bisects.
        self._by_time: list[tuple[float, str]] = []

    # ----- writes -----

    def _columns(self) -> list[str]:
        return ["region", "created", "importance", "log_activation", "activation_base",
                "activation_rate", "hidden_since"]

    def _grow(self) -> None:
        capacity = 2 * len(self.region)
        matrix = np.zeros((capacity, self.matrix.shape[1]), dtype=np.float32)
        matrix[: self.size] = self.matrix[: self.size]
        self.matrix = matrix
        for name in self._columns():
            old = getattr(self, name)
            fill = _FILL.get(name, 0.0)
            new = np.full(capacity, fill, dtype=old.dtype)
            new[: self.size] = old[: self.size]
            setattr(self, name, new)

    def _vector(self, record: MemoryRecord) -> FloatArray | None:
        if not record.vector:
            return None
        vector = np.asarray(record.vector, dtype=np.float32)
        if self.dimension is None:
            self.dimension = int(vector.shape[0])
            self.matrix = np.zeros((len(self.region), self.dimension), dtype=np.float32)
        if vector.shape[0] != self.dimension:
            raise HotIndexError(
                f"memory {record.id} in namespace {self.namespace!r}: vector has "
                f"{vector.shape[0]} dimensions, the namespace has {self.dimension}"
            )
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm > 0 else vector

    def apply(self, record: MemoryRecord) -> None:
        vector = self._vector(record)
        previous = self.records.get(record.id)
        slot = self.slot_of.get(record.id)
        if slot is None:
            if self.size == len(self.region):
                self._grow()
            slot = self.size
            self.size += 1
            self.ids.append(record.id)
            self.slot_of[record.id] = slot
        if self.dimension is not None:
            self.matrix[slot] = vector if vector is not None else 0.0
        self.region[slot] = REGION_CODE[record.region]
        self.created[slot] = record.created_at.timestamp()
        self.importance[slot] = record.importance
        rate = activation_lambda(record.base_importance, self._tuning) / SECONDS_PER_DAY
        log_a = math.log(record.activation) if record.activation > 0 else -math.inf
        self.log_activation[slot] = log_a
        self.activation_base[slot] = log_a + rate * record.activation_at.timestamp()
        self.activation_rate[slot] = rate
        hidden = hidden_since(record)
        self.hidden_since[slot] = hidden.timestamp() if hidden is not None else _NEVER
        # Status and activation updates are the common case: re-index text only when it changed.
        if previous is None or previous.search_text != record.search_text:
            self.bm25.add(record.id, tokenize(record.search_text))
        if (previous is None or previous.entities != record.entities
                or previous.content != record.content):
            self.entities.add(record.id, record.entities, record.content)
        if previous is None or previous.created_at != record.created_at:
            if previous is not None:
                self._untime(previous)
            bisect.insort(self._by_time, (record.created_at.timestamp(), record.id))
        # The matrix row is the one copy of the vector: a list of 384 Python floats per record
        # would cost ~12 KB each (1.2 GB at 100k).
        stored = record.model_copy(update={"vector": []}) if record.vector else record
        self.records[record.id] = stored

    def _untime(self, record: MemoryRecord) -> None:
        key = (record.created_at.timestamp(), record.id)
        position = bisect.bisect_left(self._by_time, key)
        if position < len(self._by_time) and self._by_time[position] == key:
            del self._by_time[position]

    def remove(self, memory_id: str) -> MemoryRecord | None:
        record = self.records.pop(memory_id, None)
        if record is None:
            return None
        slot = self.slot_of.pop(memory_id)
        last = self.size - 1
        if slot != last:
            moved = self.ids[last]
            self.ids[slot] = moved
            self.slot_of[moved] = slot
            if self.dimension is not None:
                self.matrix[slot] = self.matrix[last]
            for name in self._columns():
                column = getattr(self, name)
                column[slot] = column[last]
        # Leave nothing readable behind in the freed row (I8: an erase is an erase).
        if self.dimension is not None:
            self.matrix[last] = 0.0
        self.hidden_since[last] = _NEVER
        self.ids.pop()
        self.size = last
        self.bm25.remove(memory_id)
        self.entities.remove(memory_id)
        self._untime(record)
        return record

    # ----- reads (vectorised over the namespace) -----

    def similarities(self, query: FloatArray) -> FloatArray:
        """Cosine of the query with every row (rows and query are unit vectors)."""
        if self.dimension is None or self.size == 0:
            return np.zeros(self.size, dtype=np.float32)
        if query.shape[0] != self.dimension:
            raise HotIndexError(
                f"namespace {self.namespace!r}: query has {query.shape[0]} dimensions, "
                f"the index has {self.dimension}"
            )
        return self.matrix[: self.size] @ query

    def visible_mask(self, at: datetime, include_history: bool) -> BoolArray:
        """Cheap superset of what is visible at ``at`` (the engine re-checks each candidate)."""
        moment = at.timestamp()
        mask: BoolArray = self.created[: self.size] <= moment
        if not include_history:
            mask &= self.hidden_since[: self.size] > moment
        return mask

    def region_mask(self, regions: Iterable[Region]) -> BoolArray:
        column = self.region[: self.size]
        mask = np.zeros(self.size, dtype=np.bool_)
        for region in set(regions):
            mask |= column == REGION_CODE[region]  # a few int8 compares beat np.isin
        return mask

    def log_activations(self, at: datetime) -> DoubleArray:
        """log of ``activation · e^(−λΔt)`` at ``at`` for every row (same order as the values)."""
        rate = self.activation_rate[: self.size]
        decayed = self.activation_base[: self.size] - rate * at.timestamp()
        result: DoubleArray = np.minimum(self.log_activation[: self.size], decayed)
        return result

    def window_mask(self, window: TimeWindow) -> BoolArray:
        """Rows created inside ``window``: bisect the time index, or one vector compare if wide."""
        low = bisect.bisect_left(self._by_time, (window.start.timestamp(), ""))
        high = bisect.bisect_left(self._by_time, (window.end.timestamp(), ""))
        # Per-id slot lookups cost ~100× a vectorised compare per row: bisect only narrow windows.
        if high - low > 256:
            created = self.created[: self.size]
            result: BoolArray = (created >= window.start.timestamp()) & (
                created < window.end.timestamp()
            )
            return result
        mask = np.zeros(self.size, dtype=np.bool_)
        slots = [self.slot_of[memory_id] for _, memory_id in self._by_time[low:high]]
        mask[slots] = True
        return mask

    def ids_in_window(self, window: TimeWindow) -> list[str]:
        low = bisect.bisect_left(self._by_time, (window.start.timestamp(), ""))
        high = bisect.bisect_left(self._by_time, (window.end.timestamp(), ""))
        return [memory_id for _, memory_id in self._by_time[low:high]]


def top_k(values: npt.NDArray[np.floating], mask: BoolArray | None, k: int) -> IntArray:
    """Slots of the ``k`` largest values where ``mask`` holds, best first (ties: lower slot)."""
    if mask is not None:
        candidates = np.flatnonzero(mask)
        if candidates.size == 0 or k <= 0:
            return np.zeros(0, dtype=np.int64)
        picked = values[candidates]
    else:
        candidates = np.arange(values.shape[0])
        picked = values
    # Partial sort first: O(n) to find the k best, then order only those k.
    part = np.argpartition(-picked, k - 1)[:k] if picked.size > k else np.arange(picked.size)
    order = part[np.lexsort((candidates[part], -picked[part]))]
    result: IntArray = candidates[order].astype(np.int64)
    return result


def _is_stale(current: MemoryRecord, incoming: MemoryRecord) -> bool:
    """True when ``incoming`` is a replay of positions ``current`` already covers (I4).

    Offsets are per input topic ("<topic>:<partition>"), so a lower offset from another topic is
    not older: stale only when every position the incoming record carries is already covered.
    Identical positions re-apply (harmless, and how a rebuilt view re-reads its own state).
    """
    positions = incoming.applied_positions
    if not positions or positions == current.applied_positions:
        return False
    covered = current.applied_positions
    return all(offset <= covered.get(key, -1) for key, offset in positions.items())


class HotIndex:
    """Recall view over every namespace, keyed by memory id; fed by the caller."""

    def __init__(self, dimension: int | None = None, tuning: RecallTuning = DEFAULT_TUNING) -> None:
        self.dimension = dimension
        self.tuning = tuning
        self.lock = threading.RLock()
        self._views: dict[str, NamespaceView] = {}
        self._namespace_of: dict[str, str] = {}
        self._watermarks: dict[tuple[str, int], int] = {}

    def __len__(self) -> int:
        return len(self._namespace_of)

    def apply(self, record: MemoryRecord) -> bool:
        """Insert or replace by id; False when the record is older than what is applied (I4)."""
        with self.lock:
            owner = self._namespace_of.get(record.id)
            if owner is not None:
                if _is_stale(self._views[owner].records[record.id], record):
                    return False
                if owner != record.namespace:
                    self._views[owner].remove(record.id)
            view = self._views.get(record.namespace)
            if view is None:
                view = self._views[record.namespace] = NamespaceView(
                    record.namespace, self.dimension, self.tuning
                )
            view.apply(record)
            self._namespace_of[record.id] = record.namespace
            return True

    def remove(self, memory_id: str) -> bool:
        """Hard erase: the record, its vector, its terms and entities all go."""
        with self.lock:
            namespace = self._namespace_of.pop(memory_id, None)
            if namespace is None:
                return False
            self._views[namespace].remove(memory_id)
            return True

    def apply_watermark(self, watermark: Watermark) -> None:
        with self.lock:
            key = (watermark.topic, watermark.partition)
            self._watermarks[key] = max(self._watermarks.get(key, -1), watermark.offset)

    def watermark(self, topic: str, partition: int) -> int:
        """Highest input offset applied for that partition (-1: none), for read-your-writes."""
        with self.lock:
            return self._watermarks.get((topic, partition), -1)

    def view(self, namespace: str) -> NamespaceView | None:
        return self._views.get(namespace)

    def get(self, memory_id: str) -> MemoryRecord | None:
        with self.lock:
            namespace = self._namespace_of.get(memory_id)
            return None if namespace is None else self._views[namespace].records.get(memory_id)

    def records(self, namespace: str) -> list[MemoryRecord]:
        """The namespace's records as applied, minus ``vector`` (kept only in the matrix)."""
        with self.lock:
            view = self._views.get(namespace)
            return [] if view is None else list(view.records.values())

    def namespaces(self) -> list[str]:
        with self.lock:
            return sorted(name for name, view in self._views.items() if view.size)
