"""The clipped policy objective on flat token buffers. Pure: numpy arrays in, arrays out.

A batch of rows is a :class:`Tokens`: per-row lengths plus flat per-token arrays (the child
buffers of Arrow list columns, float32 or float64). Token math is float64. A row's sums are
numpy's pairwise float64 sums over that row's contiguous tokens (``np.add.reduceat``), so a
row's numbers never depend on the batch or thread it is computed in. The math runs on
blocks of whole rows of about :data:`BLOCK_TOKENS` tokens, so each pass stays in cache.

The advantage is one number per row, so PPO's per-token ``min`` needs no per-token
advantage: for ``A > 0``, ``min(rho A, clip(rho) A) = A min(rho, 1 + eps_high)``; for
``A < 0`` it is ``A max(rho, 1 - eps_low)``. A row's surrogate sum is ``A`` times the
row sum of that factor.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .config import ObjectiveConfig

BLOCK_TOKENS = 1 << 16


@dataclass
class Tokens:
    """Rows of tokens: ``lengths[i]`` tokens for row i; flat log-probs; optional bool mask."""

    lengths: np.ndarray
    new: np.ndarray
    old: np.ndarray
    ref: np.ndarray | None = None
    mask: np.ndarray | None = None

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

        return Tokens(self.lengths[a:b], self.new[lo:hi], self.old[lo:hi], cut(self.ref), cut(self.mask))

    def row_blocks(self, max_tokens: int = BLOCK_TOKENS) -> list[tuple[int, int]]:
        """Consecutive row ranges ``(a, b)`` covering every row, cut before the row in which
        each multiple of ``max_tokens`` tokens falls (so about ``max_tokens`` tokens each, more
        for a long row); ``[(0, 0)]`` when there are no rows.

        >>> Tokens(np.array([2, 2, 5, 1]), *[np.zeros(10)] * 2).row_blocks(4)
        [(0, 2), (2, 4)]
        """
        ends = self.offsets[1:]
        cuts = np.searchsorted(ends, np.arange(max_tokens, self.offsets[-1], max_tokens), side="right")
        bounds = np.unique(np.concatenate([[0], cuts, [self.rows]])).tolist()
        return list(zip(bounds[:-1], bounds[1:])) or [(0, 0)]


def row_reduce(values: np.ndarray, tokens: Tokens, ufunc: np.ufunc = np.add, empty=0.0, dtype=None) -> np.ndarray:
    """``ufunc.reduce`` over each row's tokens (rows without tokens get ``empty``)."""
    dtype = dtype or np.result_type(values.dtype, type(empty))
    if tokens.all_nonempty:
        return ufunc.reduceat(values, tokens.starts, dtype=dtype)
    out = np.full(tokens.rows, empty, dtype=dtype)
    nonempty = tokens.lengths > 0
    if nonempty.any():
        out[nonempty] = ufunc.reduceat(values, tokens.starts[nonempty], dtype=dtype)
    return out


def row_sum(values: np.ndarray, tokens: Tokens) -> np.ndarray:
    """Float64 sum of ``values`` per row over counted tokens."""
    return row_reduce(tokens.counted(values), tokens, dtype=np.float64)


def row_count(flags: np.ndarray, tokens: Tokens) -> np.ndarray:
    """Number of counted tokens per row where ``flags`` is true."""
    return row_reduce(tokens.counted(flags, False), tokens, empty=0, dtype=np.int64)


def token_log_ratio(logratio: np.ndarray, clamp: float) -> tuple[np.ndarray, np.ndarray | None]:
    """PPO: ``log rho = new - old`` per token, clamped to [-clamp, clamp], and where the clamp
    bit (None when it bit nowhere, checked with one min and one max)."""
    if logratio.size == 0 or (logratio.min() >= -clamp and logratio.max() <= clamp):
        return logratio, None
    return np.clip(logratio, -clamp, clamp), np.abs(logratio) > clamp


def sequence_log_ratio(logratio: np.ndarray, tokens: Tokens, clamp: float) -> tuple[np.ndarray, np.ndarray]:
    """GSPO: every token of row i gets ``mean_t log rho_it`` over the row's counted tokens."""
    counted = tokens.n_counted
    mean = np.divide(row_sum(logratio, tokens), counted, out=np.zeros(tokens.rows), where=counted > 0)
    clamped_mean = np.clip(mean, -clamp, clamp)
    return np.repeat(clamped_mean, tokens.lengths), np.repeat(np.abs(mean) > clamp, tokens.lengths)


def kl_estimate(d: np.ndarray, kind: str) -> np.ndarray:
    """Per-token KL estimators of http://joschu.net/blog/kl-approx.html with d = new - ref:
    k1 = d, k2 = d^2 / 2, k3 = exp(-d) + d - 1, abs = |d|."""
    if kind == "k1":
        return d
    if kind == "k2":
        return 0.5 * d * d
    if kind == "k3":
        return np.expm1(-d) + d
    return np.abs(d)


