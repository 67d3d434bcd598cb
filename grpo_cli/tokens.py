"""Rows of tokens as flat buffers, and per-row reductions over them.

A batch of rows is a :class:`Tokens`: per-row lengths plus flat per-token arrays (the child
buffers of Arrow list columns, float32 or float64). A row's sums are numpy's float64 sums
over that row's contiguous tokens (``np.add.reduceat``), so a row's numbers never depend on
the batch or thread it is computed in.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np

BLOCK_TOKENS = 1 << 18  # per block of token math: its arrays near the cache, its numpy calls few enough that threads rarely wait on the GIL


@dataclass
class Tokens:
    """Rows of tokens: ``lengths[i]`` tokens for row i; flat log-probs (new, old, and
    optionally the reference's and the rollout sampler's); an optional bool mask; optional
    per-token advantages (token-level estimators); entropies (TRL's top_entropy_quantile); the
    critic's ``values``, ``old_values`` and ``returns``, for a value loss."""

    lengths: np.ndarray
    new: np.ndarray
    old: np.ndarray
    ref: np.ndarray | None = None
    mask: np.ndarray | None = None
    advantage: np.ndarray | None = None
    rollout: np.ndarray | None = None
    entropy: np.ndarray | None = None
    values: np.ndarray | None = None
    old_values: np.ndarray | None = None
    returns: np.ndarray | None = None

    @property
    def rows(self) -> int:
        return len(self.lengths)

    @cached_property
    def offsets(self) -> np.ndarray:
        """Where each row's tokens start in the flat arrays, and where the last row ends (rows + 1)."""
        return np.concatenate([[0], np.cumsum(self.lengths)])

    @cached_property
    def all_nonempty(self) -> bool:
        """Every row has at least one token (so ``reduceat`` needs no special case)."""
        return bool(self.rows) and bool(self.lengths.min() > 0)

    @property
    def starts(self) -> np.ndarray:
        """Index of each row's first token in the flat arrays."""
        return self.offsets[:-1]

    @cached_property
    def n_counted(self) -> np.ndarray:
        """Counted (unmasked) tokens per row, int64."""
        return self.lengths.astype(np.int64) if self.mask is None else row_count(self.mask, self)

    def counted(self, values: np.ndarray, fill=0) -> np.ndarray:
        """``values`` with masked tokens set to ``fill`` (``values`` itself when nothing is masked)."""
        return values if self.mask is None else np.where(self.mask, values, fill)

    def rows_slice(self, a: int, b: int) -> "Tokens":
        """Rows ``a`` to ``b`` (exclusive), sharing this object's buffers."""
        lo, hi = int(self.offsets[a]), int(self.offsets[b])

        def cut(x):
            return None if x is None else x[lo:hi]

        return Tokens(self.lengths[a:b], *(cut(getattr(self, f.name)) for f in fields(self)[1:]))  # every per-token array

    def row_blocks(self, max_tokens: int = BLOCK_TOKENS) -> list[tuple[int, int]]:
        """Consecutive row ranges ``(a, b)`` covering every row, cut before the row in which
        each multiple of ``max_tokens`` tokens falls (so about ``max_tokens`` tokens each, more
        for a long row); ``[(0, 0)]`` when there are no rows.

        >>> Tokens(np.array([2, 2, 5, 1]), *[np.zeros(10)] * 2).row_blocks(4)
        [(0, 2), (2, 4)]
        """
        ends = self.offsets[1:]
        cuts = np.searchsorted(ends, np.arange(max_tokens, self.offsets[-1], max_tokens), side="right")
        bounds = np.concatenate([[0], cuts, [self.rows]])  # ascending: each once (np.unique would import numpy.ma)
        bounds = bounds[np.diff(bounds, prepend=-1) > 0].tolist()
        return list(zip(bounds[:-1], bounds[1:])) or [(0, 0)]


def joined(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The per-row arrays of consecutive blocks of rows (:meth:`Tokens.row_blocks`), each key's
    blocks joined in row order.

    >>> joined([{"n": np.array([1, 2])}, {"n": np.array([3])}])["n"].tolist()
    [1, 2, 3]
    """
    return parts[0] if len(parts) == 1 else {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}


def row_reduce(values: np.ndarray, tokens: Tokens, ufunc: np.ufunc = np.add, empty=0.0, dtype=None) -> np.ndarray:
    """``ufunc.reduce`` over each row's tokens (rows without tokens get ``empty``)."""
    dtype = dtype or np.result_type(values.dtype, type(empty))
    if tokens.all_nonempty:
        return ufunc.reduceat(values.astype(dtype, copy=False), tokens.starts)  # cast first: see reduce_rows
    return reduce_rows(values, tokens.lengths, ufunc, empty, dtype)


def reduce_rows(values: np.ndarray, lengths: np.ndarray, ufunc: np.ufunc = np.add, empty=0.0, dtype=None) -> np.ndarray:
    """``ufunc.reduce`` over each row's ``lengths[i]`` consecutive values (rows without
    values get ``empty``), in ``dtype``. The values are cast to it first: ``reduceat`` that
    casts in its buffers holds the GIL throughout, so the other threads wait (the same sums).

    >>> reduce_rows(np.array([1.0, 2.0, 5.0]), np.array([2, 0, 1])).tolist()
    [3.0, 0.0, 5.0]
    """
    dtype = dtype or np.result_type(values.dtype, type(empty))
    out = np.full(len(lengths), empty, dtype=dtype)
    nonempty = lengths > 0
    if nonempty.any():
        out[nonempty] = ufunc.reduceat(values.astype(dtype, copy=False), (np.cumsum(lengths) - lengths)[nonempty])
    return out


def row_sum(values: np.ndarray, tokens: Tokens) -> np.ndarray:
    """Float64 sum of ``values`` per row over counted tokens."""
    return row_reduce(tokens.counted(values), tokens, dtype=np.float64)


def row_count(flags: np.ndarray, tokens: Tokens) -> np.ndarray:
    """Number of counted tokens per row where ``flags`` is true."""
    return row_reduce(tokens.counted(flags, False), tokens, empty=0, dtype=np.int64)
