"""PPO's clipped value loss (Schulman et al. 2017, as twinkle-kit 0.5.1's ``ppo_value``)."""

import numpy as np

from ..errors import present
from .losses import LossInputs, SignedFactors, loss


@loss("ppo_value", params=("value_clip",), critic=True, agg="token-mean")
def ppo_value(inputs: LossInputs, config) -> SignedFactors:
    """The critic's clipped squared error: 1/2 max((V - R)^2, (V_old + clip(V - V_old, -c, c) - R)^2).

    .. math:: L_t = \\tfrac{1}{2} \\max\\big((V_t - R_t)^2, (V^{old}_t + \\mathrm{clip}(V_t - V^{old}_t, -c, c) - R_t)^2\\big)

    V: the critic's values (``values_col``), V_old: the values the returns were made with
    (``old_values_col``), R: the returns (``returns_col``; GAE's ``A + V_old`` before the
    whitening, `grpo advantages --estimator gae`'s ``token_return``), c: ``value_clip``
    (Twinkle: 0.2). twinkle-kit 0.5.1 loss/value.py:56-61, a token mean with the token count
    clamped at 1 (``agg`` token-mean). The objective is ``-L_t``; no advantage is read.
    Gradient: (V - R) grad V where the unclipped error is the larger, else 0 once V - V_old
    is past the clip (the clipped branch is constant in V there).
    """
    t = inputs.tokens
    v, v_old, r = present(t.values, "the values"), present(t.old_values, "the old values"), present(t.returns, "the returns")
    clipped = v_old + np.clip(v - v_old, -config.value_clip, config.value_clip)
    loss_t = 0.5 * np.maximum((v - r) ** 2, (clipped - r) ** 2)
    zero = np.zeros_like(loss_t)
    return SignedFactors(zero, zero, flags={}, extra=-loss_t)
