"""SAPO (Gao et al. 2025): a soft, temperature-controlled gate in place of the hard clip."""

import numpy as np

from .losses import LossInputs, SignedFactors, loss


def gate(ratio: np.ndarray, tau: float) -> np.ndarray:
    """sigma(tau (rho - 1)) * 4 / tau, with sigma(x) = (1 + tanh(x / 2)) / 2 (no overflow)."""
    return (1.0 + np.tanh(0.5 * tau * (ratio - 1.0))) * (2.0 / tau)


@loss("sapo", params=("tau_pos", "tau_neg", "ratio_level"), agg="seq-mean-token-mean")
def sapo(inputs: LossInputs, config) -> SignedFactors:
    """Soft gate sigma(tau (rho - 1)) 4 / tau times A; tau_pos where A > 0, tau_neg where A < 0.

    .. math:: L_t = \\sigma(\\tau (\\rho_t - 1)) \\frac{4}{\\tau} A

    At rho = 1 the gate is 2/tau (its slope there is 1, as rho's). Per-sequence mean, as verl
    and TRL aggregate it.
    Gradient: -A 4 sigma (1 - sigma) rho grad(log pi): the on-policy gradient at rho = 1,
    fading smoothly (faster for larger tau) as rho leaves 1; never exactly 0.
    """
    return SignedFactors(gate(inputs.ratio, config.tau_pos), gate(inputs.ratio, config.tau_neg), flags={})
