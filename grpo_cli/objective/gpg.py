"""GPG (Chu et al. 2025): the plain policy gradient, no ratio and no clip."""

from .losses import LossInputs, SignedFactors, loss


@loss("gpg")
def gpg(inputs: LossInputs, config) -> SignedFactors:
    """A log pi (REINFORCE on the new log-probs; old log-probs only feed the diagnostics).

    .. math:: L_t = A \\log \\pi_t

    Gradient: -A grad(log pi), every token, unweighted.
    """
    return SignedFactors(inputs.logp, inputs.logp, flags={})
