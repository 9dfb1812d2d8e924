"""Links across sessions at recall time: one hop from the best answers to what they share.

A multi-hop question needs two memories from different sessions that the question's words reach
only one of: "Where did Caroline move from?" finds "since I moved from my home country" and
misses "a gift from my grandma in my home country, Sweden". Each of the first pass's best
memories (a *seed*) links to memories of other sessions that share a specific entity with it
(an entity few memories carry) or that say nearly the same thing (an event told twice); those
inherit part of the seed's relevance. Done at recall time, over the view, so links follow
forgetting and erasure without a stored association to keep in step (I8).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pipeline.recall.hot_index import NamespaceView
from pipeline.recall.scoring import session_of

CLOSE_CAP = 8  # near copies kept per seed, in multiples of ``per_seed``


def linked(
    view: NamespaceView,
    seeds: Sequence[tuple[str, float]],
    accept: Callable[[str], bool],
    *,
    min_specificity: float,
    min_cosine: float,
    per_seed: int,
    reading: float = 1.0,
) -> dict[str, float]:
    """``{memory id: link strength × seed relevance}`` for memories one hop from ``seeds``.

    ``seeds`` are ``(memory id, relevance)``, best first. A link is an entity both carry whose
    specificity (``entities.specificity``) is at least ``min_specificity`` — its strength is that
    specificity — or a cosine of at least ``min_cosine`` between the two memories — its strength
    is the cosine. Only memories of another session than the seed's count (within a session the
    follow-up path and the segment already connect turns), at most ``per_seed`` per seed, the
    strongest first; a memory reached from several seeds keeps its best value. Seeds themselves
    are never returned.

    ``reading`` (``encoders.known_share`` of the question) scales every cosine, as it scales the
    question's own: MiniLM finds most Chinese texts alike (0.6-0.9) whatever they say, and read
    as near copies they passed the seeds' relevance on to unrelated remarks of other sessions.
    """
    present = [(seed, relevance) for seed, relevance in seeds if seed in view.records]
    seed_ids = {memory_id for memory_id, _ in seeds}
    # A dense namespace (an event told many times) has thousands of near copies; the strongest
    # few times ``per_seed`` are plenty for the checks below.
    near_copies = (
        view.close_rows(
            [view.slot_of[seed] for seed, _ in present],
            min_cosine / reading,
            CLOSE_CAP * per_seed,
        )
        if reading > 0.0 and reading >= min_cosine
        else [[] for _ in present]  # no cosine could reach it
    )
    found: dict[str, float] = {}
    for (seed, seed_relevance), close in zip(present, near_copies, strict=True):
        session = session_of(view.records[seed])
        strength: dict[str, float] = {}
        for key in view.entities.keys_of(seed):
            key_strength = view.entities.specificity_of(key)
            if key_strength < min_specificity:
                continue
            for other in view.entities.holders(key):
                if other and key_strength > strength.get(other, 0.0):
                    strength[other] = key_strength
        for other_slot, cosine in close:
            other = view.ids[other_slot]
            if cosine * reading > strength.get(other, 0.0):
                strength[other] = cosine * reading
        # Strongest first; the session and visibility checks (the costly part in a dense
        # namespace) run only until ``per_seed`` links are found.
        ranked = sorted(
            ((value, other) for other, value in strength.items() if other not in seed_ids),
            key=lambda item: (-item[0], item[1]),
        )
        taken = 0
        for value, other in ranked:
            if taken == per_seed:
                break
            if session_of(view.records[other]) == session or not accept(other):
                continue
            taken += 1
            inherited = min(1.0, value) * seed_relevance
            if inherited > found.get(other, 0.0):
                found[other] = inherited
    return found
