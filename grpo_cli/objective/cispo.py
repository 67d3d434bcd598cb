"""CISPO (MiniMax-M1, 2025): REINFORCE weighted by the clipped, stop-gradient ratio."""

import numpy as np

from .losses import Flag, LossInputs, SignedFactors, loss


@loss("cispo", params=("epsilon", "epsilon_low", "epsilon_high", "ratio_level"), flags=(Flag("low", 0), Flag("high", 0)))
def cispo(inputs: LossInputs, config) -> SignedFactors:
    """sg(clip(rho, 1 - eps_low, 1 + eps_high)) A log pi.

    .. math:: L_t = \\mathrm{sg}(\\mathrm{clip}(\\rho_t, 1 - \\epsilon_{low}, 1 + \\epsilon_{high})) \\, A \\, \\log \\pi_t

    Two-sided as verl; ``epsilon_low 1`` leaves only the upper bound, so TRL's cap C is
    ``epsilon_low 1, epsilon_high C - 1``. Flags: ``low`` / ``high``, the tokens whose weight was clipped.
    Gradient: -sg(clip(rho)) A grad(log pi) on every token: the clip bounds the weight, never
    removes a token's gradient. The value is not PPO's; compare it with the trainer's loss.
    """
    low, high = 1.0 - config.epsilon_low, 1.0 + config.epsilon_high
    weighted = np.clip(inputs.ratio, low, high) * inputs.logp
    return SignedFactors(weighted, weighted, flags={"low": inputs.ratio < low, "high": inputs.ratio > high})
