"""VESPO (TRL 1.16's ``vespo``): REINFORCE weighted by a gamma function of the sequence ratio."""

import math

import numpy as np

from ..tokens import row_sum
from .losses import LossInputs, SignedFactors, loss

LOG_W_MIN = math.log(1e-8)


@loss("vespo", params=("vespo_k_pos", "vespo_lambda_pos", "vespo_k_neg", "vespo_lambda_neg"), logratio_clamp=20.0)
def vespo(inputs: LossInputs, config) -> SignedFactors:
    """sg(phi(w_i)) A log pi, phi(w) = exp(lambda + k log w - lambda w), w_i = the row's ratio product.

    .. math:: L_t = \\mathrm{sg}(e^{\\lambda} w_i^k e^{-\\lambda w_i}) \\, A \\log \\pi_t,
              \\quad \\log w_i = \\mathrm{clip}(\\textstyle\\sum_t \\log\\rho_{it}, \\log 10^{-8}, 20)

    TRL 1.16, trainer/grpo_trainer.py ``get_gamma_weights``: log w_i is the row's *sum* of
    token log-ratios, each clamped to +-20 (so the loss is defined with ``logratio_clamp`` 20,
    TRL's, unless one is given), then clamped to [log 1e-8, 20]; (k, lambda) are
    ``vespo_k_pos``, ``vespo_lambda_pos`` where A >= 0, ``vespo_k_neg``, ``vespo_lambda_neg``
    where A < 0, lambda at least 1e-4; phi(1) = 1, and a phi that is not a number is 0. TRL
    folds its vLLM importance weights into w; that is not modelled (``is_level`` is refused).
    Gradient: -phi(w_i) A grad(log pi): on-policy (w = 1) the plain policy gradient; rows far
    from w = 1 fade, faster for larger lambda (w > 1) and k (w < 1).
    """
    tokens = inputs.tokens
    log_w = np.clip(row_sum(inputs.log_ratio, tokens), LOG_W_MIN, 20.0)

    def weighted(k: float, lam: float) -> np.ndarray:
        lam = max(lam, 1e-4)
        with np.errstate(over="ignore", invalid="ignore"):
            phi = np.exp(lam + k * log_w - lam * np.exp(log_w))
        return np.repeat(np.where(np.isfinite(phi), phi, 0.0), tokens.lengths) * inputs.logp

    return SignedFactors(weighted(config.vespo_k_pos, config.vespo_lambda_pos), weighted(config.vespo_k_neg, config.vespo_lambda_neg), flags={})
