"""The files of the models trained here (``weights/<name>.{npz,json}``): read and checked.

A trained model ships as a manifest (``<name>.json``) and its arrays (``<name>.npz``). The
manifest names the arrays' file and their sha256, and its ``model_id`` is the name plus the
first 12 hex digits of that hash (:func:`versioned_id`). So a retrained file is a new id on every
event it prepares, and arrays that do not match their manifest never load.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from schemas.errors import HindsightError

Arrays = dict[str, npt.NDArray[np.float64]]


def versioned_id(name: str, weights_sha256: str) -> str:
    """The id recorded with each prepared event: the file's name and its arrays' hash."""
    return f"{name}-{weights_sha256[:12]}"


def manifest_field(
    manifest: dict[str, Any], name: str, kind: type, error: type[HindsightError], owner: str
) -> Any:
    """``manifest[name]``, checked to be a ``kind`` (an int passes as a float, a bool never
    passes as a number); failures raise ``error`` naming the field and ``owner``'s manifest."""
    if name not in manifest:
        raise error(f"{name}: missing from {owner} manifest")
    value = manifest[name]
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        return value
    if not isinstance(value, kind) or isinstance(value, bool):
        raise error(f"{name}: expected {kind.__name__}, got {value!r}")
    return value


def load_trained_file(
    name: str, directory: Path, error: type[HindsightError]
) -> tuple[dict[str, Any], Arrays]:
    """The manifest and the arrays (as float64) of ``<directory>/<name>``, checked: the arrays'
    hash matches the manifest and the manifest's id is :func:`versioned_id` of both. Failures
    raise ``error`` naming the field."""
    manifest_path = directory / f"{name}.json"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as problem:
        raise error(f"{manifest_path}: cannot read the manifest ({problem})") from None
    if not isinstance(manifest, dict):
        raise error(f"{manifest_path}: the manifest is not a JSON object")
    arrays_path = directory / manifest_field(manifest, "weights_file", str, error, "the")
    try:
        digest = hashlib.sha256(arrays_path.read_bytes()).hexdigest()
    except OSError as problem:
        raise error(f"weights_file: cannot read {arrays_path} ({problem})") from None
    if digest != manifest_field(manifest, "weights_sha256", str, error, "the"):
        raise error(f"weights_sha256: {arrays_path} does not match its manifest")
    expected = versioned_id(name, digest)
    if manifest_field(manifest, "model_id", str, error, "the") != expected:
        raise error(
            f"model_id: {manifest_path} holds {manifest['model_id']!r}, expected {expected!r}"
        )
    with np.load(arrays_path, allow_pickle=False) as stored:
        arrays = {key: np.asarray(stored[key], dtype=np.float64) for key in stored.files}
    return manifest, arrays


def shaped_arrays(
    arrays: Arrays,
    shapes: dict[str, tuple[int, ...]],
    owner: str,
    error: type[HindsightError],
) -> Arrays:
    """The arrays ``shapes`` names, each of the shape it gives: a missing one raises ``error``
    naming it (before any shape is checked), then a misshapen one naming its shape and the
    expected one."""
    for name in shapes:
        if name not in arrays:
            raise error(f"{name}: missing from {owner}'s arrays")
    for name, wanted in shapes.items():
        if arrays[name].shape != wanted:
            raise error(f"{name}: shape {arrays[name].shape}, expected {wanted}")
    return {name: arrays[name] for name in shapes}
