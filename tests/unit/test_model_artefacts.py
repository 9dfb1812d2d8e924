"""Export fingerprints and the artefact lookup: what makes a cached export valid or stale."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from pipeline.models import export
from pipeline.models.artefacts import (
    MANIFEST,
    MINILM,
    ExportKey,
    ModelArtefactMissing,
    find_export,
    hash_files,
    library_versions,
    read_manifest,
)

VERSIONS = {"torch": "2.15.0", "onnxruntime": "1.32.0"}


def _weights(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "model.safetensors").write_bytes(b"weights")
    (root / "sub" / "config.json").write_text("{}")
    return root


def test_the_weights_hash_changes_with_a_byte_or_a_name(tmp_path: Path) -> None:
    weights = _weights(tmp_path / "w")
    first = hash_files(weights)
    assert hash_files(weights) == first
    (weights / "model.safetensors").write_bytes(b"weightz")
    second = hash_files(weights)
    assert second != first
    (weights / "model.safetensors").rename(weights / "other.safetensors")
    assert hash_files(weights) not in {first, second}


def test_hashing_named_files_fails_clearly_when_one_is_missing(tmp_path: Path) -> None:
    with pytest.raises(ModelArtefactMissing, match="missing file"):
        hash_files(_weights(tmp_path / "w"), ["model.safetensors", "absent.bin"])


def test_the_fingerprint_follows_weights_versions_and_recipe() -> None:
    key = ExportKey("m", "aa", VERSIONS)
    assert key.fingerprint == ExportKey("m", "aa", dict(reversed(VERSIONS.items()))).fingerprint
    others = [
        ExportKey("m", "ab", VERSIONS),
        ExportKey("m", "aa", {**VERSIONS, "torch": "2.16.0"}),
        ExportKey("m", "aa", VERSIONS, recipe=key.recipe + 1),
        ExportKey("n", "aa", VERSIONS),
    ]
    assert len({key.fingerprint, *(o.fingerprint for o in others)}) == 5
    assert key.directory(Path("/r")) == Path(f"/r/m-{key.fingerprint}")


def test_library_versions_mark_what_is_not_installed() -> None:
    versions = library_versions(("numpy", "surely-not-installed-hindsight"))
    assert versions["numpy"] != "absent"
    assert versions["surely-not-installed-hindsight"] == "absent"
    key = ExportKey("m", "aa", versions)
    assert key.missing_libraries() == ["surely-not-installed-hindsight"]


def test_a_missing_export_names_the_command_that_builds_it(tmp_path: Path) -> None:
    key = ExportKey("m", "aa", {"torch": "absent"})
    with pytest.raises(ModelArtefactMissing) as caught:
        find_export(key, tmp_path)
    message = str(caught.value)
    assert "python -m pipeline.models.export" in message
    assert "torch not installed" in message
    assert "minilm-torch" in message


def test_an_export_without_its_manifest_or_a_listed_file_is_incomplete(tmp_path: Path) -> None:
    key = ExportKey("m", "aa", VERSIONS)
    directory = key.directory(tmp_path)
    directory.mkdir()
    (directory / "model-fp32.onnx").write_bytes(b"graph")
    assert read_manifest(directory) is None  # the manifest is written last
    manifest = {"files": {"model-fp32.onnx": "x", "tokenizer.json": "y"}}
    (directory / MANIFEST).write_bytes(orjson.dumps(manifest))
    assert read_manifest(directory) is None  # tokenizer.json is missing
    (directory / "tokenizer.json").write_text("{}")
    assert read_manifest(directory) == manifest
    assert find_export(key, tmp_path) == (directory, manifest)


def test_the_export_command_checks_without_building(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert export.main(["--check", "--root", str(tmp_path)]) == 1
    assert "missing" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_the_export_refuses_to_run_without_its_libraries(tmp_path: Path) -> None:
    key = ExportKey("all-MiniLM-L6-v2", "aa", {"torch": "2.15.0", "onnxscript": "absent"})
    with pytest.raises(ModelArtefactMissing, match="needs onnxscript"):
        export.build(MINILM, key, tmp_path)


def test_only_mean_pooling_is_exported(tmp_path: Path) -> None:
    weights = tmp_path / "w"
    (weights / "1_Pooling").mkdir(parents=True)
    (weights / "sentence_bert_config.json").write_text('{"max_seq_length": 256}')
    (weights / "modules.json").write_text('[{"type": "sentence_transformers.models.Normalize"}]')
    pooling = {"word_embedding_dimension": 8, "pooling_mode_mean_tokens": True}
    (weights / "1_Pooling" / "config.json").write_bytes(orjson.dumps(pooling))
    config = export.sentence_config(weights)
    assert config == {"max_seq_length": 256, "dimension": 8, "pooling": "mean", "normalize": True}
    pooling["pooling_mode_cls_token"] = True
    (weights / "1_Pooling" / "config.json").write_bytes(orjson.dumps(pooling))
    with pytest.raises(ModelArtefactMissing, match="mean pooling"):
        export.sentence_config(weights)


def test_stale_exports_of_the_same_model_are_pruned(tmp_path: Path) -> None:
    keep = tmp_path / "all-MiniLM-L6-v2-new"
    for name in ("all-MiniLM-L6-v2-old", "all-MiniLM-L6-v2-new", "other-model-1"):
        (tmp_path / name).mkdir()
    removed = export.prune_stale(MINILM, keep, tmp_path)
    assert removed == [tmp_path / "all-MiniLM-L6-v2-old"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all-MiniLM-L6-v2-new", "other-model-1"]


def test_a_torch_free_run_time_uses_an_export_of_the_same_weights(tmp_path: Path) -> None:
    built = ExportKey("m", "aa", {"torch": "2.15.0", "onnxruntime": "1.32.0"})
    directory = built.directory(tmp_path)
    directory.mkdir()
    manifest = {
        "weights_sha256": "aa",
        "recipe": built.recipe,
        "versions": dict(built.versions),
        "files": {},
    }
    (directory / MANIFEST).write_bytes(orjson.dumps(manifest))
    without_torch = ExportKey("m", "aa", {"torch": "absent", "onnxruntime": "1.32.0"})
    assert find_export(without_torch, tmp_path) == (directory, manifest)
    # other weights, or another runtime version, are not the same artefact
    for other in (
        ExportKey("m", "ab", {"torch": "absent", "onnxruntime": "1.32.0"}),
        ExportKey("m", "aa", {"torch": "absent", "onnxruntime": "1.33.0"}),
    ):
        with pytest.raises(ModelArtefactMissing):
            find_export(other, tmp_path)
    # with torch installed, only the exact fingerprint counts (a new torch means a new export)
    with pytest.raises(ModelArtefactMissing):
        find_export(ExportKey("m", "aa", {"torch": "2.16.0", "onnxruntime": "1.32.0"}), tmp_path)
