import pytest

from pipeline.recall.entities import (
    STRONG,
    EntityIndex,
    extract_identifiers,
    query_entities,
    specificity,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("where is order SF123456?", ["SF123456"]),
        ("订单SF123456到哪了", ["SF123456"]),
        ("ticket INC-42 and PROJ-1234", ["INC-42", "PROJ-1234"]),
        ("mail ana.lopez@example.com today", ["ana.lopez@example.com"]),
        ("upgrade to v1.2.3 from 3.11", ["v1.2.3", "3.11"]),
        ("see #4521", ["#4521"]),
        ("call 13800138000", ["13800138000"]),
        ("nothing here to see", []),
    ],
)
def test_extract_identifiers(text: str, expected: list[str]) -> None:
    assert extract_identifiers(text) == expected


def test_query_entities_grade_evidence() -> None:
    found = {e.key: e.strength for e in query_entities("What did Ana Lopez say about SF123456?")}
    assert found["sf123456"] == STRONG
    assert found["ana lopez"] > found.get("ana", 0)
    assert "what" not in found


def test_index_matches_entities_and_content_identifiers() -> None:
    index = EntityIndex()
    index.add("m1", ["Postgres", "Ana Lopez"], "Ana moved billing to Postgres")
    index.add("m2", [], "Refund for order SF123456 approved")  # id only in the content
    index.add("m3", ["张伟"], "张伟喜欢喝咖啡")
    assert [h.memory_id for h in index.search("status of sf123456", k=5)] == ["m2"]
    assert [h.memory_id for h in index.search("what does postgres store", k=5)] == ["m1"]
    assert [h.memory_id for h in index.search("张伟喜欢什么", k=5)] == ["m3"]
    hits = index.search("Ana Lopez and Postgres", k=5)
    assert hits[0].memory_id == "m1" and len(hits[0].matched) >= 2
    assert index.search("sf123456", k=5, accept=lambda i: i != "m2") == []


def test_update_and_remove() -> None:
    index = EntityIndex()
    index.add("m1", ["Redis"])
    index.add("m1", ["Postgres"])
    assert index.search("redis", k=5) == []
    assert index.remove("m1") and not index.remove("m1")
    assert index.search("postgres", k=5) == [] and len(index) == 0


def test_an_entity_most_memories_share_is_weak_evidence() -> None:
    index = EntityIndex()
    for number in range(20):
        index.add(f"m{number:02d}", ["Caroline"], "Caroline, how was your week?")
    index.add("rare", ["Caroline", "Okafor"], "Caroline met Dr. Okafor")
    assert specificity(1, 21) == 1.0 and specificity(21, 21) < 0.3
    hits = index.search("Did Caroline see Okafor?", k=3)
    assert hits[0].memory_id == "rare"
    assert all(hit.score < 0.3 for hit in hits[1:])  # a shared name alone says little
