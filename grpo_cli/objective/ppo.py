"""PPO's clipped surrogate (Schulman et al. 2017), with DAPO's clip-higher, the dual clip
and TRL's ``delta``; GSPO (Zheng et al. 2025) is the same surrogate on the sequence ratio."""

from dataclasses import replace
from typing import Any

import numpy as np

from .losses import Flag, LossInputs, SignedFactors, loss

CLIP_FLAGS = (Flag("low", -1), Flag("high", +1), Flag("dual", -1, per_row=False))
SEQUENCE: dict[str, Any] = {"ratio_level": "sequence", "agg": "seq-mean-token-mean", "logratio_clamp": 10.0}  # verl's GSPO


@loss("ppo", params=("epsilon", "epsilon_low", "epsilon_high", "dual_clip", "delta", "ratio_level"), flags=CLIP_FLAGS)
def ppo(inputs: LossInputs, config) -> SignedFactors:
    """min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A); dual clip / delta cap rho at C.

    .. math:: L_t = \\min(\\rho_t A, \\mathrm{clip}(\\rho_t, 1 - \\epsilon_{low}, 1 + \\epsilon_{high}) A)

    As a factor of A: ``min(rho, 1 + eps_high)`` for A > 0; ``max(rho, 1 - eps_low)`` for
    A < 0, capped at C by the dual clip (verl: ``max(L, C A) = A min(max(rho, 1 - eps_low), C)``).
    TRL's ``delta`` caps the unclipped ratio: ``min(min(rho, delta) A, clip(rho) A)``, the
    dual clip when ``delta >= 1 + eps_high``. Flags: ``low`` (A < 0, rho < 1 - eps_low),
    ``high`` (A > 0, rho > 1 + eps_high), ``dual`` (A < 0, rho > C).
    Gradient: -A rho grad(log pi) on tokens inside the clip range, 0 where a clip binds.
    """
    ratio = inputs.ratio
    high, low = 1.0 + config.epsilon_high, 1.0 - config.epsilon_low
    positive, negative = np.minimum(ratio, high), np.maximum(ratio, low)
    cap = config.dual_clip if config.dual_clip is not None else config.delta
    if config.dual_clip is not None:
        negative = np.minimum(negative, config.dual_clip)
    elif config.delta is not None:
        capped = np.minimum(ratio, config.delta)
        positive, negative = np.minimum(positive, capped), np.maximum(capped, np.clip(ratio, low, high))
    return SignedFactors(positive, negative, flags={"low": ratio < low, "high": ratio > high, "dual": ratio > cap if cap is not None else None})


@loss("gspo", params=("epsilon", "epsilon_low", "epsilon_high", "delta"), flags=CLIP_FLAGS, **SEQUENCE)
def gspo(inputs: LossInputs, config) -> SignedFactors:
    """PPO's clip on the sequence ratio s_i = exp(mean_t log rho_it), per-sequence mean.

    ``L_it = min(s_i A, clip(s_i, 1 - eps_low, 1 + eps_high) A)`` on every token of row i;
    ``log s_i`` is clamped at ``logratio_clamp`` (verl: 10) from above.
    Gradient: -A s_i times the row's mean grad(log pi) when s_i is inside the clip range.
    """
    return ppo(inputs, config)


@loss("gspo-token", params=("epsilon", "epsilon_low", "epsilon_high", "delta"), flags=CLIP_FLAGS, **SEQUENCE)
def gspo_token(inputs: LossInputs, config) -> SignedFactors:
    """GSPO-token: the value of GSPO; the ratio sg(s_i) pi_t / sg(pi_t) differs in its gradient.

    Gradient: -A_t sg(s_i) grad(log pi_t), token by token (so per-token advantages steer each
    token), 0 where s_i is clipped.
    """
    return ppo(inputs, config)


@loss("rloo", params=("epsilon", "epsilon_low", "epsilon_high"), flags=CLIP_FLAGS, ratio_level="sequence-sum", agg="seq-mean-token-mean")
def rloo(inputs: LossInputs, config) -> SignedFactors:
    """TRL's RLOOTrainer loss: PPO's clip on the ratio of the row's probabilities, mean over rows.

    .. math:: L_i = \\min(\\rho_i A_i, \\mathrm{clip}(\\rho_i, 1 - \\epsilon_{low}, 1 + \\epsilon_{high}) A_i),
              \\quad \\rho_i = \\exp \\sum_t (\\log \\pi - \\log \\pi_{old})_{it}

    on every token of row i, averaged per sequence and then over rows (TRL 1.16
    rloo_trainer.py:1822-1833, ``per_sequence_loss.mean()``). A row without counted tokens has
    rho = exp(0) = 1, so it adds ``A_i`` to the mean over rows (``empty_rows`` count).
    Gradient: -A rho_i times the row's summed grad(log pi) when rho_i is inside the clip range.
    """
    return replace(ppo(inputs, config), empty=1.0)