def clipped_surrogate(ratio: np.ndarray, advantages: np.ndarray, tokens: Tokens, config: ObjectiveConfig) -> dict[str, np.ndarray]:
    """Row sums of PPO's clipped surrogate, and per-row counts of the tokens each clip bit.

    .. math:: L_{it} = \\min(\\rho_{it} A_i, \\mathrm{clip}(\\rho_{it}, 1 - \\epsilon_{low}, 1 + \\epsilon_{high}) A_i)

    computed as ``A_i min(rho, 1 + eps_high)`` (A > 0) or ``A_i max(rho, 1 - eps_low)``
    (A < 0). With dual clip C (A < 0): ``max(L, C A) = A min(max(rho, 1 - eps_low), C)``.
    """
    high, low = 1.0 + config.eps_high, 1.0 - config.eps_low
    positive, negative = advantages > 0, advantages < 0
    lower = np.maximum(ratio, low)
    if config.dual_clip is not None:
        lower = np.minimum(lower, config.dual_clip)
    factor_sum = np.where(positive, row_sum(np.minimum(ratio, high), tokens), row_sum(lower, tokens))
    return {
        "surrogate_sum": np.where(positive | negative, advantages * factor_sum, 0.0),
        "clip_high": np.where(positive, row_count(ratio > high, tokens), 0),
        "clip_low": np.where(negative, row_count(ratio < low, tokens), 0),
        "dual_clip": np.where(negative, row_count(ratio > config.dual_clip, tokens), 0)
        if config.dual_clip is not None else np.zeros(tokens.rows, dtype=np.int64),
    }


def row_terms(tokens: Tokens, advantages: np.ndarray, config: ObjectiveConfig, block_tokens: int = BLOCK_TOKENS) -> dict[str, np.ndarray]:
    """Per-row sums and extremes of every token quantity (masked tokens count nowhere),
    computed on blocks of about ``block_tokens`` tokens (:meth:`Tokens.row_blocks`); see
    :func:`block_terms`. A row's numbers do not depend on the blocking."""
    parts = [block_terms(tokens.rows_slice(a, b), advantages[a:b], config) for a, b in tokens.row_blocks(block_tokens)]
    if len(parts) == 1:
        return parts[0]
    return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}


def block_terms(tokens: Tokens, advantages: np.ndarray, config: ObjectiveConfig) -> dict[str, np.ndarray]:
    """Per-row sums and extremes of every token quantity of a few rows.

    The per-token objective is ``L_it - beta * KL_it``; ``objective_sum`` is its row sum.
    One ``expm1`` gives both the ratio and, at token level, k3 against the old policy.
    """
    new_minus_old = np.subtract(tokens.new, tokens.old, dtype=np.float64)
    if config.ratio_level == "sequence":
        logratio, clamped = sequence_log_ratio(new_minus_old, tokens, config.logratio_clamp)
    else:
        logratio, clamped = token_log_ratio(new_minus_old, config.logratio_clamp)
    ratio_minus_one = np.expm1(logratio)
    ratio = ratio_minus_one + 1.0
    if logratio is new_minus_old:
        # k3 = exp(-d) + d - 1 = d - (rho - 1) / rho, with rho = exp(d) already at hand
        kl_old = new_minus_old - ratio_minus_one / ratio
    else:
        kl_old = kl_estimate(new_minus_old, "k3")
    out = clipped_surrogate(ratio, advantages, tokens, config)
    out.update(
        n_tokens=tokens.n_counted,
        ratio_sum=row_sum(ratio, tokens),
        ratio_max=row_reduce(tokens.counted(ratio, -np.inf), tokens, np.maximum, np.nan),
        ratio_min=row_reduce(tokens.counted(ratio, np.inf), tokens, np.minimum, np.nan),
        # kl_old: k3 between new and old, http://joschu.net/blog/kl-approx.html
        kl_old_sum=row_sum(kl_old, tokens),
        clamped=np.zeros(tokens.rows, dtype=np.int64) if clamped is None else row_count(clamped, tokens),
        objective_sum=out["surrogate_sum"],
    )
    if tokens.ref is not None:
        out["kl_ref_sum"] = row_sum(kl_estimate(np.subtract(tokens.new, tokens.ref, dtype=np.float64), config.kl), tokens)
        out["objective_sum"] = out["surrogate_sum"] - config.beta * out["kl_ref_sum"]
    for extreme in ("ratio_max", "ratio_min"):
        out[extreme][out["n_tokens"] == 0] = np.nan
    return out


def aggregate(sum_s: float, sum_s_per_token: float, rows: int, counted_rows: int, tokens: int,
              agg: str, max_length: int | None = None) -> float:
    """One number from the sums over rows of the token sums ``S_i`` and of ``S_i / n_i``
    (rows with ``n_i > 0`` counted tokens):

    - ``seq-mean-token-sum`` (seed 002, default): mean_i S_i
    - ``seq-mean-token-mean`` (GRPO): mean_i S_i / n_i over rows with n_i > 0
    - ``token-mean`` (DAPO, verl): sum_i S_i / sum_i n_i
    - ``token-sum``: sum_i S_i
    - ``seq-mean-token-sum-norm`` (Dr.GRPO in TRL / verl): sum_i S_i / (rows * max_length)

    >>> aggregate(1.2 - 1.35, 0.6 - 0.675, rows=2, counted_rows=2, tokens=4, agg="seq-mean-token-sum")
    -0.07500000000000007
    """
    if agg == "seq-mean-token-sum":
        return sum_s / rows
    if agg == "seq-mean-token-mean":
        return sum_s_per_token / counted_rows if counted_rows else 0.0
    if agg == "token-mean":
        return sum_s / tokens if tokens else 0.0
    if agg == "token-sum":
        return sum_s
    return sum_s / (rows * max_length)
