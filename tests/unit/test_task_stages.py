"""The task-stage model (pipeline/models/stages.py): its file, what prepare records, and where the
update rule reads it (slots.state_progress)."""

from __future__ import annotations

import numpy as np
import pytest
from ingest_support import ExactEncoder, Log

from pipeline.ingest.prepare import prepare_batch
from pipeline.memory.rules.slots import Statement, slot_of, state_of_patterns, update_reason
from pipeline.models.attributes import AttributeModel
from pipeline.models.stages import (
    NO_STAGE,
    StageFileError,
    StageGuess,
    StageModel,
    load_stage_model,
)
from pipeline.runtime.settings import MemoryPolicy
from schemas.memory import Slot

POLICY = MemoryPolicy()
LABELS = [NO_STAGE, "planned", "in_progress", "done"]
FIRST, SECOND = 4, 2  # the encoder's and the second encoder's dimensions


def manifest(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "model_id": "tiny-stages-test",
        "encoder_name": "exact-test",
        "embedding_dimension": FIRST,
        "second_encoder": {"name": "second-test", "id": "second-test", "dimension": SECOND},
        "labels": LABELS,
    }
    return base | changes


def arrays() -> dict[str, np.ndarray]:
    weight = np.zeros((FIRST + SECOND, len(LABELS)))
    weight[:FIRST, :] = 10.0 * np.eye(FIRST)  # the first vector's axis i is label i
    return {"input_mean": np.zeros(FIRST + SECOND), "weight": weight, "bias": np.zeros(4)}


def axis(label: str) -> list[float]:
    row = [0.0] * FIRST
    row[LABELS.index(label)] = 1.0
    return row


def test_the_guess_is_the_most_probable_stage_one_row_at_a_time() -> None:
    model = StageModel(manifest(), arrays())
    rows = np.array([[*axis("done"), 0.0, 0.0], [*axis(NO_STAGE), 0.0, 0.0]])
    done, none = model.guesses(rows)
    assert done.stage == "done" and done.probability > 0.99
    assert none.stage == NO_STAGE
    assert model.guesses(rows[:1]) == [done]  # the same answer alone as in a batch
    assert done.slot_fields() == {"stage": "done", "stage_probability": done.probability}


@pytest.mark.parametrize(
    ("changes", "field"),
    [({"labels": ["none", "planned", "done"]}, "labels"), ({"embedding_dimension": 3}, "shape")],
)
def test_a_broken_manifest_is_refused_naming_what_is_wrong(
    changes: dict[str, object], field: str
) -> None:
    with pytest.raises(StageFileError, match=field):
        StageModel(manifest(**changes), arrays())


def test_the_shipped_model_reads_what_the_attribute_model_reads() -> None:
    model = load_stage_model()
    assert model.reads("all-MiniLM-L6-v2", model.second_encoder_id)
    assert not model.reads("universal-sentence-encoder-multilingual-3", model.second_encoder_id)
    held_back = model.manifest["training"]["held_back"]
    # On statements nobody wrote for the patterns, the model reads more stages, and more of them
    # right, than the patterns do (training/stages/RESULTS.md).
    assert held_back["model"]["right"] > held_back["patterns"]["right"]
    assert held_back["model"]["precision"] > held_back["patterns"]["precision"]


def test_prepare_records_the_stage_in_the_slot_and_the_model_in_the_event() -> None:
    statement = "Got going on the fence, primer is on one side."
    encoder = ExactEncoder({statement: [1.0, 0.0, 0.0]}, dimension=3)
    second = ExactEncoder({}, dimension=2)
    attributes = AttributeModel(
        {
            "model_id": "tiny-attributes-test",
            "encoder_name": "exact-test",
            "encoder_id": "exact-test",
            "embedding_dimension": 3,
            "second_encoder": {"name": "second-test", "id": "second-test", "dimension": 2},
            "labels": ["none", "editor"],
            "single_valued": [False, True],
        },
        {"input_mean": np.zeros(5), "weight": np.zeros((5, 2)), "bias": np.zeros(2)},
        second,
    )
    stage_weight = np.zeros((5, 4))
    stage_weight[0, LABELS.index("in_progress")] = 10.0
    stages = StageModel(
        manifest(embedding_dimension=3),
        {"input_mean": np.zeros(5), "weight": stage_weight, "bias": np.zeros(4)},
    )
    batch = prepare_batch(
        [Log().turn(statement)],
        encoder,  # type: ignore[arg-type]
        attributes=attributes,
        stages=stages,
    )
    [(_, prepared)] = batch.prepared
    assert prepared.analysis is not None and prepared.analysis.slot is not None
    assert prepared.analysis.slot.stage == "in_progress"
    assert prepared.analysis.slot.stage_probability > 0.99
    assert prepared.models.stages == "tiny-stages-test"


# -- where the update rule reads it ----------------------------------------------------------------

UNDER_WAY = "Got going on the garden fence."
DONE = "Garden fence is done!"
CLOSE = (0.6, 0.8)  # statement cosine 0.6: the same task told again


def said(
    text: str, stage: StageGuess | None, vector: tuple[float, float] = (1.0, 0.0)
) -> Statement:
    slot: Slot = slot_of(text)
    if stage is not None:
        slot = slot.model_copy(update=stage.slot_fields())
    whole = np.array(vector, np.float32)
    return Statement("ana", "fact", "semantic", None, slot, whole, whole, "s1")


def test_a_stage_no_pattern_finds_moves_a_task_on_when_the_model_is_sure() -> None:
    assert state_of_patterns(UNDER_WAY) is None  # no state word: the patterns see no task
    sure = said(UNDER_WAY, StageGuess("in_progress", 0.97))
    why = update_reason(sure, said(DONE, None, CLOSE), POLICY)
    assert why is not None and why.startswith("state: state:in_progress -> state:done")
    unsure = said(UNDER_WAY, StageGuess("in_progress", POLICY.stage_probability - 0.01))
    assert update_reason(unsure, said(DONE, None, CLOSE), POLICY) is None
    assert update_reason(said(UNDER_WAY, None), said(DONE, None, CLOSE), POLICY) is None


def test_a_pattern_outranks_the_model_and_a_line_of_no_content_words_moves_no_task() -> None:
    # The patterns found a state: the model's reading of the same statement is not read.
    planned = said("Planning to repaint the fence in May.", StageGuess("done", 0.99))
    halfway = said("Fence is halfway painted now.", StageGuess("planned", 0.99), CLOSE)
    why = update_reason(planned, halfway, POLICY)
    assert why is not None and why.startswith("state: state:planned -> state:in_progress")
    # "That's settled then" read as done names no task: it moves none on.
    booked = said("周六下午在万达三楼的海底捞给老爸过生日，订的6点", StageGuess("planned", 0.95))
    settled = said("那就这么定了", StageGuess("done", 0.95), CLOSE)
    assert update_reason(booked, settled, POLICY) is None
