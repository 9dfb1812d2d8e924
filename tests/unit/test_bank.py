"""``NamespaceBank``: the per-region vector matrix grows and shrinks with ids and rows aligned, and
a bank loaded from its records (as a restore does) has the same derived indexes as the live one."""

from __future__ import annotations

import random
from datetime import timedelta

import numpy as np
from recall_support import AT
from recall_support import make_record as recall_record

from pipeline.memory.bank import Change, NamespaceBank
from pipeline.memory.rules.slots import slot_of
from schemas.memory import BankCounters, MemoryRecord, SourceTurn, Triplet

DIMENSION = 8


def unit(rng: random.Random) -> list[float]:
    values = np.array([rng.gauss(0, 1) for _ in range(DIMENSION)], dtype=np.float32)
    return (values / np.linalg.norm(values)).tolist()


def make(
    memory_id: str,
    vector: list[float],
    *,
    region: str = "semantic",
    offset: int = 0,
    session: str = "s1",
    **changes: object,
) -> MemoryRecord:
    record = recall_record(
        memory_id,
        f"content of {memory_id}",
        namespace="acme",
        region=region,
        vector=vector,
        origin_offset=offset,
        provenance=[
            SourceTurn(event_id=f"turn-{memory_id}", session_id=session, speaker="a", event_time=AT)
        ],
        **changes,
    )
    return record


def created(record: MemoryRecord) -> Change:
    return Change("created", record, record.provenance[0].event_id, AT)


def erased(record: MemoryRecord) -> Change:
    return Change("erased", record, "cmd", AT)


def assert_aligned(bank: NamespaceBank, live: dict[str, list[float]], order: list[str]) -> None:
    probe = np.asarray(unit(random.Random(99)), dtype=np.float32)
    ids, sims = bank.similarities("semantic", probe)
    assert ids == [i for i in order if i in live]
    expected = [float(np.dot(np.asarray(live[i], np.float32), probe)) for i in ids]
    np.testing.assert_allclose(sims, expected, atol=1e-6)


def test_the_matrix_keeps_ids_and_rows_aligned_through_appends_and_removals() -> None:
    rng = random.Random(4)
    bank = NamespaceBank("acme")
    live: dict[str, list[float]] = {}
    order: list[str] = []
    records: dict[str, MemoryRecord] = {}
    for step in range(400):
        if live and rng.random() < 0.35:
            victim = rng.choice(sorted(live))
            bank.apply([erased(records[victim])])
            del live[victim]
            order.remove(victim)
        else:
            memory_id = f"m{step:03d}"
            records[memory_id] = make(memory_id, unit(rng), offset=step)
            bank.apply([created(records[memory_id])])
            live[memory_id] = records[memory_id].vector
            order.append(memory_id)
        if step % 37 == 0:
            assert_aligned(bank, live, order)
    assert len(live) > 64  # grew past its first capacity (16) more than once
    assert_aligned(bank, live, order)
    assert set(bank.records) == set(live)


def test_removing_the_first_middle_and_last_rows() -> None:
    rng = random.Random(1)
    bank = NamespaceBank("acme")
    records = [make(f"m{n:02d}", unit(rng), offset=n) for n in range(17)]  # one past capacity
    bank.apply([created(r) for r in records])
    live = {r.id: r.vector for r in records}
    order = [r.id for r in records]

    for victim in ("m16", "m00", "m08"):
        bank.apply([erased(next(r for r in records if r.id == victim))])
        del live[victim]
        assert_aligned(bank, live, order)

    # A row appended after removals lands in the freed space, aligned with its id.
    extra = make("m99", unit(rng), offset=99)
    bank.apply([created(extra)])
    live["m99"] = extra.vector
    assert_aligned(bank, live, [*order, "m99"])


def test_an_update_of_a_known_record_keeps_its_row() -> None:
    rng = random.Random(2)
    bank = NamespaceBank("acme")
    first, second = make("a", unit(rng)), make("b", unit(rng), offset=1)
    bank.apply([created(first), created(second)])

    bank.apply([Change("cooled", first.model_copy(update={"status": "cold"}), "tick", AT)])

    ids, _ = bank.similarities("semantic", np.asarray(first.vector, np.float32))
    assert ids == ["a", "b"]
    assert bank.records["a"].status == "cold"


def test_regions_have_separate_matrices_and_all_similarities_spans_them() -> None:
    rng = random.Random(3)
    bank = NamespaceBank("acme")
    fact = make("fact", unit(rng))
    how = make("how", unit(rng), region="procedural", offset=1)
    bank.apply([created(fact), created(how)])
    probe = np.asarray(fact.vector, np.float32)

    assert bank.similarities("semantic", probe)[0] == ["fact"]
    assert bank.similarities("procedural", probe)[0] == ["how"]
    assert bank.similarities("episodic", probe)[0] == []
    found = bank.all_similarities(probe)
    assert set(found) == {"fact", "how"}
    assert abs(found["fact"] - 1.0) < 1e-6


def test_a_loaded_bank_orders_its_records_by_origin_offset() -> None:
    rng = random.Random(5)
    records = [make(f"m{n}", unit(rng), offset=offset) for n, offset in enumerate([7, 2, 5])]
    live = NamespaceBank("acme")
    live.apply([created(r) for r in sorted(records, key=lambda r: r.origin_offset)])

    loaded = NamespaceBank.load("acme", list(reversed(records)))

    probe = np.asarray(unit(rng), np.float32)
    assert loaded.similarities("semantic", probe)[0] == ["m1", "m2", "m0"]
    live_ids, live_sims = live.similarities("semantic", probe)
    loaded_ids, loaded_sims = loaded.similarities("semantic", probe)
    assert live_ids == loaded_ids
    np.testing.assert_array_equal(live_sims, loaded_sims)


