"""Export the packaged sentence-transformers weights to ONNX once, at set-up.

    python -m pipeline.models.export          # idempotent; a cached export returns at once
    python -m pipeline.models.export --check  # exit 1 when an export is missing, build nothing

For each model in ``EXPORTABLE_MODELS`` this writes ``<root>/<model>-<fingerprint>/`` with the
transformer as an fp32 ONNX graph (PyTorch's own exporter, ``torch.onnx.export(dynamo=True)``),
its dynamic int8 quantisation (``onnxruntime.quantization.quantize_dynamic``), the tokenizer and a
manifest written last. The output is byte-for-byte deterministic for the same weights and
library versions, and the fingerprint changes when either changes (``pipeline.models.artefacts``).

Why not sentence-transformers' ``backend="onnx"``: it exports through optimum-onnx, whose only
release (0.1.0) requires transformers < 4.58 while sentence-transformers 6.2 requires
transformers >= 5, so the two cannot be installed together. The graph is the same BertModel
either way; pooling and normalisation run in numpy at run time (``pipeline.models.encoders``).

The universal-sentence-encoder (``use``) needs no export: its package runs in numpy already.
This is the only module that imports torch for the ONNX path, and only while exporting.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from pipeline.models.artefacts import (
    EXPORTABLE_MODELS,
    MANIFEST,
    PRECISION_FILES,
    TOKENIZER_FILE,
    ExportableModel,
    ExportKey,
    ModelArtefactMissing,
    default_models_root,
    read_manifest,
)

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "token_embeddings"
# The fp32 graph must reproduce the PyTorch token embeddings this closely, or the export fails.
SELF_CHECK_TOLERANCE = 1e-4
SELF_CHECK_TEXTS = ("hello", "我们下周二在杭州见面。", "A longer sentence, with an emoji 🙂 " * 8)


def sentence_config(weights: Path) -> dict[str, Any]:
    """What the run time needs from the sentence-transformers config, checked for mean pooling."""
    try:
        bert = json.loads((weights / "sentence_bert_config.json").read_text())
        pooling = json.loads((weights / "1_Pooling" / "config.json").read_text())
        modules = json.loads((weights / "modules.json").read_text())
    except (OSError, ValueError) as error:
        raise ModelArtefactMissing(f"weights {weights}: unreadable config: {error}") from error
    others = ("cls_token", "max_tokens", "mean_sqrt_len_tokens")
    if not pooling.get("pooling_mode_mean_tokens") or any(
        pooling.get(f"pooling_mode_{mode}") for mode in others
    ):
        raise ModelArtefactMissing(f"weights {weights}: only mean pooling is supported: {pooling}")
    normalise = any(m.get("type", "").endswith(".Normalize") for m in modules)
    return {
        "max_seq_length": int(bert["max_seq_length"]),
        "dimension": int(pooling["word_embedding_dimension"]),
        "pooling": "mean",
        "normalize": normalise,
    }


def _export_fp32(weights: Path, target: Path) -> Any:
    """The BertModel as ONNX with dynamic batch and sequence axes; returns the torch model."""
    import torch
    from transformers import AutoModel

    torch.manual_seed(0)
    model = AutoModel.from_pretrained(str(weights)).eval()

    class TokenEmbeddings(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    sample = torch.ones((2, 16), dtype=torch.int64)
    batch = torch.export.Dim("batch")
    sequence = torch.export.Dim("sequence", max=int(model.config.max_position_embeddings))
    dynamic = {name: {0: batch, 1: sequence} for name in INPUT_NAMES}
    with torch.no_grad():
        program = torch.onnx.export(
            TokenEmbeddings(model),
            (sample, torch.ones_like(sample), torch.zeros_like(sample)),
            dynamo=True,
            dynamic_shapes=dynamic,
            input_names=list(INPUT_NAMES),
            output_names=[OUTPUT_NAME],
            external_data=False,
            optimize=True,
            verbose=False,
        )
    if program is None:  # only the legacy TorchScript exporter returns nothing
        raise ModelArtefactMissing("export: torch.onnx.export returned no program")
    program.save(str(target), external_data=False)
    return model


def _self_check(model: Any, graph: Path, tokenizer: Path, max_seq_length: int) -> float:
    """Largest difference between PyTorch and ONNX Runtime token embeddings on a few texts."""
    import onnxruntime as ort
    import torch
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer))
    tok.enable_truncation(max_seq_length)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    encoded = tok.encode_batch(list(SELF_CHECK_TEXTS))
    ids = np.array([e.ids for e in encoded], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
    types = np.zeros_like(ids)
    session = ort.InferenceSession(str(graph), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
    with torch.no_grad():
        want = model(
            input_ids=torch.from_numpy(ids),
            attention_mask=torch.from_numpy(mask),
            token_type_ids=torch.from_numpy(types),
        ).last_hidden_state.numpy()
    valid = mask.astype(bool)
    return float(np.abs(got[valid] - want[valid]).max())


def _quantise_int8(source: Path, target: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build(model: ExportableModel, key: ExportKey, root: Path) -> Path:
    """Write the artefact directory for ``key`` (atomically: a temporary dir, then a rename)."""
    missing = key.missing_libraries()
    if missing:
        raise ModelArtefactMissing(
            f"export {model.name}: needs {', '.join(missing)} installed "
            "(pip install the project's dependencies first)"
        )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    weights = model.weights_dir()
    config = sentence_config(weights)
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{model.name}-", dir=root))
    staging.chmod(0o755)  # mkdtemp makes it private; the cache is shared by the venv's users
    try:
        fp32 = staging / PRECISION_FILES["fp32"]
        with contextlib.redirect_stdout(sys.stderr):  # the exporter's progress is not our output
            torch_model = _export_fp32(weights, fp32)
        shutil.copyfile(weights / TOKENIZER_FILE, staging / TOKENIZER_FILE)
        error = _self_check(torch_model, fp32, staging / TOKENIZER_FILE, config["max_seq_length"])
        if error > SELF_CHECK_TOLERANCE:
            raise ModelArtefactMissing(
                f"export {model.name}: ONNX output differs from PyTorch by {error:.2e} "
                f"(> {SELF_CHECK_TOLERANCE:.0e}); not caching it"
            )
        _quantise_int8(fp32, staging / PRECISION_FILES["int8"])
        files = [*PRECISION_FILES.values(), TOKENIZER_FILE]
        manifest = {
            "model": model.name,
            "fingerprint": key.fingerprint,
            "weights_sha256": key.weights_sha256,
            "versions": dict(key.versions),
            "recipe": key.recipe,
            **config,
            "inputs": list(INPUT_NAMES),
            "output": OUTPUT_NAME,
            "files": {name: _sha256(staging / name) for name in files},
        }
        (staging / MANIFEST).write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
        target = key.directory(root)
        try:
            staging.rename(target)
        except OSError:
            if read_manifest(target) is None:  # not a concurrent export that won the race
                raise
        return target
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def prune_stale(model: ExportableModel, keep: Path, root: Path) -> list[Path]:
    """Remove this model's exports for other fingerprints (old weights or library versions)."""
    removed = []
    for directory in root.glob(f"{model.name}-*"):
        if directory != keep and directory.is_dir():
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory)
    return removed


