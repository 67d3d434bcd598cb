"""Train/rollout mismatch: the sampler's log-probs (vLLM, SGLang) against the trainer's old ones.

With ``lr_t = old_t - rollout_t`` (clamped to ``[-c, c]`` before exp, c = ``logratio_clamp``):

- importance weights (``is_level``): token ``w_t = exp(lr_t)``, sequence ``w_i = exp(sum_t lr_it)``
  on each of row i's tokens; ``is_mask (LO, HI)`` sets ``w = 0`` where ``w < LO`` or ``w > HI``
  (IcePop, TRL's ``*_mask``), then ``is_cap C`` truncates ``w = min(w, C)`` (TIS, TRL's
  ``*_truncate``). The weights multiply the per-token loss term (not the KL penalty).
- rejection (``reject``): a KL estimate with ``d = rollout - old`` (``k1 = d``, ``k2 = d^2/2``,
  ``k3 = exp(-d) + d - 1``), per token or a row's sum or mean, is kept when it lies in the
  bounds; rejected tokens (or rows) leave the mask, as verl's rejection sampling.

Weights and rejection both read the mask as given, so neither depends on the other. The
caller computes ``d = old - rollout`` once per batch (:func:`log_ratios`) for all of them.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..kl import KL_ESTIMATORS, k3
from ..tokens import Tokens, row_count, row_reduce, row_sum

REJECT_LEVELS = ("token", "sequence-sum", "sequence-mean")
# TRL's vllm_importance_sampling_mode names: (level, the bound they need)
IS_ALIASES = {
    "token_truncate": ("token", "is_cap"),
    "token_mask": ("token", "is_mask"),
    "sequence_truncate": ("sequence", "is_cap"),
    "sequence_mask": ("sequence", "is_mask"),
}
# verl's rollout_rs names: (estimator, level)
REJECT_ALIASES = {
    f"{prefix}_{k}": (k, level)
    for k in ("k1", "k2", "k3")
    for prefix, level in (("token", "token"), ("seq_sum", "sequence-sum"), ("seq_mean", "sequence-mean"))
}


def log_ratios(tokens: Tokens, clamp: float) -> tuple[np.ndarray, np.ndarray]:
    """``d = old - rollout`` per token, float64, and ``lr``, the same clamped to [-clamp, clamp]."""
    d = np.subtract(tokens.old, tokens.rollout, dtype=np.float64)
    return d, np.clip(d, -clamp, clamp)


def is_weights(lr: np.ndarray, tokens: Tokens, config) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The weights ``w_t`` of ``config.is_level`` (``lr``: the clamped log-ratios) after its
    mask and cap, and where each bit (``masked``: set to 0, ``truncated``: capped)."""
    if config.is_level == "sequence":
        log_w = np.clip(row_sum(lr, tokens), -config.logratio_clamp, config.logratio_clamp)
        w = np.repeat(np.exp(log_w), tokens.lengths)
    else:
        w = np.exp(lr)
    masked = np.zeros(w.shape, dtype=bool)
    if config.is_mask is not None:
        lo, hi = config.is_mask
        masked = (w < lo) | (w > hi)
        w = np.where(masked, 0.0, w)
    truncated = np.zeros(w.shape, dtype=bool)
    if config.is_cap is not None:
        truncated = w > config.is_cap
        w = np.minimum(w, config.is_cap)
    return w, masked, truncated


def rejected(lr: np.ndarray, tokens: Tokens, config) -> np.ndarray:
    """Which tokens ``config.reject`` rejects (a bool per token; counted tokens only), from the
    clamped log-ratios ``lr``."""
    stat = KL_ESTIMATORS[config.reject](-lr)  # d = rollout - old
    if config.reject_level != "token":
        total = row_sum(stat, tokens)
        if config.reject_level == "sequence-mean":
            total = np.divide(total, tokens.n_counted, out=np.zeros(tokens.rows), where=tokens.n_counted > 0)
        stat = np.repeat(total, tokens.lengths)
    lo, hi = config.reject_bounds
    return tokens.counted((stat < lo) | (stat > hi), False)


def corrected(tokens: Tokens, lr: np.ndarray, config) -> tuple[Tokens, np.ndarray | None, dict[str, np.ndarray]]:
    """The rows with rejected tokens out of the mask, the importance weights (``None``: no
    weighting) and per-row counts: ``rejected_tokens``, ``is_masked``, ``is_truncated``,
    ``is_weight_sum`` (over the tokens that stay counted); ``lr``: the clamped log-ratios."""
    out: dict[str, np.ndarray] = {}
    weights = None
    if config.is_level is not None:
        weights, masked, truncated = is_weights(lr, tokens, config)
    if config.reject is not None:
        out_of_mask = rejected(lr, tokens, config)
        out["rejected_tokens"] = row_count(out_of_mask, tokens)
        tokens = replace(tokens, mask=~out_of_mask if tokens.mask is None else tokens.mask & ~out_of_mask)
    if weights is not None:
        out.update(is_masked=row_count(masked, tokens), is_truncated=row_count(truncated, tokens), is_weight_sum=row_sum(weights, tokens))
    return tokens, weights, out


def mismatch_terms(tokens: Tokens, d: np.ndarray, lr: np.ndarray) -> dict[str, np.ndarray]:
    """Per row, over counted tokens: ``mismatch_tokens``, sums of ``|old - rollout|``, of
    ``k1 = rollout - old`` and ``k3`` (KL(rollout || old), samples from the rollout policy;
    from the clamped ``lr``), of the old and the rollout log-probs, and ``abs_diff_max`` (NaN
    without tokens); ``d``: the log-ratios ``old - rollout``."""
    abs_diff = np.abs(d)
    abs_diff_max = row_reduce(tokens.counted(abs_diff, -np.inf), tokens, np.maximum, np.nan)
    abs_diff_max[tokens.n_counted == 0] = np.nan
    return {
        "mismatch_tokens": tokens.n_counted,
        "abs_diff_sum": row_sum(abs_diff, tokens),
        "abs_diff_max": abs_diff_max,
        "k1_sum": -row_sum(d, tokens),
        "k3_sum": row_sum(k3(-lr), tokens),
        "old_sum": row_sum(tokens.old, tokens),
        "rollout_sum": row_sum(tokens.rollout, tokens),
    }
