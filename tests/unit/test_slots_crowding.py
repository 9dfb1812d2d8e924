"""``training.slots.evaluate --one-namespace``: the pairs of a language told as one user's
statements, so a statement of one pair may supersede a memory of another, and that is counted."""

from __future__ import annotations

from pipeline.models.encoders import load_encoder
from pipeline.runtime.settings import Settings
from training.slots.evaluate import Pair, run_pairs


def pair(pair_id: str, older: str, newer: str, supersedes: bool) -> Pair:
    return Pair(
        id=pair_id,
        half="tune",
        lang="en",
        category="update" if supersedes else "keep",
        sub="switch" if supersedes else "unrelated",
        older={"speaker": "user", "text": older},
        newer={"speaker": "user", "text": newer},
        supersedes=supersedes,
    )


# The manager named in one pair is replaced by the manager named in the other.
PAIRS = [
    pair("a", "My manager is Priya Shah.", "I'm allergic to penicillin.", False),
    pair("b", "I live in Leeds.", "My manager is Tom Reed now.", False),
]


def test_alone_no_pair_touches_another() -> None:
    settings = Settings()
    outcomes, crowding = run_pairs(PAIRS, load_encoder(settings.encoder), settings)

    assert [o.superseded for o in outcomes] == [False, False]
    assert crowding == {"en": {"superseded_by_another_pair": 0, "turns_merged_away": 0}}


def test_in_one_namespace_a_statement_of_another_pair_supersedes_and_is_counted() -> None:
    settings = Settings()
    outcomes, crowding = run_pairs(
        PAIRS, load_encoder(settings.encoder), settings, one_namespace=True
    )

    assert [o.superseded for o in outcomes] == [False, False]  # not by their own newer ones
    # ... and the rule that did it is named: the extracted triplets (manager: Priya -> Tom).
    assert crowding == {
        "en": {
            "superseded_by_another_pair": 1,
            "turns_merged_away": 0,
            "superseded_by_another_pair/triplet": 1,
        }
    }
