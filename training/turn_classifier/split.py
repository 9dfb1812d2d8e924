"""The corpus split: a held-back quarter, stratified by label and language, fixed by a seed.

Within each (label, language) stratum the turns are ordered by ``sha256(SEED + id)`` and every
fourth one, starting with the first, is held back; so each stratum gives a quarter (rounded up)
and the split depends on the ids and their strata alone, never on the text or the file's order.
The held-back quarter is only ever scored by ``evaluate``; every choice (features,
hyper-parameters, the filter threshold) is made by cross-validation on the other three quarters.
The cross-validation folds are dealt the same way within each stratum of the training turns, with
another seed, so they are as fixed as the split.

The held-back quarter is drawn from the first release of the corpus only (:data:`SPLIT_IDS_UP_TO`,
the highest id per prefix then): a turn added later would shift the ranks of its stratum and so
move other turns across the split. Later turns (higher ids) always go to training, so the
held-back quarter stays exactly the same set of turns, and figures on it stay comparable.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence
from typing import Protocol, TypeVar

SEED = "hindsight-turn-classifier/"
FOLD_SEED = "hindsight-turn-classifier-fold/"
HELD_BACK_EVERY = 4  # one turn in four
# The highest id per prefix in the corpus the held-back quarter was drawn from (v1, 2,393 turns).
SPLIT_IDS_UP_TO = {"en": 1057, "zh": 1027, "mx": 309}


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


def in_first_release(turn_id: str) -> bool:
    """True for a turn of the corpus the held-back quarter was drawn from."""
    prefix, _, number = turn_id.partition("-")
    return int(number) <= SPLIT_IDS_UP_TO[prefix]


def split(turns: Sequence[T]) -> tuple[list[T], list[T]]:
    """(training turns, held-back turns), each in corpus order; later additions all train."""
    rank = _rank_in_stratum([turn for turn in turns if in_first_release(turn.id)], SEED)
    held = {turn_id for turn_id, position in rank.items() if position % HELD_BACK_EVERY == 0}
    return [t for t in turns if t.id not in held], [t for t in turns if t.id in held]


def folds_of(training: Sequence[T], folds: int) -> dict[str, int]:
    """The cross-validation fold of each training turn (by id), dealt within each stratum."""
    ranks = _rank_in_stratum(training, FOLD_SEED)
    return {turn_id: position % folds for turn_id, position in ranks.items()}
