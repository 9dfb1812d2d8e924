"""The in-memory recall view, fed with ``MemoryRecord``s from the compacted memory-state topic.

A derived view (I1): the caller replays the state topic into ``apply``/``remove`` and gets the
same index back. Per namespace it keeps

- a contiguous float32 matrix of unit vectors (capacity doubles; delete = swap-remove the last
  row into the hole), so dense recall is one exact matrix-vector product — at 100k × 384 that is a
  few milliseconds and needs no ANN build, no training and gives exact answers;
- per-row numpy columns (region, created time, importance, activation, hidden-since) so
  prefilters and the activation path are vectorised too;
- the BM25 index, the entity index and a created-time-sorted index for temporal windows;
- from ``RecallTuning.ann_min_rows`` rows on, an HNSW graph per region over the matrix (keyed by
  slot) and a decay-ordered activation list (``ann.py``), so a recall reads candidates, not every
  row.

``NamespaceSearch`` is one recall's reader: exact vectorised scans on a small namespace, the
graph and per-candidate filters on a large one.

Namespaces never share a structure (I8): a recall only ever touches its own namespace's view.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt

from pipeline.memory.rules.decay import SECONDS_PER_DAY, decay_rate
from pipeline.recall.ann import ActivationOrder, AnnIndex, ann_available
from pipeline.recall.conversation import (
    ContextReading,
    Neighbourhood,
    context_evidence,
    neighbourhood,
    refreshed,
    session_neighbours,
)
from pipeline.recall.entities import EntityIndex
from pipeline.recall.lexical import BM25Index, search_terms
from pipeline.recall.scoring import (
    DEFAULT_TUNING,
    RecallTuning,
    hidden_since,
    session_of,
    speaker_of,
)
from pipeline.recall.temporal import TimeWindow, time_references
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
# Temporal windows with at most this many rows are scored exactly even in a large namespace.
_EXACT_WINDOW_ROWS = 4096
# Over-fetch from the graph before filters; grown ×4 while too few candidates pass, up to the cap
# (beyond it the filter is selective enough that an exact scan of the rows it keeps is cheaper).
_ANN_FETCH_FACTOR = 4
_ANN_FETCH_CAP = 2048
# Activation walk steps before falling back to one vectorised scan.
_ACTIVATION_STEPS_PER_RESULT = 64
# Longest window a time phrase in a memory names (a year): bounds the referenced-time bisect.
_LONGEST_REFERENCE_S = 367 * SECONDS_PER_DAY


class HotIndexError(HindsightError):
    pass


class NamespaceView:
    """All recall structures of one namespace. Not thread-safe on its own: HotIndex locks."""

    def __init__(
        self, namespace: str, dimension: int | None = None, tuning: RecallTuning = DEFAULT_TUNING
    ) -> None:
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
        # Which session a row was said in (a code per session id): its neighbours in the
        # conversation are the rows of the same session next to it in time.
        self.session = np.zeros(capacity, dtype=np.int64)
        self._session_codes: dict[str, int] = {}
        # Who said it (a code per speaker): a row's neighbours are the other speakers' turns.
        self.speaker = np.zeros(capacity, dtype=np.int64)
        self._speaker_codes: dict[str, int] = {}
        # Bumped when a row is added or removed or its vector, time or session changes: the
        # cached neighbourhood (``neighbourhood``) is then computed again.
        self._layout = 0
        self._neighbours: tuple[tuple[int, bytes], IntArray, IntArray] | None = None
        self._neighbourhood: tuple[tuple[int, bytes], Neighbourhood] | None = None
        # Since the neighbourhood was last computed: rows given a new vector, and whether a
        # removal moved a row (then it is computed afresh).
        self._new_vectors: set[int] = set()
        self._rows_moved = False
        self.bm25 = BM25Index()
        self.entities = EntityIndex()
        # (created epoch, id), sorted: temporal windows are two bisects.
        self._by_time: list[tuple[float, str]] = []
        # Dates a memory's own words name ("yesterday", "last Saturday", "on 8 May"), resolved
        # against its created time: (start epoch, end epoch, id), sorted by start.
        self._by_reference: list[tuple[float, float, str]] = []
        self._references_of: dict[str, list[tuple[float, float, str]]] = {}
        # Who said the namespace's memories (first provenance turn), with counts.
        self.speakers: Counter[str] = Counter()
        # Large-namespace structures (None while the namespace is scanned exactly).
        self.ann: list[AnnIndex] | None = None  # one graph per region code
        self.by_activation: ActivationOrder | None = None

    # ----- writes -----

    def _columns(self) -> list[str]:
        return [
            "region",
            "created",
            "importance",
            "log_activation",
            "activation_base",
            "activation_rate",
            "hidden_since",
            "session",
            "speaker",
        ]

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
            added = True
        else:
            added = False
        if self.dimension is not None:
            row = vector if vector is not None else np.zeros(self.dimension, dtype=np.float32)
            if self.ann is not None:
                self._regraph(slot, row, REGION_CODE[record.region], added)
            if not added and not np.array_equal(self.matrix[slot], row):
                self._layout += 1
                self._new_vectors.add(slot)
            self.matrix[slot] = row
        self.region[slot] = REGION_CODE[record.region]
        if added or previous is None or previous.created_at != record.created_at:
            self._layout += 1
        self.created[slot] = record.created_at.timestamp()
        self.importance[slot] = record.importance
        rate = decay_rate(record.base_importance) / SECONDS_PER_DAY
        log_a = math.log(record.activation) if record.activation > 0 else -math.inf
        self.log_activation[slot] = log_a
        self.activation_base[slot] = log_a + rate * record.activation_at.timestamp()
        self.activation_rate[slot] = rate
        hidden = hidden_since(record)
        self.hidden_since[slot] = hidden.timestamp() if hidden is not None else _NEVER
        session = self._session_codes.setdefault(session_of(record), len(self._session_codes))
        speaker = self._speaker_codes.setdefault(speaker_of(record), len(self._speaker_codes))
        if session != self.session[slot] or speaker != self.speaker[slot]:
            self._layout += 1
        self.session[slot] = session
        self.speaker[slot] = speaker
        if self.by_activation is not None:
            self.by_activation.set(record.id, rate, float(self.activation_base[slot]))
        # Status and activation updates are the common case: re-index text only when it changed.
        if previous is None or previous.search_text != record.search_text:
            self.bm25.add(record.id, search_terms(record.search_text))
        if (
            previous is None
            or previous.entities != record.entities
            or previous.content != record.content
        ):
            self.entities.add(record.id, record.entities, record.content)
        if previous is None or previous.created_at != record.created_at:
            if previous is not None:
                self._untime(previous)
            bisect.insort(self._by_time, (record.created_at.timestamp(), record.id))
        if (
            previous is None
            or previous.created_at != record.created_at
            or previous.content != record.content
        ):
            self._unreference(record.id)
            self._reference(record)
        if previous is None or speaker_of(previous) != speaker_of(record):
            if previous is not None:
                self._uncount(previous)
            if speaker_of(record):
                self.speakers[speaker_of(record)] += 1
        # The matrix row (and the graph's f16 copy) hold the vector: a list of 384 Python floats
        # per record would cost ~12 KB each (1.2 GB at 100k).
        stored = record.model_copy(update={"vector": []}) if record.vector else record
        self.records[record.id] = stored
        self._rescale()

    def _regraph(self, slot: int, row: FloatArray, code: int, added: bool) -> None:
        """Keep the region graphs in step with a row (before the matrix and region are written)."""
        assert self.ann is not None
        old = None if added else int(self.region[slot])
        if old is not None and old != code:
            self.ann[old].remove(slot)
        if old != code:
            self.ann[code].add(np.array([slot], dtype=np.int64), row[None, :])
        elif not np.array_equal(self.matrix[slot], row):
            # Status and activation updates keep the vector: the graph changes only with it.
            self.ann[code].replace(slot, row)

    def _rescale(self) -> None:
        """Build the large-namespace structures past the threshold; drop them below half of it."""
        threshold = self._tuning.ann_min_rows
        if self.ann is None:
            if threshold is None or self.size < threshold or self.dimension is None:
                return
            if not ann_available():
                return
            # One bulk build when the namespace crosses the threshold (seconds at 20k rows).
            self.ann = []
            for code in range(len(REGIONS)):
                slots = np.flatnonzero(self.region[: self.size] == code).astype(np.int64)
                graph = AnnIndex(self.dimension, self._tuning.ann)
                graph.add(slots, self.matrix[slots])
                self.ann.append(graph)
            order = ActivationOrder()
            for slot, memory_id in enumerate(self.ids):
                order.set(
                    memory_id,
                    float(self.activation_rate[slot]),
                    float(self.activation_base[slot]),
                )
            self.by_activation = order
        elif threshold is None or self.size < threshold // 2:
            self.ann = None
            self.by_activation = None

    def _untime(self, record: MemoryRecord) -> None:
        key = (record.created_at.timestamp(), record.id)
        position = bisect.bisect_left(self._by_time, key)
        if position < len(self._by_time) and self._by_time[position] == key:
            del self._by_time[position]

    def _reference(self, record: MemoryRecord) -> None:
        entries = [
            (ref.window.start.timestamp(), ref.window.end.timestamp(), record.id)
            for ref in time_references(record.content, record.created_at)
        ]
        for entry in entries:
            bisect.insort(self._by_reference, entry)
        if entries:
            self._references_of[record.id] = entries

    def _uncount(self, record: MemoryRecord) -> None:
        speaker = speaker_of(record)
        if speaker:
            self.speakers[speaker] -= 1
            if self.speakers[speaker] <= 0:
                del self.speakers[speaker]

    def _unreference(self, memory_id: str) -> None:
        for entry in self._references_of.pop(memory_id, []):
            position = bisect.bisect_left(self._by_reference, entry)
            if position < len(self._by_reference) and self._by_reference[position] == entry:
                del self._by_reference[position]

    def remove(self, memory_id: str) -> MemoryRecord | None:
        record = self.records.pop(memory_id, None)
        if record is None:
            return None
        self._unreference(memory_id)
        self._uncount(record)
        slot = self.slot_of.pop(memory_id)
        last = self.size - 1
        # The graph follows the swap-remove: the erased key goes, the moved row is re-keyed.
        if self.ann is not None:
            self.ann[int(self.region[slot])].remove(slot)
            if slot != last:
                self.ann[int(self.region[last])].rename(last, slot)
        if self.by_activation is not None:
            self.by_activation.discard(memory_id)
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
        self._layout += 1
        self._rows_moved = True
        self._rescale()
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

    def close_rows(
        self, slots: Sequence[int], min_cosine: float, count: int
    ) -> list[list[tuple[int, float]]]:
        """Per row in ``slots``: up to ``count`` other rows with a cosine ≥ ``min_cosine``.

        Best first (ties: lower slot, as ``top_k``). Exact below the graph threshold, in one
        matrix product for all the rows (the matrix is read once); above it the region graphs
        supply each row's candidates and the f32 matrix re-scores them, so the cost follows
        ``count``, not the namespace.
        """
        if self.dimension is None or self.size == 0 or count <= 0 or not slots:
            return [[] for _ in slots]
        rows = self.matrix[np.asarray(slots, dtype=np.int64)]
        exact = self.matrix[: self.size] @ rows.T if self.ann is None else None
        found: list[list[tuple[int, float]]] = []
        for column, slot in enumerate(slots):
            if exact is not None:
                candidates = np.flatnonzero(exact[:, column] >= min_cosine)
                values = exact[candidates, column]
            else:
                assert self.ann is not None
                candidates = np.unique(
                    np.concatenate([graph.search(rows[column], count + 1) for graph in self.ann])
                )
                values = self.matrix[candidates] @ rows[column]
                keep = values >= min_cosine
                candidates, values = candidates[keep], values[keep]
            others = candidates != slot
            candidates, values = candidates[others], values[others]
            if candidates.size > count:
                best = np.argpartition(-values, count - 1)[:count]
                candidates, values = candidates[best], values[best]
            order = np.lexsort((candidates, -values))
            found.append([(int(candidates[i]), float(values[i])) for i in order])
        return found

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

    def window_rows(self, window: TimeWindow) -> tuple[int, int]:
        """Positions ``[low, high)`` of the window in the created-time index (two bisects)."""
        low = bisect.bisect_left(self._by_time, (window.start.timestamp(), ""))
        high = bisect.bisect_left(self._by_time, (window.end.timestamp(), ""))
        return low, high

    def window_mask(self, window: TimeWindow) -> BoolArray:
        """Rows created inside ``window``: bisect the time index, or one vector compare if wide."""
        low, high = self.window_rows(window)
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
        low, high = self.window_rows(window)
        return [memory_id for _, memory_id in self._by_time[low:high]]

    def referencing(self, window: TimeWindow) -> set[str]:
        """Ids of memories whose own words name a time overlapping ``window``."""
        start, end = window.start.timestamp(), window.end.timestamp()
        low = bisect.bisect_left(self._by_reference, (start - _LONGEST_REFERENCE_S,))
        high = bisect.bisect_left(self._by_reference, (end,))
        return {
            memory_id for _, ref_end, memory_id in self._by_reference[low:high] if ref_end > start
        }

    def neighbours(self, at: float) -> tuple[IntArray, IntArray]:
        """Each row's neighbours (``conversation.session_neighbours``) among the memories
        current at ``at`` (nothing forgotten, superseded or said later; ``-1`` for none),
        cached until the layout or that set of memories changes."""
        return self._neighbours_of(*self._present(at))

    def _neighbours_of(
        self, key: tuple[int, bytes], present: BoolArray
    ) -> tuple[IntArray, IntArray]:
        if self._neighbours is None or self._neighbours[0] != key:
            size = self.size
            before, after = session_neighbours(
                self.session[:size], self.speaker[:size], self.created[:size], present
            )
            self._neighbours = (key, before, after)
        return self._neighbours[1], self._neighbours[2]

    def neighbourhood(self, at: float) -> Neighbourhood:
        """``neighbours`` with every row's dot products with them (exact scans), cached alike
        and brought up to date row by row (``conversation.refreshed``)."""
        key, present = self._present(at)
        if self._neighbourhood is None or self._neighbourhood[0] != key:
            before, after = self._neighbours_of(key, present)
            previous = (
                None if self._rows_moved or self._neighbourhood is None else self._neighbourhood[1]
            )
            changed = np.fromiter(self._new_vectors, dtype=np.int64, count=len(self._new_vectors))
            hood = refreshed(self.matrix, before, after, previous, changed)
            self._neighbourhood = (key, hood)
            self._new_vectors.clear()
            self._rows_moved = False
        return self._neighbourhood[1]

    def _present(self, at: float) -> tuple[tuple[int, bytes], BoolArray]:
        """The rows of memories current at ``at`` (the only ones that lend their words), and
        the key the cached neighbours are kept under: the layout and that set of rows."""
        present = RowFilter(at, include_history=False).mask(self)
        return (self._layout, present.tobytes()), present

    def names_a_time(self, memory_id: str) -> bool:
        """True when the memory's own words name a time ("yesterday", "in May 2023")."""
        return memory_id in self._references_of

    def referencing_mask(self, window: TimeWindow) -> BoolArray:
        mask = np.zeros(self.size, dtype=np.bool_)
        slots = [self.slot_of[memory_id] for memory_id in self.referencing(window)]
        mask[slots] = True
        return mask


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


