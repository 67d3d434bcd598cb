"""Train/rollout mismatch: the sampler's log-probs (vLLM, SGLang) against the trainer's old ones.

With ``lr_t = old_t - rollout_t`` (clamped to ``[-c, c]`` before exp, c = ``logratio_clamp``):

- importance weights (``is_level``): token ``w_t = exp(lr_t)``, sequence ``w_i = exp(sum_t lr_it)``
  on each of row i's tokens; ``is_mask (LO, HI)`` sets ``w = 0`` where ``w < LO`` or ``w > HI``
  (IcePop, TRL's ``*_mask``), then ``is_cap C`` truncates ``w = min(w, C)`` (TIS, TRL's
  ``*_truncate``) and ``is_floor F`` from below, ``w = max(w, F)`` (TRL's
  ``vllm_importance_sampling_clip_min``; OpenRLHF 0.11's TIS clamps to [0.5, 5]). With
  ``is_normalize`` the weights are then divided by their mean ``mu`` over the whole input, on
  the mask as given (verl 0.9.1 ``rollout_is_batch_normalize``, rollout_corr_helper.py:628-655):
  token ``mu = sum w / (n + 1e-8)`` over the n counted tokens, sequence ``mu`` = the mean over
  rows with tokens of ``sum_t w_it / (n_i + 1e-8)``; ``mu <= 1e-8`` leaves them as they are.
  The weights multiply the per-token loss term (not the KL penalty).
- rejection (``reject``): a KL estimate with ``d = rollout - old`` (``k1 = d``, ``k2 = d^2/2``,
  ``k3 = exp(-d) + d - 1``), per token or a row's sum, mean or max (verl 0.9.1's
  ``seq_max_k2``/``seq_max_k3``: the largest over counted tokens, 0 without tokens), is kept
  when it lies in the bounds; several criteria (verl's comma list) reject what any of them
  rejects. OpenRLHF 0.11.2's ``is_correction_gating`` divergences of the sampled token's
  probabilities ``p = pi_rollout``, ``q = pi_old``, each clamped to ``[1e-6, 1 - 1e-6]``
  (models/loss.py:225-233), are criteria too: ``binary_kl = p log(p/q) + (1-p) log((1-p)/(1-q))``
  and ``tv = |p - q|``, kept under an upper bound, per token or a row's mean. ``reject_veto V`` rejects a row with a token whose ``pi_old / pi_rollout < V``
  (verl 0.7.0's ``rollout_token_veto_threshold``; on the clamped ``lr``, the same for
  ``V > exp(-c)``). Rejected tokens (or rows) leave the mask, as verl's rejection sampling in
  its decoupled mode; with ``reject_counted`` they stay counted with a weight 0 (verl 0.9.1's
  bypass mode, whose denominators are counted before rejection; OpenRLHF's seq-mask-tis).
- off-policy sequence mask (``off_policy_mask``, TRL's OPSM): a row of negative advantage
  whose mean ``sampled - new`` exceeds the threshold weighs 0 (:func:`off_policy_kept`).
- bypass (``bypass``, verl's ``bypass_mode``, core_algos.py:2333-2549 in 0.9.1): the rollout
  log-probs are the old policy, and the weights and rejection take ``lr = new - rollout``.
  ``ppo_clip``: PPO's clip on ``new - rollout``, unweighted (verl computes the weights for its
  metrics only); ``reinforce``: ``L = A log pi * w`` (``w = 1`` without ``is_level``).

verl 0.7.0's rejection modes are k1 with the bounds inverted (q = pi_old / pi_rollout there):
``token``/``sequence``/``geometric`` U, L = ``--reject k1 --reject-level
token``/``sequence-sum``/``sequence-mean`` ``--reject-threshold 1/U,1/L`` (``"U"`` when L = 1/U).

Weights and rejection both read the mask as given, so neither depends on the other. The
caller computes ``d = old - rollout`` once per batch (:func:`log_ratios`) for all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..kl import KL_ESTIMATORS, k3
from ..tokens import Tokens, row_count, row_reduce, row_sum
from ..errors import present

REJECT_LEVELS = ("token", "sequence-sum", "sequence-mean", "sequence-max")
BYPASS_MODES = ("ppo_clip", "reinforce")  # verl's bypass_mode loss_type
# TRL's vllm_importance_sampling_mode names: (level, the bounds they take)
IS_ALIASES = {
    "token_truncate": ("token", ("is_cap", "is_floor")),
    "token_mask": ("token", ("is_mask",)),
    "sequence_truncate": ("sequence", ("is_cap", "is_floor")),
    "sequence_mask": ("sequence", ("is_mask",)),
}
# verl's rollout_rs names: (estimator, level)
REJECT_ALIASES = {
    f"{prefix}_{k}": (k, level)
    for k in ("k1", "k2", "k3")
    for prefix, level in (("token", "token"), ("seq_sum", "sequence-sum"), ("seq_mean", "sequence-mean"))
} | {f"seq_max_{k}": (k, "sequence-max") for k in ("k2", "k3")}
GATE_CLAMP = 1e-6  # OpenRLHF's clamp of the probabilities, so that binary_kl's logs are finite
NORMALIZE_EPS = 1e-8  # verl's masked_mean: sum / (count + 1e-8); a mean <= 1e-8 leaves the weights as they are


def binary_kl(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """KL of Bernoulli(p) from Bernoulli(q): p log(p/q) + (1 - p) log((1 - p)/(1 - q))."""
    return p * np.log(p / q) + (1.0 - p) * np.log((1.0 - p) / (1.0 - q))


def tv(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Total variation of the sampled token: |p - q|."""
    return np.abs(p - q)


