"""One hop across sessions: shared specific entities and near-identical memories."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import numpy as np
from recall_support import AT, make_record

from pipeline.recall.hot_index import HotIndex
from pipeline.recall.links import linked
from schemas.memory import MemoryRecord, SourceTurn


def unit(*values: float) -> list[float]:
    vector = np.array(values, dtype=np.float32)
    return (vector / np.linalg.norm(vector)).tolist()


def rec(memory_id: str, session: str, vector: list[float], entities: list[str]) -> MemoryRecord:
    created = AT - timedelta(days=1)
    return make_record(
        memory_id,
        f"text of {memory_id}",
        vector=vector,
        entities=entities,
        created_at=created,
        provenance=[
            SourceTurn(
                event_id=f"e-{memory_id}", session_id=session, speaker="u", event_time=created
            )
        ],
    )


def view_of(records: list[MemoryRecord]) -> HotIndex:
    index = HotIndex(3)
    for record in records:
        index.apply(record)
    return index


RECORDS = [
    rec("seed", "s1", unit(1, 0, 0), ["Stockholm", "Anna"]),
    rec("same-entity", "s2", unit(0, 1, 0), ["Stockholm"]),
    rec("same-session", "s1", unit(0, 1, 0), ["Stockholm"]),
    rec("near", "s3", unit(1, 0.1, 0), []),
    rec("far", "s4", unit(0, 0, 1), ["Anna"]),
    *[rec(f"anna{i}", "s5", unit(0, 0, 1), ["Anna"]) for i in range(6)],
]


def hops(
    seed_relevance: float,
    accept: Callable[[str], bool] = lambda _id: True,
    *,
    min_cosine: float = 0.9,
    per_seed: int = 10,
    reading: float = 1.0,
) -> dict[str, float]:
    """``linked`` from the one seed of ``RECORDS`` (entities count from specificity 0.5)."""
    view = view_of(RECORDS).view("ns")
    assert view is not None
    return linked(
        view,
        [("seed", seed_relevance)],
        accept,
        min_specificity=0.5,
        min_cosine=min_cosine,
        per_seed=per_seed,
        reading=reading,
    )


def test_links_follow_specific_entities_and_near_copies_in_other_sessions() -> None:
    found = hops(0.8)
    assert set(found) == {"same-entity", "near"}  # not its own session, not the common "Anna"
    assert found["near"] > found["same-entity"]  # cosine 0.995 beats the entity's specificity
    assert found["near"] <= 0.8


def test_links_respect_the_filter_and_the_per_seed_cap() -> None:
    found = hops(1.0, lambda memory_id: memory_id != "near", per_seed=1)
    assert list(found) == ["same-entity"]


def test_a_near_copy_counts_as_much_as_the_encoder_read_of_the_question() -> None:
    # MiniLM finds two Chinese texts alike whatever they say: read at 0.2, the near copy is no
    # link, and the shared specific entity still is.
    def read(reading: float) -> dict[str, float]:
        return hops(0.8, min_cosine=0.6, reading=reading)

    assert set(read(1.0)) == {"same-entity", "near"}
    assert set(read(0.9)) == {"same-entity", "near"} and read(0.9)["near"] < read(1.0)["near"]
    assert set(read(0.2)) == {"same-entity"}
