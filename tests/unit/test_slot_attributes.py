"""The slot-attribute model and the update it decides (``pipeline.models.attributes``,
``slots.same_attribute``, the bank's index, what ``prepare`` records).

A tiny model over hand-made vectors: each label owns an axis of the input, so each test states
exactly which attribute a statement is read as and how surely. The shipped model is measured by
``python -m training.attributes.evaluate`` and ``python -m training.slots.evaluate`` instead.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from ingest_support import T0, ExactEncoder, Log

from pipeline.ingest.prepare import prepare_batch
from pipeline.memory.bank import NamespaceBank
from pipeline.memory.rules.attribute_chance import same_attribute_chance
from pipeline.memory.rules.slots import (
    Statement,
    given_attributes,
    slot_of,
    update_reason,
)
from pipeline.models.attributes import (
    AttributeFileError,
    AttributeGuess,
    AttributeModel,
    load_attribute_model,
)
from pipeline.models.encoders import VectorMemo, encode_one_at_a_time_once
from pipeline.models.trained_files import versioned_id
from pipeline.runtime.settings import MemoryPolicy
from schemas.memory import (
    AttributeShare,
    HistoryEntry,
    Kind,
    MemoryRecord,
    Region,
    Slot,
    SourceTurn,
)

POLICY = MemoryPolicy()
LABELS = ("none", "editor", "hobby")
SINGLE = (False, True, False)
FIRST, SECOND = 3, 2  # the encoder's and the second encoder's dimensions


def manifest(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "model_id": "tiny-attributes-test",
        "encoder_name": "exact-test",
        "encoder_id": "exact-test",
        "embedding_dimension": FIRST,
        "second_encoder": {"name": "second-test", "id": "second-test", "dimension": SECOND},
        "labels": list(LABELS),
        "single_valued": list(SINGLE),
    }
    return base | changes


def arrays() -> dict[str, np.ndarray]:
    weight = np.zeros((FIRST + SECOND, len(LABELS)))
    weight[:FIRST, :] = 10.0 * np.eye(FIRST)  # the first vector's axis i is label i
    return {
        "input_mean": np.zeros(FIRST + SECOND),
        "weight": weight,
        "bias": np.zeros(len(LABELS)),
    }


def tiny_model(second: ExactEncoder | None = None) -> AttributeModel:
    return AttributeModel(manifest(), arrays(), second or ExactEncoder({}, dimension=SECOND))


def axis(label: str, sure: float = 1.0) -> list[float]:
    row = [0.0] * FIRST
    row[LABELS.index(label)] = sure
    return row


# -- the model --------------------------------------------------------------------------------


def test_the_guess_is_the_most_probable_label_with_its_flag() -> None:
    model = tiny_model()
    editor, hobby = model.guesses(np.array([[*axis("editor"), 0, 0], [*axis("hobby"), 0, 0]]))
    assert editor.attribute == "editor" and editor.single_valued
    assert editor.probability == pytest.approx(np.exp(10) / (np.exp(10) + 2), abs=1e-4)
    assert hobby.attribute == "hobby" and not hobby.single_valued
    unsure = model.guesses(np.array([[*axis("editor", 0.05), 0, 0]]))[0]
    assert unsure.probability < 0.5


def test_the_guess_records_the_most_probable_attributes_first() -> None:
    (guess,) = tiny_model().guesses(np.array([[0.0, 0.3, 0.2, 0, 0]]))
    assert guess.shares is not None
    assert [s.attribute for s in guess.shares] == ["editor", "hobby", "none"]
    assert [s.single_valued for s in guess.shares] == [True, False, False]
    first = guess.shares[0]
    assert (first.attribute, first.probability, first.single_valued) == (
        guess.attribute,
        guess.probability,
        guess.single_valued,
    )
    assert sum(s.probability for s in guess.shares) == pytest.approx(1.0, abs=1e-3)
    assert Slot(frame="…", **guess.slot_fields()).attribute_shares == list(guess.shares)  # type: ignore[arg-type]


def test_a_guess_does_not_depend_on_its_batch() -> None:
    model = tiny_model()
    rows = np.array([[*axis("editor", 0.3), 0.1, 0.2], [*axis("hobby", 0.7), 0.0, 0.4]])
    assert model.guesses(rows) == [model.guesses(row[None, :])[0] for row in rows]


def test_a_vector_of_another_width_is_refused() -> None:
    with pytest.raises(AttributeFileError, match="vector"):
        tiny_model().guesses(np.zeros((1, FIRST)))


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"labels": ["editor", "hobby", "other"]}, "labels"),
        ({"single_valued": [True]}, "single_valued"),
        ({"second_encoder": None}, "second_encoder"),
    ],
)
def test_a_broken_manifest_names_its_field(changes: dict[str, object], field: str) -> None:
    with pytest.raises(AttributeFileError, match=field):
        AttributeModel(manifest(**changes), arrays())


def write_model(directory: Path, name: str) -> None:
    buffer = directory / f"{name}.npz"
    np.savez(buffer, **arrays())
    digest = hashlib.sha256(buffer.read_bytes()).hexdigest()
    payload = manifest(
        model_id=versioned_id(name, digest), weights_file=buffer.name, weights_sha256=digest
    )
    (directory / f"{name}.json").write_text(json.dumps(payload))


def test_a_file_loads_by_name_and_its_id_carries_the_arrays_hash(tmp_path: Path) -> None:
    write_model(tmp_path, "tiny")
    model = load_attribute_model("tiny", tmp_path)
    assert model.id.startswith("tiny-") and len(model.id) == len("tiny-") + 12
    assert model.labels == LABELS


def test_arrays_that_do_not_match_their_manifest_are_refused(tmp_path: Path) -> None:
    write_model(tmp_path, "tiny")
    (tmp_path / "tiny.npz").write_bytes(b"something else")
    with pytest.raises(AttributeFileError, match="weights_sha256"):
        load_attribute_model("tiny", tmp_path)


def test_the_shipped_model_loads_and_reads_the_default_encoders() -> None:
    model = load_attribute_model()
    assert model.fits("all-MiniLM-L6-v2")
    assert "none" in model.labels and any(model.single_valued)


# -- the update rule --------------------------------------------------------------------------


def said(
    text: str,
    guess: AttributeGuess | None,
    *,
    session: str = "s1",
    vector: tuple[float, float] = (1.0, 0.0),
    speaker: str = "ana",
    kind: Kind = "fact",
    region: Region = "semantic",
) -> Statement:
    slot = slot_of(text)
    if guess is not None:
        slot = slot.model_copy(update=guess.slot_fields())
    # The frame as far from the other's as the statement: the frame rule sees no one slot.
    whole = np.array(vector, np.float32)
    return Statement(speaker, kind, region, None, slot, whole, whole, session)


EDITOR = AttributeGuess("editor", 0.9, True)
VIM = "My go-to editor is Vim, I've lived in it for ten years."
HELIX = "Helix has completely won me over, it's the only thing I open."
APART = (0.45, float(np.sqrt(1 - 0.45**2)))  # statement cosine 0.45: related, not a restatement


def test_one_single_valued_attribute_with_another_value_is_an_update() -> None:
    why = update_reason(said(VIM, EDITOR), said(HELIX, EDITOR, session="s2", vector=APART), POLICY)
    assert why is not None and why.startswith("attribute: editor (0.90, 0.90)")


@pytest.mark.parametrize(
    ("older", "newer", "what"),
    [
        (EDITOR, AttributeGuess("theme", 0.9, True), "another attribute"),
        (AttributeGuess("hobby", 0.9, False), AttributeGuess("hobby", 0.9, False), "adds up"),
        (EDITOR, AttributeGuess("editor", 0.45, True), "not sure enough"),
        (None, EDITOR, "no guess"),
    ],
)
def test_no_update_unless_both_are_surely_one_single_valued_attribute(
    older: AttributeGuess | None, newer: AttributeGuess, what: str
) -> None:
    assert (
        update_reason(said(VIM, older), said(HELIX, newer, session="s2", vector=APART), POLICY)
        is None
    ), what


@pytest.mark.parametrize(
    ("newer", "session", "vector", "what"),
    [
        (HELIX, "s1", APART, "the same conversation goes on about it"),
        ("Helix has completely won me over, is it the only thing I open?", "s2", APART, "asks"),
        ("I also use Helix for quick edits.", "s2", APART, "adds"),
        ("Still on Vim, just with a new config and more plugins.", "s2", APART, "keeps"),
        ("Vim is my editor, ten years now and counting.", "s2", APART, "the value again"),
        ("My brother swears by Helix, the only thing he opens.", "s2", APART, "someone else"),
        ("My flatmate swears by Helix, the only thing on that laptop.", "s2", APART, "flatmate"),
        ("Our neighbours swear by Helix, the only thing opened there.", "s2", APART, "neighbours"),
        (
            "Helix has completely won me over, it's the only thing I open.",
            "s2",
            (0.9, 0.436),
            "same thing",
        ),
    ],
)
def test_the_statements_structure_still_decides(
    newer: str, session: str, vector: tuple[float, float], what: str
) -> None:
    older = said(VIM, EDITOR)
    if what == "same thing":
        older = said(HELIX + " Love it.", EDITOR)
    assert (
        update_reason(older, said(newer, EDITOR, session=session, vector=vector), POLICY) is None
    ), what


def test_another_speaker_or_a_past_event_is_never_updated() -> None:
    newer = said(HELIX, EDITOR, session="s2", vector=APART)
    assert update_reason(said(VIM, EDITOR, speaker="bo"), newer, POLICY) is None
    event = said("Yesterday I fixed the build in Vim.", EDITOR, region="episodic")
    assert update_reason(event, newer, POLICY) is None


# -- the two distributions ---------------------------------------------------------------------


def shared(*shares: tuple[str, float, bool]) -> AttributeGuess:
    """A guess with its recorded distribution, as ``prepare`` writes it since it records one."""
    listed = tuple(
        AttributeShare(attribute=a, probability=p, single_valued=s) for a, p, s in shares
    )
    return AttributeGuess(
        listed[0].attribute, listed[0].probability, listed[0].single_valued, listed
    )


def slot_with(guess: AttributeGuess) -> Slot:
    return Slot(frame="…", **guess.slot_fields())  # type: ignore[arg-type]


def test_the_chance_sums_the_products_of_single_valued_attributes_both_list() -> None:
    older = shared(("editor", 0.55, True), ("ide", 0.3, True), ("hobby", 0.1, False))
    newer = shared(("ide", 0.5, True), ("editor", 0.4, True), ("hobby", 0.05, False))
    chance = same_attribute_chance(slot_with(older), slot_with(newer))
    assert chance is not None
    assert chance[0] == pytest.approx(0.55 * 0.4 + 0.3 * 0.5)  # several values (hobby) add none
    assert chance[1] == "editor"  # the attribute that gives most of it
    other = shared(("theme", 0.9, True), ("hobby", 0.1, False))
    assert same_attribute_chance(slot_with(older), slot_with(other)) == (0.0, "")


def test_without_a_recorded_distribution_there_is_no_chance() -> None:
    with_list = slot_with(shared(("editor", 0.9, True)))
    assert same_attribute_chance(slot_with(EDITOR), with_list) is None
    assert same_attribute_chance(with_list, slot_with(EDITOR)) is None


def test_two_argmaxes_apart_can_still_be_one_attribute() -> None:
    # Neither argmax rule would pass: the argmaxes differ and neither is 0.6 sure.
    older = shared(("editor", 0.55, True), ("ide", 0.3, True))
    newer = shared(("ide", 0.5, True), ("editor", 0.4, True))
    why = update_reason(said(VIM, older), said(HELIX, newer, session="s2", vector=APART), POLICY)
    assert why is not None and why.startswith("attribute: editor (chance 0.37)")


@pytest.mark.parametrize(
    ("older", "newer", "updates"),
    [
        (shared(("editor", 0.98, True)), shared(("editor", 0.35, True)), True),  # 0.34
        (shared(("editor", 0.5, True)), shared(("editor", 0.5, True)), False),  # 0.25
        (shared(("hobby", 0.95, False)), shared(("hobby", 0.95, False)), False),  # adds up
    ],
)
def test_the_chance_decides_at_the_policys_bound(
    older: AttributeGuess, newer: AttributeGuess, updates: bool
) -> None:
    why = update_reason(said(VIM, older), said(HELIX, newer, session="s2", vector=APART), POLICY)
    assert (why is not None) == updates


def test_the_structure_still_decides_with_distributions() -> None:
    sure = shared(("editor", 0.95, True))
    adds = said("I also use Helix for quick edits.", sure, session="s2", vector=APART)
    assert update_reason(said(VIM, sure), adds, POLICY) is None
    same_conversation = said(HELIX, sure, vector=APART)
    assert update_reason(said(VIM, sure), same_conversation, POLICY) is None


def test_a_record_of_an_older_build_decides_by_the_argmax_rule() -> None:
    # By the chance (0.9 · 0.5 = 0.45) this would be an update; by the argmax rule, whose bound
    # both must reach, it is not: an old log replays as it decided.
    newer = said(HELIX, shared(("editor", 0.5, True)), session="s2", vector=APART)
    assert update_reason(said(VIM, EDITOR), newer, POLICY) is None
    surer = said(HELIX, shared(("editor", 0.65, True)), session="s2", vector=APART)
    why = update_reason(said(VIM, EDITOR), surer, POLICY)
    assert why is not None and why.startswith("attribute: editor (0.90, 0.65)")


def test_the_attributes_a_statement_may_give() -> None:
    spread = slot_with(shared(("editor", 0.6, True), ("hobby", 0.3, False), ("ide", 0.05, True)))
    assert given_attributes(spread) == ["editor", "ide"]
    assert given_attributes(spread, chance=0.3) == ["editor"]  # 0.05 < 0.3 / 3: cannot reach it
    assert given_attributes(slot_with(EDITOR)) == ["editor"]  # an older build's record
    assert given_attributes(slot_with(AttributeGuess("hobby", 0.9, False))) == []
    assert given_attributes(Slot(frame="…")) == []


# -- the bank's index ---------------------------------------------------------------------------


def record(memory_id: str, guess: AttributeGuess | None, offset: int) -> MemoryRecord:
    slot = Slot(frame="…", **(guess.slot_fields() if guess is not None else {}))  # type: ignore[arg-type]
    at = T0 + timedelta(minutes=offset)
    return MemoryRecord(
        id=memory_id,
        namespace="ns",
        region="semantic",
        kind="fact",
        content=memory_id,
        search_text=memory_id,
        slot=slot,
        base_importance=0.7,
        importance=0.7,
        created_at=at,
        valid_from=at,
        updated_at=at,
        segment_id="seg",
        provenance=[
            SourceTurn(event_id=f"e-{memory_id}", session_id="s", speaker="ana", event_time=at)
        ],
        activation=0.7,
        activation_at=at,
        history=[HistoryEntry(at=at, change="created", cause_event_id=f"e-{memory_id}")],
        vector=[1.0, 0.0],
        origin_offset=offset,
    )


def test_the_bank_finds_current_memories_of_a_single_valued_attribute_newest_first() -> None:
    bank = NamespaceBank.load(
        "ns",
        [
            record("vim", EDITOR, 0),
            record("emacs", EDITOR, 1),
            record("chess", AttributeGuess("hobby", 0.9, False), 2),
            record("plain", None, 3),
        ],
    )
    assert bank.current_giving("editor", 5) == ["emacs", "vim"]
    assert bank.current_giving("editor", 1) == ["emacs"]
    assert bank.current_giving("hobby", 5) == []  # several values at once: nothing to replace
    retired = bank.records["emacs"].model_copy(update={"status": "superseded"})
    bank.records["emacs"] = retired
    assert bank.current_giving("editor", 5) == ["vim"]


def test_the_bank_indexes_every_single_valued_attribute_of_a_distribution() -> None:
    spread = shared(("ide", 0.5, True), ("editor", 0.4, True), ("hobby", 0.1, False))
    bank = NamespaceBank.load("ns", [record("vim", EDITOR, 0), record("helix", spread, 1)])
    assert bank.current_giving("editor", 5) == ["helix", "vim"]
    assert bank.current_giving("ide", 5) == ["helix"]
    assert bank.current_giving("hobby", 5) == []


# -- what prepare records -----------------------------------------------------------------------


def test_prepare_records_the_guess_in_the_slot_and_the_model_in_the_event() -> None:
    statement = "My go-to editor is Vim."
    encoder = ExactEncoder({statement: axis("editor")}, dimension=FIRST)
    second = ExactEncoder({}, dimension=SECOND)
    log = Log()
    batch = prepare_batch(
        [log.turn(statement), log.turn("hi there")],
        encoder,  # type: ignore[arg-type]
        attributes=tiny_model(second),
    )
    (_, kept), (_, chatter) = batch.prepared
    assert kept.analysis is not None and kept.analysis.slot is not None
    assert kept.analysis.slot.attribute == "editor" and kept.analysis.slot.single_valued
    assert kept.analysis.slot.attribute_probability > 0.99
    shares = kept.analysis.slot.attribute_shares
    assert shares is not None and shares[0].attribute == "editor" and len(shares) == len(LABELS)
    assert kept.models.attributes == "tiny-attributes-test"
    assert chatter.analysis is not None and chatter.analysis.slot is None  # small talk: no slot
    assert second.calls == [[f"alice: {statement}"]]  # one statement, one text at a time


def test_a_long_chat_line_is_not_asked_about() -> None:
    line = (
        "Thanks for asking! I'm reading a fantasy book that really captivates me, it takes me to "
        "another world, full of magic and music, and I can't put it down at night lately"
    )
    encoder = ExactEncoder({line: axis("editor")}, dimension=FIRST)
    second = ExactEncoder({}, dimension=SECOND)
    batch = prepare_batch([Log().turn(line)], encoder, attributes=tiny_model(second))  # type: ignore[arg-type]
    [(_, prepared)] = batch.prepared
    assert prepared.analysis is not None and prepared.analysis.slot is not None
    assert prepared.analysis.slot.attribute is None
    assert second.calls == []


def test_vectors_two_models_read_are_embedded_once_per_batch() -> None:
    second = ExactEncoder({}, dimension=SECOND)
    memo: VectorMemo = {}
    first = encode_one_at_a_time_once(second, ["a b", "c d", "a b"], memo)
    again = encode_one_at_a_time_once(second, ["c d", "e f"], memo)
    assert second.calls == [["a b"], ["c d"], ["e f"]]
    assert np.array_equal(first[1], again[0]) and np.array_equal(first[0], first[2])


def test_the_distribution_is_kept_in_the_record_and_absent_from_older_ones() -> None:
    written = record("helix", shared(("ide", 0.5, True), ("editor", 0.4, True)), 1)
    restored = MemoryRecord.model_validate_json(written.model_dump_json())
    assert restored.slot == written.slot  # a restored bank decides as the live one
    older = written.model_dump(mode="json")
    assert older["slot"] is not None
    del older["slot"]["attribute_shares"]  # a record written before the field existed
    assert MemoryRecord.model_validate(older).slot.attribute_shares is None  # type: ignore[union-attr]