def test_a_loaded_bank_has_the_live_banks_segments_schedule_and_seen_turns() -> None:
    rng = random.Random(6)
    first = make("a", unit(rng), segment_id="g1")
    second = make("b", unit(rng), offset=1, segment_id="g2")
    other = make("c", unit(rng), offset=2, session="s2", segment_id="g3")
    live = NamespaceBank("acme")
    live.apply([created(first), created(second), created(other)])
    live.note_turn(AT)
    live.note_turn(AT - timedelta(hours=1))  # late: last_turn_at stays the latest

    loaded = NamespaceBank.load("acme", [other, second, first], live.counters())

    assert (
        loaded.counters()
        == live.counters()
        == BankCounters(
            namespace="acme", turns_seen=2, turns_since_consolidation=2, last_turn_at=AT
        )
    )
    for session in ("s1", "s2"):
        live_segment, live_vectors = live.session_segment(session)
        loaded_segment, loaded_vectors = loaded.session_segment(session)
        assert live_segment == loaded_segment
        assert [v.tolist() for v in live_vectors] == [v.tolist() for v in loaded_vectors]
    assert live.session_segment("s1")[0] == "g2"
    assert loaded.has_seen("turn-a") and loaded.has_seen("turn-c")
    assert not loaded.has_seen("turn-zzz")


def test_an_erase_forgets_the_records_turns_as_a_reload_would() -> None:
    rng = random.Random(7)
    kept, gone = make("kept", unit(rng)), make("gone", unit(rng), offset=1)
    bank = NamespaceBank("acme")
    bank.apply([created(kept), created(gone)])

    bank.apply([erased(gone)])

    reloaded = NamespaceBank.load("acme", [kept])
    assert bank.has_seen("turn-kept") and reloaded.has_seen("turn-kept")
    assert not bank.has_seen("turn-gone") and not reloaded.has_seen("turn-gone")
    live_segment, live_vectors = bank.session_segment("s1")
    loaded_segment, loaded_vectors = reloaded.session_segment("s1")
    assert live_segment == loaded_segment == kept.segment_id
    assert [v.tolist() for v in live_vectors] == [v.tolist() for v in loaded_vectors]


def test_a_merged_turn_is_seen_until_its_record_goes() -> None:
    rng = random.Random(8)
    record = make("a", unit(rng))
    merged = record.model_copy(
        update={
            "provenance": [
                *record.provenance,
                SourceTurn(event_id="turn-again", session_id="s1", speaker="a", event_time=AT),
            ]
        }
    )
    bank = NamespaceBank("acme")
    bank.apply([created(record), Change("merged", merged, "turn-again", AT)])

    assert bank.has_seen("turn-a") and bank.has_seen("turn-again")
    bank.apply([erased(merged)])
    assert not bank.has_seen("turn-a") and not bank.has_seen("turn-again")


def test_current_with_attribute_finds_active_and_cold_only() -> None:
    rng = random.Random(9)
    triplet = Triplet(subject="alice", attribute="database", value="MySQL")
    statuses = ["active", "cold", "superseded", "forgotten"]
    records = [
        make(status, unit(rng), offset=n, triplet=triplet, status=status)
        for n, status in enumerate(statuses)
    ]
    bank = NamespaceBank("acme")
    bank.apply([created(r) for r in records])

    other_value = Triplet(subject="alice", attribute="database", value="PostgreSQL")
    found = bank.current_with_attribute(other_value)

    assert sorted(r.id for r in found) == ["active", "cold"]
    assert (
        bank.current_with_attribute(Triplet(subject="bob", attribute="database", value="x")) == []
    )


def test_closest_current_spans_regions_skips_superseded_and_orders_by_closeness() -> None:
    probe = np.zeros(DIMENSION, np.float32)
    probe[0] = 1.0

    def at(cosine: float) -> list[float]:
        vector = [0.0] * DIMENSION
        vector[0], vector[1] = cosine, float(np.sqrt(1.0 - cosine * cosine))
        return vector

    near = make("near", at(0.9))
    episode = make("episode", at(0.7), region="episodic", offset=1)
    old = make("old", at(0.95), offset=2, status="superseded")
    far = make("far", at(0.2), offset=3)
    bank = NamespaceBank("acme")
    bank.apply([created(r) for r in (near, episode, old, far)])

    assert bank.closest_current(probe, 0.4, 8) == ["near", "episode"]
    assert bank.closest_current(probe, 0.4, 1) == ["near"]
    assert bank.vector("far") is not None and bank.vector("missing") is None


def test_current_naming_finds_current_memories_giving_a_name_until_they_go() -> None:
    rng = random.Random(11)
    priya = make("priya", unit(rng), slot=slot_of("My manager is Priya."))
    old = make(
        "old",
        unit(rng),
        offset=1,
        slot=slot_of("Priya runs the Tuesday demo."),
        status="superseded",
    )
    other = make("other", unit(rng), offset=2, slot=slot_of("My dentist is Dr Hollis."))
    bank = NamespaceBank("acme")
    bank.apply([created(r) for r in (priya, old, other)])

    assert bank.current_naming(["name:priya"], 5) == ["priya"]  # superseded ones are not current
    assert bank.current_naming(["name:nobody"], 5) == []

    bank.apply([erased(priya)])
    reloaded = NamespaceBank.load("acme", [old, other])
    assert (
        bank.current_naming(["name:priya"], 5) == reloaded.current_naming(["name:priya"], 5) == []
    )