@dataclass(frozen=True)
class RowFilter:
    """Rows a path may return: visible at ``at``, optionally only some regions or a window.

    ``mask`` answers for every row (exact scans); ``check``/``accepts`` for a few candidate slots,
    so a large namespace is filtered at the cost of its candidates, not of its size.
    """

    at: float
    include_history: bool
    regions: frozenset[int] | None = None  # region codes; None: every region
    window: TimeWindow | None = None
    # A window also takes the memories whose own words name a time inside it.
    window_references: bool = False

    def narrowed(
        self, regions: Collection[Region] | None = None, window: TimeWindow | None = None
    ) -> RowFilter:
        codes = self.regions
        if regions is not None:
            wanted = frozenset(REGION_CODE[region] for region in regions)
            codes = wanted if codes is None else codes & wanted
        return RowFilter(
            self.at, self.include_history, codes, window or self.window, self.window_references
        )

    def mask(self, view: NamespaceView) -> BoolArray:
        size = view.size
        mask: BoolArray = view.created[:size] <= self.at
        if not self.include_history:
            mask &= view.hidden_since[:size] > self.at
        if self.regions is not None:
            column = view.region[:size]
            in_region = np.zeros(size, dtype=np.bool_)
            for code in self.regions:
                in_region |= column == code  # a few int8 compares beat np.isin
            mask &= in_region
        if self.window is not None:
            in_window = view.window_mask(self.window)
            if self.window_references:
                in_window |= view.referencing_mask(self.window)
            mask &= in_window
        return mask

    def check(self, view: NamespaceView, slots: IntArray) -> BoolArray:
        created = view.created[slots]
        ok: BoolArray = created <= self.at
        if not self.include_history:
            ok &= view.hidden_since[slots] > self.at
        if self.regions is not None:
            ok &= np.isin(view.region[slots], list(self.regions))
        if self.window is not None:
            in_window = (created >= self.window.start.timestamp()) & (
                created < self.window.end.timestamp()
            )
            if self.window_references:
                referencing = view.referencing(self.window)
                in_window |= np.fromiter(
                    (view.ids[slot] in referencing for slot in slots.tolist()), np.bool_, len(slots)
                )
            ok &= in_window
        return ok

    def accepts(self, view: NamespaceView, slot: int) -> bool:
        if view.created[slot] > self.at:
            return False
        if not self.include_history and view.hidden_since[slot] <= self.at:
            return False
        if self.regions is not None and int(view.region[slot]) not in self.regions:
            return False
        if self.window is None:
            return True
        if self.window.start.timestamp() <= view.created[slot] < self.window.end.timestamp():
            return True
        return self.window_references and view.ids[slot] in view.referencing(self.window)


