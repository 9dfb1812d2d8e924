"""Pure parts of the encoders: names, ids, threads, batching by length, pooling."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.models.encoders import (
    ALIASES,
    CHOICES,
    DEFAULT_MINILM,
    ENCODER_NAMES,
    EncoderUnavailable,
    default_threads,
    encoder_dimension,
    format_encoder_id,
    length_batches,
    load_encoder,
    mean_pool_normalise,
    pad_ids,
    resolve_encoder,
)


def test_every_documented_name_resolves() -> None:
    for name in ("minilm", "minilm-torch", "minilm-onnx", "minilm-onnx-int8", "use"):
        assert name in ENCODER_NAMES
        assert resolve_encoder(name).name in CHOICES


def test_minilm_resolves_to_the_default_backend() -> None:
    assert resolve_encoder("minilm") is DEFAULT_MINILM is ALIASES["minilm"]
    assert DEFAULT_MINILM.model == "all-MiniLM-L6-v2"


@pytest.mark.parametrize("name", ["", "MiniLM", "minilm-onnx-fp16", "torch", "bert"])
def test_an_unknown_name_fails_listing_the_choices(name: str) -> None:
    with pytest.raises(EncoderUnavailable) as caught:
        resolve_encoder(name)
    assert repr(name) in str(caught.value)
    assert "minilm-onnx-int8" in str(caught.value)
    with pytest.raises(EncoderUnavailable):
        load_encoder(name)


def test_ids_name_model_backend_precision_and_fingerprint() -> None:
    assert format_encoder_id(CHOICES["minilm-onnx-int8"], "abc") == "all-MiniLM-L6-v2/onnx-int8@abc"
    assert format_encoder_id(CHOICES["minilm-torch"], "f00") == "all-MiniLM-L6-v2/torch-fp32@f00"
    ids = {format_encoder_id(choice, "x") for choice in CHOICES.values()}
    assert len(ids) == len(CHOICES)  # no two backends share an id


@pytest.mark.parametrize(("cores", "threads"), [(1, 1), (2, 1), (4, 2), (6, 3), (64, 4)])
def test_default_threads_follow_the_measurement(cores: int, threads: int) -> None:
    assert default_threads(cores) == threads


def test_length_batches_group_similar_lengths_and_cover_every_index() -> None:
    lengths = [3, 50, 7, 50, 1, 12, 9]
    batches = length_batches(lengths, 3)
    assert [len(b) for b in batches] == [3, 3, 1]
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(lengths, reverse=True)
    assert batches[0][:2] == [1, 3]  # ties keep input order, so the result is deterministic


def test_length_batches_reject_a_bad_batch_size() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        length_batches([1, 2], 0)
    assert length_batches([], 4) == []


def test_pad_ids_pads_to_the_longest_row_of_the_batch_only() -> None:
    ids, mask = pad_ids([[101, 7, 102], [101, 102]])
    assert ids.dtype == np.int64 and mask.dtype == np.int64
    assert ids.tolist() == [[101, 7, 102], [101, 102, 0]]
    assert mask.tolist() == [[1, 1, 1], [1, 1, 0]]


def test_mean_pooling_ignores_padding_and_normalises() -> None:
    tokens = np.array(
        [
            [[1.0, 0.0], [3.0, 4.0], [100.0, 100.0]],  # last token is padding
            [[0.0, 2.0], [0.0, 0.0], [0.0, 0.0]],
        ],
        dtype=np.float32,
    )
    mask = np.array([[1, 1, 0], [1, 0, 0]])
    vectors = mean_pool_normalise(tokens, mask)
    assert vectors.dtype == np.float32
    expected = np.array([2.0, 2.0]) / np.linalg.norm([2.0, 2.0])
    np.testing.assert_allclose(vectors[0], expected, rtol=1e-6)
    np.testing.assert_allclose(vectors[1], [0.0, 1.0], rtol=1e-6)


def test_mean_pooling_of_an_all_zero_row_stays_finite() -> None:
    vectors = mean_pool_normalise(np.zeros((1, 2, 3), dtype=np.float32), np.zeros((1, 2)))
    assert np.isfinite(vectors).all()


def test_length_batches_keep_padded_tokens_under_the_budget() -> None:
    lengths = [256, 250, 200, 30, 30, 30, 30, 10]
    batches = length_batches(lengths, batch_size=64, max_tokens=512)
    for batch in batches:
        assert len(batch) * max(lengths[i] for i in batch) <= 512
    assert batches[0] == [0, 1]  # two 256-token rows fill the budget
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    # a single row longer than the budget still gets a batch of its own
    assert length_batches([900, 5], batch_size=8, max_tokens=512) == [[0], [1]]
    with pytest.raises(ValueError, match="max_tokens"):
        length_batches([1], 4, max_tokens=0)


def test_dimensions_are_known_without_loading_a_model() -> None:
    assert {n: encoder_dimension(n) for n in ENCODER_NAMES} == {
        "minilm": 384, "minilm-torch": 384, "minilm-onnx": 384, "minilm-onnx-int8": 384, "use": 512,
    }  # fmt: skip
