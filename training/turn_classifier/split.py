"""The corpus split: a held-back quarter chosen by a hash of each turn's id, and nothing else.

A turn is held back when the first byte of ``sha256("hindsight-turn-classifier/" + id)`` is
divisible by 4. The split depends on the id alone (never on the text, the label or an order), so
it cannot be steered towards easy or hard turns, and turns added later fall on either side by the
same rule. The held-back quarter is only ever scored by ``evaluate``; every choice (features,
hyper-parameters, the filter threshold) is made by cross-validation on the other three quarters.
Cross-validation folds are hashed the same way with another salt, so they are as fixed as the split.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Protocol, TypeVar

SALT = "hindsight-turn-classifier/"
FOLD_SALT = "hindsight-turn-classifier-fold/"
HELD_BACK_MODULUS = 4


class HasId(Protocol):
    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=HasId)


def _first_byte(salt: str, turn_id: str) -> int:
    return hashlib.sha256((salt + turn_id).encode("utf-8")).digest()[0]


def is_held_back(turn_id: str) -> bool:
    """True for the quarter kept for the final evaluation."""
    return _first_byte(SALT, turn_id) % HELD_BACK_MODULUS == 0


def split(turns: Sequence[T]) -> tuple[list[T], list[T]]:
    """(training turns, held-back turns), each in corpus order."""
    training = [turn for turn in turns if not is_held_back(turn.id)]
    held_back = [turn for turn in turns if is_held_back(turn.id)]
    return training, held_back


def fold_of(turn_id: str, folds: int) -> int:
    """The cross-validation fold of a training turn (a hash of the id, like the split)."""
    digest = hashlib.sha256((FOLD_SALT + turn_id).encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") % folds