class NamespaceSearch:
    """One recall's reads of one namespace (call under ``HotIndex.lock``).

    Exact when the namespace has no graphs (or ``exact``): one matrix-vector product and
    vectorised masks, computed once and shared by every path. Otherwise approximate: the graphs of
    the wanted regions over-fetch, the other filters run on those candidates only, the kept ones
    are re-scored exactly from the matrix, and activation comes from the decay-ordered list.
    """

    def __init__(
        self,
        view: NamespaceView,
        query: FloatArray,
        at: datetime,
        *,
        include_history: bool,
        regions: Collection[Region] | None = None,
        exact: bool = False,
        window_references: bool = False,
        context: ContextReading | None = None,
    ) -> None:
        if view.dimension is not None and query.shape[0] != view.dimension:
            raise HotIndexError(
                f"namespace {view.namespace!r}: query has {query.shape[0]} dimensions, "
                f"the index has {view.dimension}"
            )
        self.view = view
        self.query = query
        self.at = at
        self.base = RowFilter(
            at.timestamp(), include_history, window_references=window_references
        ).narrowed(regions)
        self.approximate = view.ann is not None and not exact
        # Memories read in their conversation (``conversation``): every row in an exact scan;
        # in an approximate one the graphs find candidates by their own vectors, and those
        # candidates are then read in context.
        self.context = context
        self._similarities: FloatArray | None = None
        self._log_activations: DoubleArray | None = None
        self._masks: dict[RowFilter, BoolArray] = {}
        # Each region graph's answer so far, shared by the paths: {code: (count asked, slots)}.
        self._fetched: dict[int, tuple[int, IntArray]] = {}

    def filter(
        self, regions: Collection[Region] | None = None, window: TimeWindow | None = None
    ) -> RowFilter:
        return self.base.narrowed(regions, window)

    def visible(self, memory_id: str) -> bool:
        slot = self.view.slot_of.get(memory_id)
        return slot is not None and self.base.accepts(self.view, slot)

    def cosines(self, slots: IntArray) -> DoubleArray:
        if self.view.dimension is None:
            return np.zeros(len(slots), dtype=np.float64)
        if not self.approximate:
            return self._exact_similarities()[slots].astype(np.float64)
        return self._approximate_cosines(slots)

    def dense(self, k: int, where: RowFilter) -> list[tuple[int, float]]:
        """Top ``k`` ``(slot, cosine)`` among rows ``where`` accepts, best first."""
        if k <= 0 or self.view.size == 0:
            return []
        if not self.approximate:
            sims = self._exact_similarities()
            return [(s, float(sims[s])) for s in top_k(sims, self._mask(where), k).tolist()]
        if where.window is not None:
            low, high = self.view.window_rows(where.window)
            if high - low <= _EXACT_WINDOW_ROWS:
                # A narrow window: its rows are few, score them all exactly.
                slot_of = self.view.slot_of
                ids = self.view.ids_in_window(where.window)
                if where.window_references:
                    ids = list(dict.fromkeys([*ids, *sorted(self.view.referencing(where.window))]))
                slots = np.fromiter((slot_of[i] for i in ids), np.int64, len(ids))
                return self._rescored(slots[where.check(self.view, slots)], k)
        codes = sorted(where.regions) if where.regions is not None else range(len(REGIONS))
        if not codes:
            return []
        fetch = _ANN_FETCH_FACTOR * k
        while True:
            parts = [self._graph(code, fetch) for code in codes]
            slots = np.concatenate(parts)
            kept = slots[where.check(self.view, slots)]
            if kept.size >= k or all(part.size < fetch for part in parts):
                return self._rescored(kept, k)
            if fetch >= _ANN_FETCH_CAP:
                # A selective filter: the rows it keeps are few, score them all exactly.
                return self._rescored(np.flatnonzero(where.mask(self.view)), k)
            fetch = min(fetch * _ANN_FETCH_FACTOR, _ANN_FETCH_CAP)

    def active(self, k: int, where: RowFilter) -> list[tuple[int, float]]:
        """Top ``k`` ``(slot, log activation at at)`` among rows ``where`` accepts."""
        view = self.view
        order = view.by_activation
        if self.approximate and order is not None:

            def value_of(memory_id: str) -> float | None:
                slot = view.slot_of[memory_id]
                if not where.accepts(view, slot):
                    return None
                decayed = view.activation_base[slot] - view.activation_rate[slot] * where.at
                return float(min(view.log_activation[slot], decayed))

            hits = order.top(where.at, k, value_of, _ACTIVATION_STEPS_PER_RESULT * k)
            if hits is not None:
                return [(view.slot_of[memory_id], value) for memory_id, value in hits]
        if self._log_activations is None:
            self._log_activations = view.log_activations(self.at)
        values = self._log_activations
        return [(s, float(values[s])) for s in top_k(values, self._mask(where), k).tolist()]

    # ----- helpers -----

    def _exact_similarities(self) -> FloatArray:
        if self._similarities is None:
            own = self.view.similarities(self.query)
            self._similarities = own if self.context is None else self._in_context(own)
        return self._similarities

    def _in_context(self, own: FloatArray) -> FloatArray:
        """Every row's dense evidence: the better of its own cosine and the context share of
        its cosine read with its neighbours (``conversation.context_evidence``)."""
        assert self.context is not None
        hood = self.view.neighbourhood(self.base.at)
        before, after = own[np.maximum(hood.before, 0)], own[np.maximum(hood.after, 0)]
        result: FloatArray = context_evidence(own, before, after, hood, self.context).astype(
            own.dtype
        )
        return result

    def _approximate_cosines(self, slots: IntArray) -> DoubleArray:
        """Dense evidence for a few candidate slots of an approximate search: their own cosines,
        read in context when asked for (the graphs find candidates by their own vectors)."""
        matrix = self.view.matrix
        own: DoubleArray = (matrix[slots] @ self.query).astype(np.float64)
        if self.context is None or slots.size == 0:
            return own
        every_before, every_after = self.view.neighbours(self.base.at)
        before, after = every_before[slots], every_after[slots]
        hood = neighbourhood(matrix, slots, before, after)
        to_before = matrix[np.maximum(before, 0)] @ self.query
        to_after = matrix[np.maximum(after, 0)] @ self.query
        return context_evidence(own, to_before, to_after, hood, self.context)

    def _mask(self, where: RowFilter) -> BoolArray:
        mask = self._masks.get(where)
        if mask is None:
            mask = self._masks[where] = where.mask(self.view)
        return mask

    def _graph(self, code: int, count: int) -> IntArray:
        """A region graph's nearest ``count`` slots; a larger ask re-searches, a smaller reuses."""
        assert self.view.ann is not None
        asked, slots = self._fetched.get(code, (0, np.zeros(0, dtype=np.int64)))
        if count > asked:
            slots = self.view.ann[code].search(self.query, count)
            self._fetched[code] = (count, slots)
        return slots[:count]

    def _rescored(self, slots: IntArray, k: int) -> list[tuple[int, float]]:
        """Exact cosines for candidate slots, best ``k`` first (ties: lower slot, as ``top_k``)."""
        if slots.size == 0:
            return []
        sims = self._approximate_cosines(slots).astype(np.float32)
        order = np.lexsort((slots, -sims))[:k]
        return [(int(slots[i]), float(sims[i])) for i in order.tolist()]


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
        """Insert or replace by id. The state topic is read in commit order (one transactional
        writer per partition), so the latest record read is the current one."""
        with self.lock:
            owner = self._namespace_of.get(record.id)
            if owner is not None and owner != record.namespace:
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

    def namespace_sizes(self) -> dict[str, int]:
        """Memories per namespace (every status), for the metrics and the dashboard."""
        with self.lock:
            return {name: len(view.records) for name, view in self._views.items() if view.records}
