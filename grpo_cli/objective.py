"""The clipped policy objective on flat token buffers. Pure: numpy arrays in, arrays out.

A batch of rows is a :class:`Tokens`: per-row lengths plus flat per-token arrays (the child
buffers of Arrow list columns). Per-row results are reduced with ``np.bincount`` (a
sequential float64 sum per row), so a row's numbers never depend on the batch it sits in.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .config import ObjectiveConfig


@dataclass
class Tokens:
    """Rows of tokens: ``lengths[i]`` tokens for row i; flat float64 log-probs; bool mask."""

    lengths: np.ndarray
    new: np.ndarray
    old: np.ndarray
    ref: np.ndarray | None = None
    mask: np.ndarray | None = None

    @property
    def rows(self) -> int:
        return len(self.lengths)

    @cached_property
    def row(self) -> np.ndarray:
        """The row index of every token."""
        return np.repeat(np.arange(self.rows), self.lengths)

    @cached_property
    def weight(self) -> np.ndarray:
        """1.0 for tokens that count, 0.0 for masked ones."""
        if self.mask is None:
            return np.ones(len(self.new))
        return self.mask.astype(np.float64)


def row_sum(values: np.ndarray, row: np.ndarray, rows: int) -> np.ndarray:
    """Sum of ``values`` per row (float64, in token order)."""
    return np.bincount(row, weights=values, minlength=rows).astype(np.float64, copy=False)


def row_extreme(values: np.ndarray, lengths: np.ndarray, reduce: np.ufunc) -> np.ndarray:
    """``reduce`` (np.maximum / np.minimum) over each row; NaN for rows with no tokens."""
    out = np.full(len(lengths), np.nan)
    nonempty = lengths > 0
    if nonempty.any():
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])[nonempty]
        out[nonempty] = reduce.reduceat(values, starts)
    return out


def token_log_ratio(logratio: np.ndarray, clamp: float) -> tuple[np.ndarray, np.ndarray]:
    """PPO: ``log rho = new - old`` per token, clamped to [-clamp, clamp], and where the clamp bit."""
    return np.clip(logratio, -clamp, clamp), np.abs(logratio) > clamp


def sequence_log_ratio(logratio: np.ndarray, tokens: Tokens, clamp: float) -> tuple[np.ndarray, np.ndarray]:
    """GSPO: every token of row i gets ``mean_t log rho_it`` over the row's counted tokens."""
    row, weight = tokens.row, tokens.weight
    counted = row_sum(weight, row, tokens.rows)
    mean = np.divide(row_sum(logratio * weight, row, tokens.rows), counted, out=np.zeros(tokens.rows), where=counted > 0)
    clamped_mean = np.clip(mean, -clamp, clamp)
    return clamped_mean[row], (np.abs(mean) > clamp)[row]


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


def clipped_surrogate(ratio: np.ndarray, adv: np.ndarray, config: ObjectiveConfig) -> dict[str, np.ndarray]:
    """PPO's clipped surrogate per token, and which branch bit.

    .. math:: L = \\min(\\rho A, \\mathrm{clip}(\\rho, 1 - \\epsilon_{low}, 1 + \\epsilon_{high}) A)

    With dual clip C: ``L = max(L, C * A)`` where ``A < 0``.
    """
    surr1 = ratio * adv
    surr2 = np.clip(ratio, 1.0 - config.eps_low, 1.0 + config.eps_high) * adv
    surrogate = np.minimum(surr1, surr2)
    clip_low = (adv < 0) & (ratio < 1.0 - config.eps_low)
    clip_high = (adv > 0) & (ratio > 1.0 + config.eps_high)
    dual = np.zeros_like(clip_low)
    if config.dual_clip is not None:
        dual = (adv < 0) & (surrogate < config.dual_clip * adv)
        surrogate = np.where(dual, config.dual_clip * adv, surrogate)
    return {"surrogate": surrogate, "clip_low": clip_low, "clip_high": clip_high, "dual_clip": dual}


def row_terms(tokens: Tokens, advantages: np.ndarray, config: ObjectiveConfig) -> dict[str, np.ndarray]:
    """Per-row sums and extremes of every token quantity (masked tokens count nowhere).

    The per-token objective is ``L_it - beta * KL_it``; ``objective_sum`` is its row sum.
    """
    row, weight, rows = tokens.row, tokens.weight, tokens.rows
    new_minus_old = tokens.new - tokens.old
    if config.ratio_level == "sequence":
        logratio, clamped = sequence_log_ratio(new_minus_old, tokens, config.logratio_clamp)
    else:
        logratio, clamped = token_log_ratio(new_minus_old, config.logratio_clamp)
    ratio = np.exp(logratio)
    terms = clipped_surrogate(ratio, advantages[row], config)
    counted = weight > 0
    objective = terms["surrogate"]
    out = {
        "n_tokens": np.bincount(row, weights=weight, minlength=rows).astype(np.int64),
        "surrogate_sum": row_sum(terms["surrogate"] * weight, row, rows),
        "ratio_sum": row_sum(ratio * weight, row, rows),
        "ratio_max": row_extreme(np.where(counted, ratio, -np.inf), tokens.lengths, np.maximum),
        "ratio_min": row_extreme(np.where(counted, ratio, np.inf), tokens.lengths, np.minimum),
        # kl_old: k3 between new and old, http://joschu.net/blog/kl-approx.html
        "kl_old_sum": row_sum(kl_estimate(new_minus_old, "k3") * weight, row, rows),
    }
    for flag in ("clip_low", "clip_high", "dual_clip"):
        out[flag] = np.bincount(row, weights=terms[flag] & counted, minlength=rows).astype(np.int64)
    out["clamped"] = np.bincount(row, weights=clamped & counted, minlength=rows).astype(np.int64)
    if tokens.ref is not None:
        kl_ref = kl_estimate(tokens.new - tokens.ref, config.kl)
        out["kl_ref_sum"] = row_sum(kl_ref * weight, row, rows)
        objective = objective - config.beta * kl_ref
    out["objective_sum"] = row_sum(objective * weight, row, rows)
    for extreme in ("ratio_max", "ratio_min"):
        out[extreme][out["n_tokens"] == 0] = np.nan
    return out


def aggregate(row_sums: np.ndarray, n_tokens: np.ndarray, agg: str, max_length: int | None = None) -> float:
    """One number from per-row token sums ``S_i`` and token counts ``n_i``.

    - ``seq-mean-token-sum`` (seed 002, default): mean_i S_i
    - ``seq-mean-token-mean`` (GRPO): mean_i S_i / n_i over rows with n_i > 0
    - ``token-mean`` (DAPO, verl): sum_i S_i / sum_i n_i
    - ``token-sum``: sum_i S_i
    - ``seq-mean-token-sum-norm`` (Dr.GRPO in TRL / verl): sum_i S_i / (rows * max_length)

    >>> aggregate(np.array([1.2, -1.35]), np.array([2, 2]), "seq-mean-token-sum")
    -0.07500000000000007
    """
    rows, tokens = len(row_sums), int(n_tokens.sum())
    if agg == "seq-mean-token-sum":
        return float(row_sums.sum() / rows)
    if agg == "seq-mean-token-mean":
        has = n_tokens > 0
        return float((row_sums[has] / n_tokens[has]).mean()) if has.any() else 0.0
    if agg == "token-mean":
        return float(row_sums.sum() / tokens) if tokens else 0.0
    if agg == "token-sum":
        return float(row_sums.sum())
    return float(row_sums.sum() / (rows * max_length))
