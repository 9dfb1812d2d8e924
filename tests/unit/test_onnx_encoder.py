"""The ONNX backend against the PyTorch reference, on the real packaged weights.

The export is built on first use (``ensure_exported``; about a minute on 2 cores) and cached
beside the venv, exactly as ``./dev`` does at set-up.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline.models.artefacts import MINILM, default_models_root, read_manifest
from pipeline.models.encoders import Encoder, known_share, load_encoder
from pipeline.models.export import ensure_exported

ROOT = Path(__file__).resolve().parents[2]

EN_WORDS = (
    "the",
    "meeting",
    "moved",
    "to",
    "Tuesday",
    "because",
    "Caroline",
    "flew",
    "to",
    "Boston",
    "for",
    "the",
    "adoption",
    "agency",
    "interview",
    "and",
    "Melanie",
    "painted",
    "a",
    "sunrise",
    "over",
    "the",
    "lake",
    "while",
    "the",
    "kids",
    "camped",
    "nearby",
)
ZH_PHRASES = (
    "我们下周二在杭州见面",
    "我对花生过敏",
    "请把周报在周五发给我",
    "我女儿九月开始上幼儿园",
    "服务器昨晚宕机了",
    "她喜欢吃四川菜",
    "明天上午十点开会",
    "我住在西湖附近",
)
EMOJI = ("🙂", "🎉", "🍎", "🚀", "👩‍👩‍👧", "🇨🇳", "❤️")
SPECIAL = (
    "",
    " ",
    "a",
    "?",
    "OK",
    "12:30",
    "SF1234567890",
    "naïve café résumé",
    "ÅÄÖ ß ø",
    "def f(x): return x ** 2  # code",
    "https://example.org/a?b=c&d=e",
    "\t\nnew\nlines\t",
    "ALL CAPS SHOUTING!!!",
    "mixed 中文 and English 混合",
    "emoji only 🙂🙂🙂",
)


def varied_texts(count: int = 300, seed: int = 7) -> list[str]:
    """EN, ZH, mixed, emoji, very short and longer than the 256-token limit."""
    pick = random.Random(seed)
    texts = list(SPECIAL)
    while len(texts) < count:
        kind = len(texts) % 6
        if kind == 0:
            texts.append(" ".join(pick.choices(EN_WORDS, k=pick.randint(3, 30))) + ".")
        elif kind == 1:
            texts.append("，".join(pick.choices(ZH_PHRASES, k=pick.randint(1, 6))) + "。")
        elif kind == 2:
            words = pick.choices(EN_WORDS, k=pick.randint(2, 10))
            texts.append(" ".join(w + pick.choice(EMOJI) for w in words))
        elif kind == 3:  # past max_seq_length: the truncation must match too
            texts.append(" ".join(pick.choices(EN_WORDS, k=pick.randint(200, 400))))
        elif kind == 4:
            texts.append(pick.choice(EN_WORDS))
        else:
            texts.append(pick.choice(ZH_PHRASES) + " " + " ".join(pick.choices(EN_WORDS, k=5)))
    return texts


@pytest.fixture(scope="module")
def exported() -> Path:
    directory, _ = ensure_exported(MINILM, default_models_root())
    return directory


@pytest.fixture(scope="module")
def reference() -> Encoder:
    return load_encoder("minilm-torch")


@pytest.fixture(scope="module")
def onnx_fp32(exported: Path) -> Encoder:
    return load_encoder("minilm-onnx")


def test_onnx_vectors_match_pytorch_within_1e_5(onnx_fp32: Encoder, reference: Encoder) -> None:
    texts = varied_texts()
    want = reference.encode(texts)
    got = onnx_fp32.encode(texts)
    assert got.shape == want.shape == (len(texts), 384)
    assert got.dtype == np.float32
    assert float(np.abs(got - want).max()) <= 1e-5
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_single_queries_match_the_batch_path(onnx_fp32: Encoder) -> None:
    texts = varied_texts(40, seed=11)
    batch = onnx_fp32.encode(texts)  # sorted by length and padded per batch, then restored
    for i, text in enumerate(texts):
        assert float(np.abs(onnx_fp32.encode([text])[0] - batch[i]).max()) <= 1e-5


def test_an_empty_batch_has_no_rows(onnx_fp32: Encoder) -> None:
    assert onnx_fp32.encode([]).shape == (0, 384)


def test_the_share_of_a_text_the_encoder_reads(onnx_fp32: Encoder, reference: Encoder) -> None:
    for encoder in (onnx_fp32, reference):
        assert known_share(encoder, "Where is my home address?") == 1.0
        # Every emoji is the one unknown piece to MiniLM, and so are most Chinese characters;
        # those its vocabulary has are pieces it barely reads: none of a Chinese text counts.
        assert known_share(encoder, "ok 👍") == 0.5
        assert known_share(encoder, "我爸现在在哪个医院？") == pytest.approx(1 / 10)  # the "？"
        assert known_share(encoder, "我在用React") == pytest.approx(1 / 4)  # 我 [UNK] [UNK] react
        assert known_share(encoder, "") == 1.0


def test_the_id_names_backend_precision_and_the_export(onnx_fp32: Encoder, exported: Path) -> None:
    manifest = read_manifest(exported)
    assert manifest is not None
    assert onnx_fp32.id == f"all-MiniLM-L6-v2/onnx-fp32@{manifest['fingerprint']}"
    assert load_encoder("minilm-torch").id.startswith("all-MiniLM-L6-v2/torch-fp32@")
    assert load_encoder("minilm").id == onnx_fp32.id  # the default backend


def test_int8_is_its_own_encoder_and_stays_close(exported: Path, onnx_fp32: Encoder) -> None:
    int8 = load_encoder("minilm-onnx-int8")
    assert int8.id.startswith("all-MiniLM-L6-v2/onnx-int8@") and int8.id != onnx_fp32.id
    texts = varied_texts(100, seed=3)
    quantised, full = int8.encode(texts), onnx_fp32.encode(texts)
    np.testing.assert_allclose(np.linalg.norm(quantised, axis=1), 1.0, atol=1e-5)
    cosines = (quantised * full).sum(axis=1)
    assert float(cosines.min()) > 0.8  # close, not identical: quality is measured in bench


def test_the_onnx_backend_never_imports_torch(exported: Path) -> None:
    script = (
        "import sys\n"
        "from pipeline.runtime.settings import Settings\n"
        "import pipeline.ingest.worker, pipeline.interfaces.http, pipeline.recall.engine\n"
        "from pipeline.models.encoders import load_encoder\n"
        "settings = Settings.from_env()\n"
        "encoder = load_encoder(settings.encoder, settings.encoder_threads)\n"
        "assert encoder.encode(['hello', '你好 🙂']).shape == (2, 384)\n"
        "assert encoder.encode(['one query']).shape == (1, 384)\n"
        "print(encoder.id)\n"
        "heavy = [m for m in ('torch', 'sentence_transformers') if m in sys.modules]\n"
        "print('imported=' + ','.join(heavy))\n"
    )
    for name in ("minilm", "minilm-onnx", "minilm-onnx-int8"):
        env = {**os.environ, "HINDSIGHT_ENCODER": name, "HF_HUB_OFFLINE": "1"}
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        encoder_line, imported = done.stdout.strip().splitlines()[-2:]
        assert "/onnx-" in encoder_line
        assert imported == "imported=", f"{name}: {imported}"


def test_the_encoder_loads_after_the_ann_graph_was_built(exported: Path) -> None:
    """usearch's native kernels loaded before onnxruntime's crashed the process (a segfault)."""
    script = (
        "import numpy as np\n"
        "from pipeline.recall.ann import AnnIndex, ann_available\n"
        "assert ann_available()\n"
        "AnnIndex(384)\n"
        "from pipeline.models.encoders import load_encoder\n"
        "print(load_encoder('minilm-onnx').encode(['after the graph']).shape)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.strip() == "(1, 384)"
