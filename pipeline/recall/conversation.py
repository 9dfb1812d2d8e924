"""A memory read in its conversation: its vector with those of the turns said around it.

A turn often holds its answer in words that only mean something next to the turns around it:
"Mostly sourdough, and a rye on Sundays." (the reply to "Do you still bake?"), "Yes, the blue
one!" (the bike the other speaker just asked about). Its own vector misses a question about
baking or bikes; read together with the other speaker's turns just before and after it in the
same sitting, it does not.

Done at recall time over the rows the view holds, so only memories that are current at the
query's moment lend their words (nothing forgotten, superseded or said later; I8), and nothing
is stored beside the memory's own vector. Pure functions of arrays; the view supplies them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.floating]

# Turns further apart than this were not said in one sitting: neither is read with the other,
# and a reply this late is not read as an answer (``neighbours.follow_ups``), even when a
# client keeps one session id for months.
SAME_SITTING = timedelta(hours=1)


@dataclass(frozen=True)
class ContextReading:
    """How a memory is read in context: its dense evidence is the better of its own cosine and
    ``share`` × the cosine of its vector plus ``before`` × the previous turn's and ``after`` ×
    the next turn's (``session_neighbours``)."""

    share: float
    before: float
    after: float


def session_neighbours(
    session: IntArray,
    speaker: IntArray,
    created: npt.NDArray[np.float64],
    present: npt.NDArray[np.bool_],
    within: timedelta = SAME_SITTING,
) -> tuple[IntArray, IntArray]:
    """For each row, the present row said just before it and just after it in the same session,
    within ``within`` of it and by another speaker (``-1`` when there is none; rows not present
    get ``-1`` too and are nobody's neighbour).

    Only the other speaker's turns: a reply and the turn it answers explain each other, while a
    speaker's next statement is often about something else ("My daughter starts kindergarten
    in September." / "We changed the car battery last weekend."). Rows are ordered by session,
    then created time (epoch seconds), then row number (turns said in the same second keep the
    order they were applied in).
    """
    count = int(session.shape[0])
    before = np.full(count, -1, dtype=np.int64)
    after = np.full(count, -1, dtype=np.int64)
    rows = np.flatnonzero(present)
    if rows.size < 2:
        return before, after
    order = rows[np.lexsort((rows, created[rows], session[rows]))]
    earlier, later = order[:-1], order[1:]
    close = (
        (session[later] == session[earlier])
        & (speaker[later] != speaker[earlier])
        & (created[later] - created[earlier] <= within.total_seconds())
    )
    before[later[close]] = earlier[close]
    after[earlier[close]] = later[close]
    return before, after


@dataclass(frozen=True)
class Neighbourhood:
    """Some rows' neighbours (row numbers, ``-1`` for none) and the dot products among each
    row and its two neighbours, which do not depend on the query: the view computes them once
    per layout for every row, or for a search's few candidates."""

    before: IntArray
    after: IntArray
    own: npt.NDArray[np.float64]  # |row|²
    before_norm: npt.NDArray[np.float64]  # |previous row|² (0 without one)
    after_norm: npt.NDArray[np.float64]  # |next row|² (0 without one)
    to_before: npt.NDArray[np.float64]  # row · previous row
    to_after: npt.NDArray[np.float64]  # row · next row
    between: npt.NDArray[np.float64]  # previous row · next row


def neighbourhood(
    matrix: FloatArray, slots: IntArray, before: IntArray, after: IntArray, chunk: int = 4096
) -> Neighbourhood:
    """The dot products of rows ``slots`` of ``matrix`` with their neighbours ``before`` /
    ``after`` (aligned with ``slots``), ``chunk`` rows at a time so a large namespace never
    holds a second copy of its matrix."""
    count = int(slots.shape[0])
    has_before, has_after = before >= 0, after >= 0
    prev, nxt = np.maximum(before, 0), np.maximum(after, 0)
    columns = [np.zeros(count, dtype=np.float64) for _ in range(6)]
    own, before_norm, after_norm, to_before, to_after, between = columns
    for start in range(0, count, chunk):
        part = slice(start, start + chunk)
        row = np.asarray(matrix[slots[part]], dtype=np.float64)
        row_before = np.asarray(matrix[prev[part]], dtype=np.float64) * has_before[part, None]
        row_after = np.asarray(matrix[nxt[part]], dtype=np.float64) * has_after[part, None]
        own[part] = np.einsum("ij,ij->i", row, row)
        before_norm[part] = np.einsum("ij,ij->i", row_before, row_before)
        after_norm[part] = np.einsum("ij,ij->i", row_after, row_after)
        to_before[part] = np.einsum("ij,ij->i", row, row_before)
        to_after[part] = np.einsum("ij,ij->i", row, row_after)
        between[part] = np.einsum("ij,ij->i", row_before, row_after)
    return Neighbourhood(before, after, own, before_norm, after_norm, to_before, to_after, between)


