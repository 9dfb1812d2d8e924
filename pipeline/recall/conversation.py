"""A memory read in its conversation: its vector with those of the turns said around it.

A turn often holds its answer in words that only mean something next to its neighbours: "I
also like holding them." (them: the turtles of the turn before), "That's a great one! Let me
know what you think." (the book the other speaker just showed), "Writing and hanging with
friends!" (the reply to "What else brings you joy?"). Its own vector misses the question about
them; read together with the turns before and after it in the same session, it does not.

Done at recall time over the rows the view holds, so only memories that are current at the
query's moment lend their words (nothing forgotten, superseded or said later; I8), and nothing
is stored beside the memory's own vector. Pure functions of arrays; the view supplies them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.floating]


@dataclass(frozen=True)
class ContextReading:
    """How a memory is read in context: its dense evidence is the better of its own cosine and
    ``share`` × the cosine of its vector plus ``before`` × the previous turn's and ``after`` ×
    the next turn's (same session, in time order)."""

    share: float
    before: float
    after: float


def session_neighbours(
    session: IntArray, created: npt.NDArray[np.float64], present: npt.NDArray[np.bool_]
) -> tuple[IntArray, IntArray]:
    """For each row, the present row said just before it and just after it in the same session
    (``-1`` when there is none; rows not present get ``-1`` too and are nobody's neighbour).

    Rows are ordered by session, then created time, then row number (turns said in the same
    second keep the order they were applied in).
    """
    count = int(session.shape[0])
    before = np.full(count, -1, dtype=np.int64)
    after = np.full(count, -1, dtype=np.int64)
    rows = np.flatnonzero(present)
    if rows.size < 2:
        return before, after
    order = rows[np.lexsort((rows, created[rows], session[rows]))]
    same = session[order[1:]] == session[order[:-1]]
    before[order[1:][same]] = order[:-1][same]
    after[order[:-1][same]] = order[1:][same]
    return before, after


def read_in_context(
    rows: FloatArray,
    before: IntArray,
    after: IntArray,
    before_weight: float,
    after_weight: float,
) -> npt.NDArray[np.float64]:
    """Unit vectors of ``row + before_weight × previous row + after_weight × next row`` (a
    missing neighbour adds nothing; a row that sums to zero stays zero)."""
    own = np.asarray(rows, dtype=np.float64)
    joint = own.copy()
    has_before = before >= 0
    joint[has_before] += before_weight * own[before[has_before]]
    has_after = after >= 0
    joint[has_after] += after_weight * own[after[has_after]]
    norms = np.linalg.norm(joint, axis=1, keepdims=True)
    result: npt.NDArray[np.float64] = joint / np.where(norms > 0, norms, 1.0)
    return result