def ensure_exported(model: ExportableModel, root: Path, force: bool = False) -> tuple[Path, bool]:
    """The artefact directory for the installed weights and libraries; (path, built now)."""
    key = model.key()
    directory = key.directory(root)
    if force:
        shutil.rmtree(directory, ignore_errors=True)
    if read_manifest(directory) is not None:
        return directory, False
    return build(model, key, root), True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.models.export", description=__doc__)
    parser.add_argument("--root", type=Path, default=None, help="default: <venv>/hindsight-models")
    parser.add_argument("--check", action="store_true", help="exit 1 if an export is missing")
    parser.add_argument("--force", action="store_true", help="rebuild even when cached")
    args = parser.parse_args(argv)
    root: Path = args.root or default_models_root()
    status = 0
    for model in EXPORTABLE_MODELS:
        try:
            if args.check:
                key = model.key()
                ok = read_manifest(key.directory(root)) is not None
                print(f"{model.name}: {'cached' if ok else 'missing'} {key.directory(root)}")
                status = status or (0 if ok else 1)
                continue
            started = time.perf_counter()
            directory, built = ensure_exported(model, root, force=args.force)
            if built:
                for old in prune_stale(model, directory, root):
                    print(f"{model.name}: removed stale export {old}", file=sys.stderr)
            verb = f"exported in {time.perf_counter() - started:.1f}s" if built else "cached"
            print(f"{model.name}: {verb} {directory}")
        except ModelArtefactMissing as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    return status


if __name__ == "__main__":
    raise SystemExit(main())