GATES = {"binary_kl": binary_kl, "tv": tv}  # OpenRLHF 0.11.2's is_correction_gating divergences
REJECT_STATISTICS = ("k1", "k2", "k3", *GATES)


@dataclass(frozen=True)
class Criterion:
    """One rejection criterion: the KL estimate ``kl`` (k1, k2, k3 of ``d = rollout - old``,
    or a divergence of :data:`GATES`) taken per ``level``, kept in ``[lo, hi]`` (k1: log-ratio bounds)."""

    kl: str
    level: str
    lo: float
    hi: float


def log_ratios(tokens: Tokens, clamp: float) -> tuple[np.ndarray, np.ndarray]:
    """``d = old - rollout`` per token, float64, and ``lr``, the same clamped to [-clamp, clamp]."""
    d = np.subtract(tokens.old, present(tokens.rollout, "the rollout log-probs"), dtype=np.float64)
    return d, np.clip(d, -clamp, clamp)


def corrected_policy(tokens: Tokens, lr: np.ndarray, config) -> tuple[Tokens, np.ndarray]:
    """The rows and clamped log-ratios the correction reads: as given (``lr = old - rollout``),
    or in ``config.bypass`` mode the rollout policy as the old one and ``lr = new - rollout``."""
    if config.bypass is None:
        return tokens, lr
    return replace(tokens, old=present(tokens.rollout, "the rollout log-probs")), log_ratios(replace(tokens, old=tokens.new), config.logratio_clamp)[
        1
    ]


