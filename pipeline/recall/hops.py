"""Second-hop recall for questions whose answer is spread over several memories.

"Which cities has John been to?" is answered by "I was in Chicago", "my game in Seattle" and "I
love discovering new cities", told in different sessions. The question's own words and vector
reach one or two of them; the others resemble the answers found far more than they resemble the
question. Two pure steps over vectors the index already holds:

- ``feedback_vector``: the query moved towards its best first-pass answers (relevance feedback,
  Rocchio's rule), so a second dense pass finds memories like those answers *and* the question.
- ``diversified``: the final order re-ranked greedily (maximal marginal relevance), so the first
  places are not spent on near copies of one answer while a different answer waits below them.

Both are deterministic functions of the candidates; neither reads anything beyond them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.floating]


def feedback_vector(query: FloatArray, seeds: FloatArray, weight: float) -> FloatArray:
    """The unit vector of ``query + weight × mean(seeds)`` (``seeds``: one unit row per answer).

    No seeds, or a weight of 0, give the query itself (normalised). A sum that cancels out
    (opposite vectors) also falls back to the query.
    """
    query = np.asarray(query, dtype=np.float32)
    norm = float(np.linalg.norm(query))
    unit = query / norm if norm > 0 else query
    if weight <= 0.0 or seeds.size == 0:
        return unit
    moved = unit + weight * np.asarray(seeds, dtype=np.float32).reshape(-1, unit.shape[0]).mean(
        axis=0
    )
    moved_norm = float(np.linalg.norm(moved))
    if moved_norm <= 1e-6:
        return unit
    return (moved / moved_norm).astype(np.float32)


def diversified(
    scores: npt.NDArray[np.float64], vectors: FloatArray, penalty: float
) -> tuple[list[int], list[float]]:
    """Greedy maximal-marginal-relevance order of candidates given best first.

    Each next place goes to the candidate with the highest ``score − penalty × (its largest
    cosine with a candidate already placed)``; ties keep the given order. Returns the order (as
    indices into ``scores``) and each placed candidate's adjusted score, made non-increasing
    (a running minimum) so gap truncation still reads a descending list. ``penalty`` 0 keeps
    the order and the scores.
    """
    count = int(scores.shape[0])
    if count == 0:
        return [], []
    if penalty <= 0.0 or count == 1:
        return list(range(count)), [float(s) for s in scores]
    raw = np.asarray(vectors, dtype=np.float64).reshape(count, -1)
    norms = np.linalg.norm(raw, axis=1, keepdims=True)
    rows = raw / np.where(norms > 0, norms, 1.0)
    similarity = np.clip(rows @ rows.T, 0.0, 1.0)
    redundancy = np.zeros(count, dtype=np.float64)
    left = np.ones(count, dtype=np.bool_)
    order: list[int] = []
    adjusted: list[float] = []
    for _ in range(count):
        objective = np.where(left, scores - penalty * redundancy, -np.inf)
        pick = int(np.argmax(objective))  # the first maximum: ties keep the given order
        value = float(objective[pick])
        adjusted.append(min(value, adjusted[-1]) if adjusted else value)
        order.append(pick)
        left[pick] = False
        redundancy = np.maximum(redundancy, similarity[pick])
    return order, adjusted


# Speakers named by their role, not a name: "what did the user say" is no question about a
# person whose name the answers leave out, and memories often say "User prefers ...".
ROLE_SPEAKERS: frozenset[str] = frozenset({"user", "assistant", "system", "tool"})


def person_names(speakers: Iterable[str]) -> list[str]:
    """The speakers that are people's names (not a role such as "user")."""
    return [speaker for speaker in speakers if speaker.strip().lower() not in ROLE_SPEAKERS]


def without_names(query: str, names: Iterable[str]) -> str:
    """The query with each name (and its first word) removed as a whole word, possessive too.

    "What are the names of John's children?" asks *about* John: the memories that answer it are
    John's own words, which rarely say "John", while the other speaker's turns address him by
    name ("Wow, John, how cute!"). As a keyword or in the query vector the name favours exactly
    those. Who is asked about is kept by the speaker focus (``speaker_focus_factor``), which
    reads the original query. Chinese names are removed as substrings. A query that would be
    left empty is returned unchanged.
    """
    stripped = query
    for name in names:
        for part in sorted(
            {name.strip(), name.strip().split(" ")[0]} - {""}, key=len, reverse=True
        ):
            if _CJK.search(part):
                stripped = stripped.replace(part, " ")
            else:
                stripped = re.sub(
                    rf"(?<![\w-]){re.escape(part)}(?:['’]s)?(?![\w-])", " ", stripped, flags=re.I
                )
    stripped = " ".join(stripped.split())
    return stripped if stripped.strip(" ?!.,") else query


_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
