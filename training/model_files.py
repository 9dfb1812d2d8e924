"""Writing a trained model's files (``pipeline/models/trained_files.py`` reads them back).

The arrays go into an ``.npz`` with fixed member timestamps, so the same arrays give the same
bytes; the manifest gets the id, the arrays' file name and their hash, so a retrained file is a
new id on every event it prepares.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from pipeline.models.encoders import Encoder, encoder_id
from pipeline.models.trained_files import versioned_id

LOGISTIC_REGRESSION = "multinomial logistic regression (scikit-learn lbfgs, L2)"
MAX_ITER = 3000


def fit_centred(
    vectors: npt.NDArray[np.float64], labels: npt.NDArray[np.int64], c: float
) -> tuple[LogisticRegression, npt.NDArray[np.float64]]:
    """A logistic regression on mean-centred rows, and the mean (the shipped head subtracts it).
    lbfgs has no randomness, and one BLAS thread keeps the sums in one order, so the same rows
    give the same weights."""
    mean = vectors.mean(axis=0)
    with threadpool_limits(1):
        model = LogisticRegression(C=c, max_iter=MAX_ITER).fit(vectors - mean, labels)
    return model, mean


def encoder_fields(
    encoder: Encoder, second: Encoder | None, use: str | None = None
) -> dict[str, Any]:
    """The manifest fields naming the encoders whose vectors a model reads (the models check them
    when they load): the first encoder, and the second one's with how it is used if any."""
    fields: dict[str, Any] = {
        "model_type": LOGISTIC_REGRESSION,
        "encoder_name": encoder.name,
        "encoder_id": encoder_id(encoder),
        "embedding_dimension": encoder.dimension,
    }
    if second is not None:
        named = {"name": second.name, "id": encoder_id(second), "dimension": second.dimension}
        fields["second_encoder"] = named | ({"use": use} if use is not None else {})
    return fields


def zip_arrays(arrays: dict[str, npt.NDArray[Any]]) -> bytes:
    """An .npz with fixed member timestamps, so the same arrays give the same bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(arrays):
            member = io.BytesIO()
            np.lib.format.write_array(
                member, np.ascontiguousarray(arrays[name]), allow_pickle=False
            )
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, member.getvalue())
    return buffer.getvalue()


def write_model(
    out: Path, name: str, arrays: dict[str, npt.NDArray[Any]], manifest: dict[str, Any]
) -> Path:
    """Write ``<out>/<name>.npz`` (float32 arrays) and ``<out>/<name>.json``: ``manifest`` with
    the model id first and the arrays' file, dtype and sha256 last. Returns the manifest's path."""
    payload = zip_arrays(arrays)
    digest = hashlib.sha256(payload).hexdigest()
    out.mkdir(parents=True, exist_ok=True)
    weights_file = f"{name}.npz"
    (out / weights_file).write_bytes(payload)
    full = {
        "model_id": versioned_id(name, digest),
        **manifest,
        "weights_file": weights_file,
        "weights_dtype": "float32",
        "weights_sha256": digest,
    }
    path = out / f"{name}.json"
    path.write_text(json.dumps(full, indent=2, ensure_ascii=False) + "\n", "utf-8")
    return path
