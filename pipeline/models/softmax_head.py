"""The layer the attribute and stage models share: softmax((row − mean) · W + b), one row at a time.

Both are multinomial logistic regressions over the same inputs (the encoder's vector and the
second encoder's, side by side), shipped as ``input_mean``, ``weight`` and ``bias`` arrays.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pipeline.models.trained_files import shaped_arrays
from schemas.errors import HindsightError

Array = npt.NDArray[np.float64]


class SoftmaxHead:
    """A trained linear layer and its softmax, checked against the width and labels it serves."""

    def __init__(
        self,
        arrays: dict[str, Array],
        width: int,
        labels: int,
        owner: str,
        error: type[HindsightError],
    ) -> None:
        """``owner``: the model id named in errors; ``error``: the model's own file error."""
        self._owner, self._error = owner, error
        shapes = {"input_mean": (width,), "weight": (width, labels), "bias": (labels,)}
        checked = shaped_arrays(arrays, shapes, owner, error)
        self._mean, self._weight, self._bias = (checked[name] for name in shapes)

    def rows(self, inputs: npt.ArrayLike) -> Array:
        """``inputs`` as rows of the width the layer takes (refused naming both widths)."""
        rows = np.asarray(inputs, dtype=np.float64)
        if rows.size == 0:
            return rows.reshape(0, self._mean.shape[0])
        rows = rows.reshape(rows.shape[0], -1)
        if rows.shape[1] != self._mean.shape[0]:
            raise self._error(
                f"vector: {self._owner} takes {self._mean.shape[0]} dimensions, got {rows.shape[1]}"
            )
        return rows

    def probabilities(self, row: Array) -> Array:
        """Every label's probability for one input row, in label order.

        One row at a time: a batch's matrix product may round differently from the same row
        alone, and a statement's answer must not depend on its batch."""
        logits = (row - self._mean) @ self._weight + self._bias
        exp = np.exp(logits - logits.max())
        probabilities: Array = exp / exp.sum()
        return probabilities
