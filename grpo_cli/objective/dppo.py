"""DPPO (Binary-TV and Binary-KL, arXiv 2602.04879; verl 0.9.1's ``dppo_tv``, ``dppo_kl``):
REINFORCE weighted by the truncated ratio, on the tokens whose probability moved little."""

import numpy as np

from .losses import Flag, LossInputs, SignedFactors, loss

PARAMS = ("epsilon", "epsilon_low", "epsilon_high", "dual_clip")
FLAGS = (Flag("low", -1), Flag("high", +1), Flag("truncated", 0, per_row=False))


def truncated_reinforce(inputs: LossInputs, config, valid_positive: np.ndarray, valid_negative: np.ndarray) -> SignedFactors:
    """``sg(min(rho, C)) log pi`` on the valid tokens of each sign, 0 on the others (C:
    ``dual_clip``, verl's clip_ratio_c; none: no truncation)."""
    cap = np.inf if config.dual_clip is None else config.dual_clip
    weighted = np.minimum(inputs.ratio, cap) * inputs.logp
    return SignedFactors(
        np.where(valid_positive, weighted, 0.0),
        np.where(valid_negative, weighted, 0.0),
        flags={"low": ~valid_negative, "high": ~valid_positive, "truncated": inputs.ratio > cap},
    )


@loss("dppo_tv", params=PARAMS, flags=FLAGS)
def dppo_tv(inputs: LossInputs, config) -> SignedFactors:
    """sg(min(rho, C)) A log pi where p - p_old <= eps_high (A > 0) or >= -eps_low (A < 0), else 0.

    .. math:: L_t = \\mathrm{sg}(\\min(\\rho_t, C)) \\, A \\log \\pi_t \\, [\\text{valid}_t]

    verl 0.9.1, trainer/ppo/core_algos.py:1379 (``compute_policy_loss_dppo_tv``), with
    ``p = exp(log pi)``: the epsilons are thresholds on the change of probability (total
    variation), not on the ratio; C is ``dual_clip`` (verl's clip_ratio_c, 3 in its config);
    rho is clamped at ``logratio_clamp`` (verl: 20). Flags: ``low`` / ``high``, the tokens
    left out (A < 0 / A > 0); ``truncated``, rho > C.
    Gradient: -min(rho, C) A grad(log pi) on the valid tokens, 0 on the others.
    """
    change = np.exp(inputs.logp) - np.exp(inputs.old_logp)
    return truncated_reinforce(inputs, config, change <= config.epsilon_high, change >= -config.epsilon_low)


@loss("dppo_kl", params=PARAMS, flags=FLAGS)
def dppo_kl(inputs: LossInputs, config) -> SignedFactors:
    """sg(min(rho, C)) A log pi where the binary KL(p_old || p) <= eps (or p moved against A's sign), else 0.

    .. math:: \\mathrm{KL}_t = p_{old} \\log\\frac{p_{old}}{p} + (1 - p_{old}) \\log\\frac{1 - p_{old} + 10^{-8}}{1 - p + 10^{-8}}

    verl 0.9.1, trainer/ppo/core_algos.py:1460 (``compute_policy_loss_dppo_kl``): valid
    where ``KL_t <= eps_high`` or ``p <= p_old`` (A > 0), ``KL_t <= eps_low`` or
    ``p >= p_old`` (A < 0); C, the clamp and the flags as ``dppo_tv``.
    Gradient: -min(rho, C) A grad(log pi) on the valid tokens, 0 on the others.
    """
    logp, old = inputs.logp, inputs.old_logp
    p, p_old = np.exp(logp), np.exp(old)
    binary_kl = p_old * (old - logp) + (1.0 - p_old) * np.log((1.0 - p_old + 1e-8) / (1.0 - p + 1e-8))
    return truncated_reinforce(inputs, config, (binary_kl <= config.epsilon_high) | (p <= p_old), (binary_kl <= config.epsilon_low) | (p >= p_old))
