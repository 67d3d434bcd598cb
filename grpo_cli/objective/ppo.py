"""PPO's clipped surrogate (Schulman et al. 2017), with DAPO's clip-higher and dual clip."""

import numpy as np

from .losses import Flag, SignedFactors, loss


@loss("ppo", params=("epsilon", "epsilon_low", "epsilon_high", "dual_clip"),
      flags=(Flag("low", -1), Flag("high", +1), Flag("dual", -1, per_row=False)))
def ppo(ratio: np.ndarray, config) -> SignedFactors:
    """min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A); dual clip: max(that, C A) for A < 0.

    .. math:: L_t = \\min(\\rho_t A, \\mathrm{clip}(\\rho_t, 1 - \\epsilon_{low}, 1 + \\epsilon_{high}) A)

    As a factor of A: ``min(rho, 1 + eps_high)`` for A > 0; ``max(rho, 1 - eps_low)`` for
    A < 0, capped at C by the dual clip (``max(L, C A) = A min(max(rho, 1 - eps_low), C)``).
    Flags: ``low`` (A < 0, rho < 1 - eps_low), ``high`` (A > 0, rho > 1 + eps_high),
    ``dual`` (A < 0, rho > C).
    """
    high, low = 1.0 + config.epsilon_high, 1.0 - config.epsilon_low
    lower = np.maximum(ratio, low)
    if config.dual_clip is not None:
        lower = np.minimum(lower, config.dual_clip)
    return SignedFactors(
        positive=np.minimum(ratio, high),
        negative=lower,
        flags={"low": ratio < low, "high": ratio > high, "dual": ratio > config.dual_clip if config.dual_clip is not None else None},
    )
