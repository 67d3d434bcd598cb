"""Slow, obvious references for every registered loss: one token's term, as the paper writes
it. A test fails for a loss that has none here."""

from __future__ import annotations

import math


def ppo(ratio: float, adv: float, config) -> float:
    term = min(ratio * adv, min(max(ratio, 1 - config.epsilon_low), 1 + config.epsilon_high) * adv)
    if config.dual_clip is not None and adv < 0:
        term = max(term, config.dual_clip * adv)
    return term


REFERENCES = {"ppo": ppo}


def reference_row_objective(new, old, adv, config, mask=None) -> float:
    """One row's sum_t of the loss's token terms, token by token (``adv``: the row's
    advantage, or a list of per-token advantages)."""
    total = 0.0
    for t, (n, o) in enumerate(zip(new, old)):
        if mask is not None and not mask[t]:
            continue
        a = adv[t] if isinstance(adv, (list, tuple)) else adv
        total += REFERENCES[config.loss](math.exp(n - o), a, config)
    return total
