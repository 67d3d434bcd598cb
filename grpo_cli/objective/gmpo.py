"""GMPO (Zhao et al. 2025; verl's ``geo_mean``): the geometric mean of clipped token ratios."""

import numpy as np

from .losses import Flag, LossInputs, SignedFactors, loss
from ..tokens import row_sum


@loss("gmpo", params=("epsilon", "epsilon_low", "epsilon_high", "gmpo_empty"), flags=(Flag("low", -1), Flag("high", +1)), agg="seq-mean-token-mean")
def gmpo(inputs: LossInputs, config) -> SignedFactors:
    """exp(mean_t clip(log rho_t)) A per sequence; the clip is in log space and one-sided by sign.

    .. math:: L_i = A_i \\exp\\Big(\\frac{1}{n_i} \\sum_t \\mathrm{sgn}(A_i) \\min(\\mathrm{sgn}(A_i) \\log\\rho_t,
              \\mathrm{sgn}(A_i) \\mathrm{clip}(\\log\\rho_t, -\\epsilon_{low}, \\epsilon_{high}))\\Big)

    For A > 0 the log-ratio is capped at eps_high, for A < 0 floored at -eps_low. Each of the
    row's tokens carries the row's ratio, so the per-sequence mean gives ``A_i`` times it.
    The mean over rows follows ``empty_rows``; with ``count`` a row without counted tokens adds
    0 (``gmpo_empty`` zero: verl's geo_mean, 0.9.1 core_algos.py:2000, ``torch.mean`` over the
    micro-batch's rows, the row's terms masked) or ``A_i`` (``gmpo_empty`` advantage: TRL 1.16's
    experimental GMPOTrainer, experimental/gmpo/gmpo_trainer.py:101-106, takes the row's mean
    log-ratio as ``0 / max(0, 1)``, so its weight is exp(0) = 1 and its loss ``-A_i``).
    Flags: ``low`` (A < 0, log rho < -eps_low), ``high`` (A > 0, log rho > eps_high).
    Gradient: -A ratio_i times the mean grad(log pi) over the row's unclipped tokens.
    """
    d, tokens = inputs.log_ratio, inputs.tokens
    n = np.maximum(tokens.n_counted, 1)

    def geometric(clipped: np.ndarray) -> np.ndarray:
        return np.repeat(np.exp(row_sum(clipped, tokens) / n), tokens.lengths)

    return SignedFactors(
        geometric(np.minimum(d, config.epsilon_high)),
        geometric(np.maximum(d, -config.epsilon_low)),
        flags={"low": d < -config.epsilon_low, "high": d > config.epsilon_high},
        empty=1.0 if config.gmpo_empty == "advantage" else None,
    )
