"""The task-stage model: whether a statement tells a task planned, under way or done, or none.

"Got going on the fence, primer's on one side" is a task under way and "Fence is done!! two
coats all round" the same task done, yet only the second says a word the state patterns of
``pipeline/memory/rules/slots.py`` know. On statements written for it by people who never saw
those patterns (``training/stages/CORPUS.md``), the patterns name the stage of 11-25 % of the
statements that have one; the model reads meaning. It is a multinomial logistic regression over
the same two vectors as the attribute model (the encoder's vector of the statement's search text
and the multilingual USE vector of it), trained by ``python -m training.stages.train``.

``prepare`` asks it about the statements the attribute model reads and records its answer in the
slot (``Slot.stage``, ``Slot.stage_probability``) with the model's id in the prepared event, so
``consolidate`` and replay read the recorded answer and never run the model (I2). The update rule
reads it only where no state pattern spoke (``slots.state_progress``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pipeline.models.softmax_head import SoftmaxHead
from pipeline.models.trained_files import load_trained_file, manifest_field
from schemas.errors import HindsightError

WEIGHTS_DIR = Path(__file__).with_name("weights")
DEFAULT_STAGE_MODEL = "task-stages-v1"
NO_STAGE = "none"  # the label of statements that tell no task's stage
STAGES = ("planned", "in_progress", "done")

Array = npt.NDArray[np.float64]


class StageFileError(HindsightError):
    """A weights file or manifest that does not load or does not match; names the field."""


@dataclass(frozen=True)
class StageGuess:
    """The model's answer for one statement: its most probable stage and how sure it is."""

    stage: str  # one of STAGES, or NO_STAGE
    probability: float  # rounded to four digits, so every process records the same answer

    def slot_fields(self) -> dict[str, object]:
        """The guess as the fields of ``schemas.memory.Slot`` that record it."""
        return {"stage": self.stage, "stage_probability": self.probability}


class StageModel:
    """A loaded stage file: logits = [vector, second vector] · W + b, softmax over labels."""

    def __init__(self, manifest: dict[str, Any], arrays: dict[str, Array]) -> None:
        self.manifest = manifest
        self.id: str = _field(manifest, "model_id", str)
        self.encoder_name: str = _field(manifest, "encoder_name", str)
        named = _field(manifest, "second_encoder", dict)
        self.second_encoder_id: str = _field(named, "id", str)
        self.labels: tuple[str, ...] = tuple(_field(manifest, "labels", list))
        if set(self.labels) != {NO_STAGE, *STAGES}:
            raise StageFileError(f"labels: expected {sorted({NO_STAGE, *STAGES})}")
        width = _field(manifest, "embedding_dimension", int) + _field(named, "dimension", int)
        self._head = SoftmaxHead(arrays, width, len(self.labels), self.id, StageFileError)

    def reads(self, encoder_name: str, second_encoder_id: str) -> bool:
        """True when its inputs are what the attribute model reads: these two encoders' vectors."""
        return encoder_name == self.encoder_name and second_encoder_id == self.second_encoder_id

    def guesses(self, inputs: npt.ArrayLike) -> list[StageGuess]:
        """One guess per row of ``inputs`` ([encoder vector, second vector], as in training),
        one row at a time: a statement's answer must not depend on its batch."""
        return [self._guess(row) for row in self._head.rows(inputs)]

    def _guess(self, row: Array) -> StageGuess:
        probabilities = self._head.probabilities(row)
        best = int(np.argmax(probabilities))  # ties: the first label, in every process
        return StageGuess(self.labels[best], round(float(probabilities[best]), 4))


def _field(manifest: dict[str, Any], name: str, kind: type) -> Any:
    return manifest_field(manifest, name, kind, StageFileError, "the stage model's")


def load_stage_model(name: str = DEFAULT_STAGE_MODEL, directory: Path = WEIGHTS_DIR) -> StageModel:
    """Load ``<directory>/<name>.json`` and its arrays; the arrays' hash must match."""
    manifest, arrays = load_trained_file(name, directory, StageFileError)
    return StageModel(manifest, arrays)


_LOADED: dict[str, StageModel] = {}


def stage_model_for(
    encoder_name: str, second_encoder_id: str | None, enabled: bool = True
) -> StageModel | None:
    """The shipped stage model if ``enabled`` and it reads what the attribute model reads (this
    encoder, and the attribute model's second encoder ``second_encoder_id``); else ``None`` (the
    state patterns decide alone, as before it)."""
    if not enabled or second_encoder_id is None:
        return None
    if DEFAULT_STAGE_MODEL not in _LOADED:
        _LOADED[DEFAULT_STAGE_MODEL] = load_stage_model()
    model = _LOADED[DEFAULT_STAGE_MODEL]
    return model if model.reads(encoder_name, second_encoder_id) else None
