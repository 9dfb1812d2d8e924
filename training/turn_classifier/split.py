"""The corpus split: a held-back quarter, stratified by label and language, fixed by a seed.

Within each (label, language) stratum the turns are ordered by ``sha256(SEED + id)`` and every
fourth one, starting with the first, is held back; so each stratum gives a quarter (rounded up)
and the split depends on the ids and their strata alone, never on the text or the file's order.
The held-back quarter is only ever scored by ``evaluate``; every choice (features,
hyper-parameters, the filter threshold) is made by cross-validation on the other three quarters.
The cross-validation folds are dealt the same way within each stratum of the training turns, with
another seed, so they are as fixed as the split.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence
from typing import Protocol, TypeVar

SEED = "hindsight-turn-classifier/"
FOLD_SEED = "hindsight-turn-classifier-fold/"
HELD_BACK_EVERY = 4  # one turn in four


class Stratified(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def lang(self) -> str: ...


T = TypeVar("T", bound=Stratified)


def _rank_in_stratum(turns: Sequence[T], seed: str) -> dict[str, int]:
    """Each turn's position in its (label, language) stratum, ordered by the seeded id hash."""
    strata: dict[tuple[str, str], list[T]] = defaultdict(list)
    for turn in turns:
        strata[(turn.label, turn.lang)].append(turn)
    rank: dict[str, int] = {}
    for members in strata.values():
        ordered = sorted(members, key=lambda t: hashlib.sha256((seed + t.id).encode()).digest())
        rank.update((turn.id, position) for position, turn in enumerate(ordered))
    return rank


def split(turns: Sequence[T]) -> tuple[list[T], list[T]]:
    """(training turns, held-back turns), each in corpus order."""
    rank = _rank_in_stratum(turns, SEED)
    held = {turn_id for turn_id, position in rank.items() if position % HELD_BACK_EVERY == 0}
    return [t for t in turns if t.id not in held], [t for t in turns if t.id in held]


def folds_of(training: Sequence[T], folds: int) -> dict[str, int]:
    """The cross-validation fold of each training turn (by id), dealt within each stratum."""
    ranks = _rank_in_stratum(training, FOLD_SEED)
    return {turn_id: position % folds for turn_id, position in ranks.items()}