def is_weights(lr: np.ndarray, tokens: Tokens, config) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The weights ``w_t`` of ``config.is_level`` (``lr``: the clamped log-ratios) after its
    mask, cap and floor (not normalized), and where each bit (``masked``: set to 0,
    ``truncated``: capped or floored)."""
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
    if config.is_floor is not None:
        truncated |= w < config.is_floor
        w = np.maximum(w, config.is_floor)
    return w, masked, truncated


def is_mean_part(tokens: Tokens, config) -> np.ndarray:
    """One batch's part of ``is_normalize``'s mean weight, ``[total, count]`` on the mask as
    given: token, the weights' sum and the counted tokens; sequence, the sum over rows with
    tokens of ``sum_t w_it / (n_i + 1e-8)`` and those rows (:func:`is_mean` ends it)."""
    tokens, lr = corrected_policy(tokens, log_ratios(tokens, config.logratio_clamp)[1], config)
    w = row_sum(is_weights(lr, tokens, config)[0], tokens)
    n = tokens.n_counted
    if config.is_level == "sequence":
        return np.array([np.sum(w / (n + NORMALIZE_EPS)), np.count_nonzero(n)], dtype=np.float64)
    return np.array([np.sum(w), np.sum(n)], dtype=np.float64)


def is_mean(total: np.ndarray, level: str) -> float:
    """``is_normalize``'s divisor from the summed :func:`is_mean_part` of every batch: verl's
    ``sum / (count + 1e-8)`` (token) or ``sum / max(rows, 1e-8)`` (sequence); 1 where that mean
    is <= 1e-8 (verl leaves the weights as they are)."""
    part, count = float(total[0]), float(total[1])
    mean = part / (count + NORMALIZE_EPS) if level == "token" else part / max(count, NORMALIZE_EPS)
    return mean if mean > NORMALIZE_EPS else 1.0


def rejected(lr: np.ndarray, tokens: Tokens, config) -> np.ndarray:
    """Which counted tokens ``config.reject_criteria`` and ``config.reject_veto`` reject (a bool
    per token), from the clamped log-ratios ``lr``: what any criterion rejects."""
    out = np.zeros(lr.shape, dtype=bool)
    for c in config.reject_criteria:
        stat = KL_ESTIMATORS[c.kl](-lr) if c.kl in KL_ESTIMATORS else gate(c.kl, tokens, config)  # d = rollout - old
        if c.level == "sequence-max":
            stat = np.repeat(row_reduce(tokens.counted(stat, -np.inf), tokens, np.maximum, 0.0), tokens.lengths)
        elif c.level != "token":
            total = row_sum(stat, tokens)
            if c.level == "sequence-mean":
                total = np.divide(total, tokens.n_counted, out=np.zeros(tokens.rows), where=tokens.n_counted > 0)
            stat = np.repeat(total, tokens.lengths)
        out |= (stat < c.lo) | (stat > c.hi)
    if config.reject_veto is not None:
        out |= np.repeat(row_count(lr < np.log(config.reject_veto), tokens) > 0, tokens.lengths)
    return tokens.counted(out, False)


def gate(name: str, tokens: Tokens, config) -> np.ndarray:
    """Divergence ``name`` of :data:`GATES` per token between the sampled token's probability
    under the rollout policy, ``p``, and the old one (in bypass mode the new one), ``q``, both
    clamped to ``[1e-6, 1 - 1e-6]`` (OpenRLHF 0.11.2, models/loss.py:225-233)."""
    old = tokens.new if config.bypass is not None else tokens.old
    p, q = (
        np.clip(np.exp(np.asarray(x, dtype=np.float64)), GATE_CLAMP, 1.0 - GATE_CLAMP)
        for x in (present(tokens.rollout, "the rollout log-probs"), old)
    )
    return GATES[name](p, q)


def off_policy_kept(tokens: Tokens, advantage: np.ndarray, delta: float) -> np.ndarray:
    """TRL's off-policy sequence mask (DeepSeek-V3.2's OPSM; TRL 1.16 grpo_trainer.py:2945-2970,
    applied at :3140): 1 on a token whose advantage is >= 0 or whose row's mean over its counted
    tokens of ``sampled - new`` is <= ``delta``, else 0 (the token stays counted).

    .. math:: \\bar k_i = \\frac{1}{\\max(n_i, 1)} \\sum_t (\\log \\pi_{sampled} - \\log \\pi_\\theta)_{it},
              \\quad keep_{it} = [A_{it} \\ge 0 \\lor \\bar k_i \\le \\delta]

    ``sampled``: the rollout log-probs where the input has them, else the old ones (TRL's
    sampling_per_token_logps, else old_per_token_logps)."""
    sampled = tokens.old if tokens.rollout is None else tokens.rollout
    k = row_sum(np.subtract(sampled, tokens.new, dtype=np.float64), tokens) / np.maximum(tokens.n_counted, 1)
    return ((advantage >= 0) | np.repeat(k <= delta, tokens.lengths)).astype(np.float64)


def corrected(tokens: Tokens, lr: np.ndarray, config) -> tuple[Tokens, np.ndarray | None, dict[str, np.ndarray]]:
    """The rows with rejected tokens out of the mask (or, with ``reject_counted``, weighted 0),
    the weights of the loss terms (``None``: no weighting) and per-row counts:
    ``rejected_tokens``, ``is_masked``, ``is_truncated``, ``is_weight_sum`` (over the tokens
    that stay counted); ``lr``: the clamped log-ratios ``old - rollout``. In bypass mode the
    returned rows have the rollout log-probs as the old ones."""
    out: dict[str, np.ndarray] = {}
    tokens, lr = corrected_policy(tokens, lr, config)
    weights = factor = None
    if config.is_level is not None:
        weights, masked, truncated = is_weights(lr, tokens, config)
        if config.is_normalize:
            weights = weights / config.is_mean
        factor = weights
    if config.reject is not None or config.reject_veto is not None:
        out_of_mask = rejected(lr, tokens, config)
        out["rejected_tokens"] = row_count(out_of_mask, tokens)
        if config.reject_counted:
            factor = np.where(out_of_mask, 0.0, 1.0 if weights is None else weights)
        else:
            tokens = replace(tokens, mask=~out_of_mask if tokens.mask is None else tokens.mask & ~out_of_mask)
    if weights is not None:
        out.update(is_masked=row_count(masked, tokens), is_truncated=row_count(truncated, tokens), is_weight_sum=row_sum(weights, tokens))
    return tokens, factor, out


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
        "rollout_sum": row_sum(present(tokens.rollout, "the rollout log-probs"), tokens),
    }
