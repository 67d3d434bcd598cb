"""DRO (verl 0.9.1's ``dro``): the policy gradient with a quadratic penalty on the log-ratio."""

from ..numerics import LOGRATIO_CLAMP_MAX
from .losses import LossInputs, SignedFactors, loss


@loss("dro", params=("dro_beta",), logratio_clamp=LOGRATIO_CLAMP_MAX)
def dro(inputs: LossInputs, config) -> SignedFactors:
    """A log pi - dro_beta/2 (log pi - log pi_old)^2, the penalty on every token (A = 0 too).

    .. math:: L_t = A \\log \\pi_t - \\frac{\\beta}{2} (\\log \\pi_t - \\log \\pi_{old,t})^2

    verl 0.9.1, trainer/ppo/core_algos.py:2014 (``compute_policy_loss_dro``): ``dro_beta``
    is required (> 0), and the log-ratio is not clamped, so the loss is defined with
    ``logratio_clamp`` 709 (none in effect) unless one is given.
    Gradient: -(A - beta (log pi - log pi_old)) grad(log pi).
    """
    d = inputs.log_ratio
    return SignedFactors(inputs.logp, inputs.logp, flags={}, extra=-0.5 * config.dro_beta * d * d)
