"""USE vectors in shared passes are, bit for bit, the vectors of each text alone.

The turn classifier and the attribute model were trained on one-text vectors and a turn's answer
must not depend on its batch; the shared pass is only a faster way to the same bits."""

from __future__ import annotations

import logging

import numpy as np
import numpy.typing as npt
import pytest

from pipeline.models import encoders
from pipeline.models.encoders import encode_one_at_a_time, load_encoder
from pipeline.models.use_batches import PROBE_ROWS, TOKEN_BUDGET, NotExact, general_path_rows

Array = npt.NDArray[np.float32]

TEXTS = [
    "ok",
    "",
    "hi!!",
    "I switched from Vim to Helix last month and I'm not going back.",
    "我们周五下午三点在三楼会议室开会，记得带上季度报告。",
    "mixed 中英 text with an emoji 🙂 and a port 8080",
    "Deploys go out on Tuesdays; the freeze starts on the 14th. " * 20,  # past the token budget
    "The staging database listens on 5432 and Priya owns it.",
    "ok",  # a duplicate
    *(
        f"Turn {n}: we talked about the trip to Kyoto and the ryokan near the river."
        for n in range(40)
    ),
]


@pytest.fixture(scope="module")
def use() -> encoders.UniversalSentenceEncoder:
    encoder = load_encoder("use", threads=1)
    assert isinstance(encoder, encoders.UniversalSentenceEncoder)
    return encoder


def test_shared_passes_give_each_text_its_own_vector_bit_for_bit(
    use: encoders.UniversalSentenceEncoder,
) -> None:
    alone = np.vstack([use.encode([text]) for text in TEXTS])

    together = encode_one_at_a_time(use, TEXTS)

    assert together.dtype == np.float32
    assert np.array_equal(together, alone)
    # and the texts really were shared: the machine allowed it, short texts aside
    batches = use._exact_batches()
    assert batches is not None and batches.fewest_tokens <= PROBE_ROWS


def test_a_vector_does_not_depend_on_its_neighbours(use: encoders.UniversalSentenceEncoder) -> None:
    text = "I moved to Lisbon in May and I walk to work now."
    crowds = [[text], [*TEXTS[:5], text], [text, *reversed(TEXTS)]]

    vectors = [encode_one_at_a_time(use, crowd)[crowd.index(text)] for crowd in crowds]

    assert all(np.array_equal(vectors[0], other) for other in vectors[1:])


def test_a_text_longer_than_the_token_budget_is_still_its_own(
    use: encoders.UniversalSentenceEncoder,
) -> None:
    long_text = "word " * (TOKEN_BUDGET + 50)

    assert np.array_equal(
        encode_one_at_a_time(use, ["short one here please", long_text])[1],
        use.encode([long_text])[0],
    )


def test_without_exact_batches_it_falls_back_to_one_text_at_a_time(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(model: object) -> None:
        raise NotExact("BLAS: not row-invariant here")

    monkeypatch.setattr(encoders, "ExactBatches", refuse)
    fresh = encoders.UniversalSentenceEncoder(threads=1)
    texts = TEXTS[:6]

    with caplog.at_level(logging.WARNING, logger=encoders.__name__):
        vectors = fresh.encode_each(texts)

    assert np.array_equal(vectors, np.vstack([fresh.encode([text]) for text in texts]))
    assert "one text at a time: BLAS: not row-invariant here" in caplog.text


def _weights(rows: int, columns: int) -> Array:
    return np.random.default_rng(7).standard_normal((rows, columns)).astype(np.float32)


def test_the_probe_finds_where_products_become_row_invariant() -> None:
    def small_path_below_four(a: Array, b: Array) -> Array:
        product: Array = a @ b
        # a product of fewer than four rows rounds otherwise, as BLAS's small-matrix path may
        return np.nextafter(product, np.float32(np.inf)) if a.shape[0] < 4 else product

    assert general_path_rows([_weights(64, 32)], matmul=small_path_below_four) == 4
    assert general_path_rows([_weights(64, 32), _weights(48, 16)], matmul=np.matmul) is not None


def test_the_probe_refuses_products_that_depend_on_every_row_count() -> None:
    def depends_on_the_batch(a: Array, b: Array) -> Array:
        product: Array = a @ b
        for _ in range(a.shape[0] % 3):  # a last bit that moves with the row count
            product = np.nextafter(product, np.float32(np.inf))
        return product

    assert general_path_rows([_weights(64, 32)], matmul=depends_on_the_batch) is None


def test_the_multilingual_encoder_reads_every_text(use: encoders.UniversalSentenceEncoder) -> None:
    assert encoders.known_share(use, "我爸现在在哪个医院？") == 1.0
