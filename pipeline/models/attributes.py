"""The slot-attribute model: which attribute of the speaker's world a statement gives a value of.

"My go-to editor is Vim" and "Helix has completely won me over, it's the only editor I open" share
no value and few words, yet both give the value of one attribute (the code editor); "Team chat:
Slack." and "Issue tracker: Linear." share their shape and give two. The rules in
``pipeline/memory/rules/slots.py`` read shapes and values; this model reads meaning. It is a
multinomial logistic regression over the two sentence vectors the turn classifier reads (the
encoder's vector of the turn's search text and the multilingual USE vector of the same text),
trained by ``python -m training.attributes.train`` on an inventory of attributes written for it
(``training/attributes/CORPUS.md``): each attribute with statements that give its values in
English and Chinese, in many registers, and whether a person holds one value of it at a time
(``single_valued``: a phone, a manager, a dose) or several (hobbies, friends).

``prepare`` asks it about every statement that takes a slot and records the answer in the slot
(``Slot.attribute``, ``Slot.attribute_probability`` and its ``TOP_ATTRIBUTES`` most probable
attributes, ``Slot.attribute_shares``) with the model's id in the prepared event,
so ``consolidate`` and replay read the recorded answer and never run the model (I2). It is tied
to the encoders it was trained on; :func:`attribute_model_for` returns ``None`` for others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pipeline.models.encoders import (
    Encoder,
    EncoderUnavailable,
    VectorMemo,
    encode_one_at_a_time_once,
    load_encoder_of,
)
from pipeline.models.softmax_head import SoftmaxHead
from pipeline.models.trained_files import load_trained_file, manifest_field
from schemas.errors import HindsightError
from schemas.memory import AttributeShare

WEIGHTS_DIR = Path(__file__).with_name("weights")
DEFAULT_ATTRIBUTE_MODEL = "slot-attributes-v3"
NONE_LABEL = "none"  # statements that give no lasting value of any attribute
# How many of a statement's most probable attributes ``prepare`` records: neighbouring attributes
# (therapist / therapy schedule) share their mass, and comparing two statements needs more than
# the argmax of each (attribute_chance.same_attribute_chance). Beyond this, the mass left is small.
TOP_ATTRIBUTES = 5

Array = npt.NDArray[np.float64]


class AttributeFileError(HindsightError):
    """A weights file or manifest that does not load or does not match; names the field."""


@dataclass(frozen=True)
class AttributeGuess:
    """The model's answer for one statement: its most probable attribute and how sure it is."""

    attribute: str  # an attribute id, or NONE_LABEL
    probability: float  # rounded to four digits: all a decision reads, the same in every process
    single_valued: bool  # a new value of it replaces the old one
    # The most probable attributes, most probable first (rounded alike); None: not known (a
    # guess made without them decides by the argmax alone, as records of older builds do).
    shares: tuple[AttributeShare, ...] | None = None

    def slot_fields(self) -> dict[str, object]:
        """The guess as the fields of ``schemas.memory.Slot`` that record it."""
        return {
            "attribute": self.attribute,
            "attribute_probability": self.probability,
            "single_valued": self.single_valued,
            "attribute_shares": None if self.shares is None else list(self.shares),
        }


class AttributeModel:
    """A loaded attribute file: logits = [vector, second vector] · W + b, softmax over labels."""

    def __init__(
        self, manifest: dict[str, Any], arrays: dict[str, Array], second: Encoder | None = None
    ) -> None:
        """``second``: the second encoder itself (tests); by default the one the manifest names,
        loaded when first needed."""
        self.manifest = manifest
        self._second = second
        self.id: str = _field(manifest, "model_id", str)
        self.encoder_name: str = _field(manifest, "encoder_name", str)
        self.encoder_id: str = _field(manifest, "encoder_id", str)
        self.dimension: int = _field(manifest, "embedding_dimension", int)
        named = _field(manifest, "second_encoder", dict)
        self.second_encoder_name: str = _field(named, "name", str)
        self.second_encoder_id: str = _field(named, "id", str)
        self.second_dimension: int = _field(named, "dimension", int)
        self.labels: tuple[str, ...] = tuple(_field(manifest, "labels", list))
        single = _field(manifest, "single_valued", list)
        if len(single) != len(self.labels) or not all(isinstance(s, bool) for s in single):
            raise AttributeFileError("single_valued: expected one boolean per label")
        self.single_valued: tuple[bool, ...] = tuple(single)
        if NONE_LABEL not in self.labels:
            raise AttributeFileError(f"labels: {self.id} has no {NONE_LABEL!r} label")
        width = self.dimension + self.second_dimension
        self._head = SoftmaxHead(arrays, width, len(self.labels), self.id, AttributeFileError)

    def fits(self, encoder_name: str) -> bool:
        """True when vectors of this encoder (by model name, any backend) are what it reads."""
        return encoder_name == self.encoder_name

    def second_vectors(self, texts: Sequence[str], memo: VectorMemo | None = None) -> Array:
        """The multilingual vectors of ``texts``, one text at a time (a text's answer must not
        depend on what it was batched with); ``memo`` shares them with the turn classifier."""
        if self._second is None:
            self._second = load_encoder_of(self.second_encoder_name, self.second_encoder_id)
        return encode_one_at_a_time_once(self._second, texts, memo).astype(np.float64)

    def guesses(self, inputs: npt.ArrayLike) -> list[AttributeGuess]:
        """One guess per row of ``inputs`` ([encoder vector, second vector], as in training)."""
        return [self._guess(row) for row in self._head.rows(inputs)]

    def probabilities(self, row: Array) -> Array:
        """Every label's probability for one input row, in :attr:`labels` order."""
        return self._head.probabilities(row)

    def _guess(self, row: Array) -> AttributeGuess:
        probabilities = self.probabilities(row)
        # Most probable first; ties by label order, so every process records the same list.
        top = np.argsort(-probabilities, kind="stable")[:TOP_ATTRIBUTES]
        shares = tuple(
            AttributeShare(
                attribute=self.labels[i],
                probability=round(float(probabilities[i]), 4),
                single_valued=self.single_valued[i],
            )
            for i in (int(i) for i in top)
        )
        best = shares[0]
        return AttributeGuess(best.attribute, best.probability, best.single_valued, shares)


def _field(manifest: dict[str, Any], name: str, kind: type) -> Any:
    return manifest_field(manifest, name, kind, AttributeFileError, "the attribute model's")


def load_attribute_model(
    name: str = DEFAULT_ATTRIBUTE_MODEL, directory: Path = WEIGHTS_DIR
) -> AttributeModel:
    """Load ``<directory>/<name>.json`` and its arrays; the arrays' hash must match."""
    manifest, arrays = load_trained_file(name, directory, AttributeFileError)
    return AttributeModel(manifest, arrays)


_LOADED: dict[str, AttributeModel] = {}


def attribute_model_for(encoder_name: str, enabled: bool = True) -> AttributeModel | None:
    """The shipped attribute model if ``enabled``, it reads this encoder's vectors and its second
    encoder is installed; else ``None`` (the rules decide updates alone, as before it)."""
    if not enabled:
        return None
    if DEFAULT_ATTRIBUTE_MODEL not in _LOADED:
        _LOADED[DEFAULT_ATTRIBUTE_MODEL] = load_attribute_model()
    model = _LOADED[DEFAULT_ATTRIBUTE_MODEL]
    if not model.fits(encoder_name):
        return None
    try:
        load_encoder_of(model.second_encoder_name, model.second_encoder_id)
    except EncoderUnavailable:
        return None
    return model