def refreshed(
    matrix: FloatArray,
    before: IntArray,
    after: IntArray,
    previous: Neighbourhood | None,
    changed_rows: IntArray,
) -> Neighbourhood:
    """Every row's neighbourhood (``neighbourhood`` over all rows), computing again only what
    changed since ``previous`` (computed for the first rows of the same matrix, none moved):
    rows added since, rows whose neighbours differ, and rows that are or neighbour a row in
    ``changed_rows`` (a new vector). A new turn thus costs a few rows, not the namespace."""
    count = int(before.shape[0])
    if previous is None:
        return neighbourhood(matrix, np.arange(count, dtype=np.int64), before, after)
    known = int(previous.before.shape[0])
    stale = np.ones(count, dtype=np.bool_)
    stale[:known] = (before[:known] != previous.before) | (after[:known] != previous.after)
    changed = np.zeros(count, dtype=np.bool_)
    changed[changed_rows[changed_rows < count]] = True
    stale |= changed
    stale |= (before >= 0) & changed[np.maximum(before, 0)]
    stale |= (after >= 0) & changed[np.maximum(after, 0)]
    rows = np.flatnonzero(stale).astype(np.int64)
    part = neighbourhood(matrix, rows, before[rows], after[rows])
    columns: list[npt.NDArray[np.float64]] = []
    for name in ("own", "before_norm", "after_norm", "to_before", "to_after", "between"):
        column = np.zeros(count, dtype=np.float64)
        column[:known] = getattr(previous, name)[: min(known, count)]
        column[rows] = getattr(part, name)
        columns.append(column)
    return Neighbourhood(before, after, *columns)


def in_context_cosines(
    own: FloatArray,
    before: FloatArray,
    after: FloatArray,
    hood: Neighbourhood,
    before_weight: float,
    after_weight: float,
) -> npt.NDArray[np.float64]:
    """Each row's cosine with the query when read with its neighbours: the cosine of
    ``row + before_weight × previous row + after_weight × next row`` (a missing neighbour adds
    nothing), from the query's dot products with the row (``own``) and with its previous and
    next rows (``before``, ``after``; any value where there is none) and the neighbourhood's
    dot products. A joint vector of norm zero has cosine zero.
    """
    wb = np.where(hood.before >= 0, before_weight, 0.0)
    wa = np.where(hood.after >= 0, after_weight, 0.0)
    numerator = (
        np.asarray(own, dtype=np.float64)
        + wb * np.asarray(before, dtype=np.float64)
        + wa * np.asarray(after, dtype=np.float64)
    )
    squared = (
        hood.own
        + wb * wb * hood.before_norm
        + wa * wa * hood.after_norm
        + 2.0 * wb * hood.to_before
        + 2.0 * wa * hood.to_after
        + 2.0 * wb * wa * hood.between
    )
    norm = np.sqrt(np.maximum(squared, 0.0))
    safe = np.where(norm > 1e-9, norm, 1.0)
    result: npt.NDArray[np.float64] = np.where(norm > 1e-9, numerator / safe, 0.0)
    return result


def context_evidence(
    own: FloatArray,
    before: FloatArray,
    after: FloatArray,
    hood: Neighbourhood,
    reading: ContextReading,
) -> npt.NDArray[np.float64]:
    """Each row's dense evidence read in context: the better of its own cosine and
    ``reading.share`` × its cosine read with its neighbours (``in_context_cosines``; ``before``
    and ``after`` are the query's cosines with each row's neighbours)."""
    in_context = reading.share * in_context_cosines(
        own, before, after, hood, reading.before, reading.after
    )
    result: npt.NDArray[np.float64] = np.maximum(np.asarray(own, dtype=np.float64), in_context)
    return result
