"""CISPO (MiniMax-M1, 2025): REINFORCE weighted by the clipped, stop-gradient ratio."""

import numpy as np

from .losses import Flag, LossInputs, SignedFactors, loss


@loss("cispo", params=("epsilon", "epsilon_low", "epsilon_high", "ratio_level", "cispo_clip"), flags=(Flag("low", 0), Flag("high", 0)))
def cispo(inputs: LossInputs, config) -> SignedFactors:
    """sg(clip(rho, 1 - eps_low, 1 + eps_high)) A log pi; or capped from above only (cispo_clip).

    .. math:: L_t = \\mathrm{sg}(\\mathrm{clip}(\\rho_t, 1 - \\epsilon_{low}, 1 + \\epsilon_{high})) \\, A \\, \\log \\pi_t

    ``cispo_clip`` says which weight: ``two-sided``, the clip above (verl 0.9.1,
    trainer/ppo/core_algos.py:2047); ``upper``, ``min(rho, 1 + eps_high)`` (Twinkle 0.5.1,
    loss/grpo.py:412, with its epsilon); ``epsilon-high``, ``min(rho, eps_high)``: TRL's
    ``epsilon_high`` is the cap itself (TRL 1.16, grpo_trainer.py; default eps_high = eps =
    0.2, so a cap of 0.2; TRL suggests 5). Flags: ``low`` / ``high``, the tokens whose weight
    was clipped.
    Gradient: -sg(clip(rho)) A grad(log pi) on every token: the clip bounds the weight, never
    removes a token's gradient. The value is not PPO's; compare it with the trainer's loss.
    """
    ratio = inputs.ratio
    if config.cispo_clip == "two-sided":
        low, high = 1.0 - config.epsilon_low, 1.0 + config.epsilon_high
        weighted = np.clip(ratio, low, high) * inputs.logp
        return SignedFactors(weighted, weighted, flags={"low": ratio < low, "high": ratio > high})
    cap = config.epsilon_high if config.cispo_clip == "epsilon-high" else 1.0 + config.epsilon_high
    weighted = np.minimum(ratio, cap) * inputs.logp
    return SignedFactors(weighted, weighted, flags={"low": None, "high": ratio > cap})
