"""Segment stage: topic boundaries within a session from embedding similarity."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt


def is_boundary(
    vector: npt.NDArray[np.float32],
    segment_vectors: Sequence[npt.NDArray[np.float32]],
    threshold: float,
    max_turns: int,
) -> bool:
    """A new segment starts when the turn drifts from the running segment's centroid.

    Comparing with the centroid rather than only the previous turn keeps one off-topic aside
    from splitting a segment in two.
    """
    if not segment_vectors:
        return True
    if len(segment_vectors) >= max_turns:
        return True
    centroid = np.mean(np.stack(segment_vectors), axis=0)
    norm = float(np.linalg.norm(centroid))
    if norm == 0.0:
        return True
    similarity = float(np.dot(centroid / norm, vector))
    return similarity < threshold
