"""Slow, obvious references for every registered loss: one row's sum of token terms, token
by token, as the paper writes it. A test fails for a loss that has none here."""

from __future__ import annotations

import math


def _ratios(new, old, config) -> list[float]:
    """rho_t: exp of the clamped token log-ratio, or of the row's mean log-ratio (capped above)."""
    d = [n - o for n, o in zip(new, old)]
    if config.ratio_level == "sequence":
        mean = sum(d) / len(d) if d else 0.0
        return [math.exp(min(mean, config.logratio_clamp))] * len(d)
    c = config.logratio_clamp
    return [math.exp(max(-c, min(c, x))) for x in d]


def _clip(x, config):
    return min(max(x, 1 - config.epsilon_low), 1 + config.epsilon_high)


def ppo_term(ratio: float, adv: float, config) -> float:
    unclipped = ratio if config.delta is None else min(ratio, config.delta)
    term = min(unclipped * adv, _clip(ratio, config) * adv)
    if config.dual_clip is not None and adv < 0:
        term = max(term, config.dual_clip * adv)
    return term


def ppo(new, old, adv, config) -> float:
    return sum(ppo_term(r, a, config) for r, a in zip(_ratios(new, old, config), adv))


def sapo(new, old, adv, config) -> float:
    def gate(r, tau):
        return 1 / (1 + math.exp(-tau * (r - 1))) * 4 / tau
    return sum(gate(r, config.tau_pos if a > 0 else config.tau_neg) * a for r, a in zip(_ratios(new, old, config), adv))


def cispo(new, old, adv, config) -> float:
    return sum(_clip(r, config) * a * n for r, a, n in zip(_ratios(new, old, config), adv, new))


def gmpo(new, old, adv, config) -> float:
    d = [math.log(r) for r in _ratios(new, old, config)]
    up = math.exp(sum(min(x, config.epsilon_high) for x in d) / len(d)) if d else 1.0
    down = math.exp(sum(max(x, -config.epsilon_low) for x in d) / len(d)) if d else 1.0
    return sum(a * (up if a > 0 else down) for a in adv)


def gpg(new, old, adv, config) -> float:
    return sum(a * n for a, n in zip(adv, new))


REFERENCES = {"ppo": ppo, "gspo": ppo, "gspo-token": ppo, "sapo": sapo, "cispo": cispo, "gmpo": gmpo, "gpg": gpg}


def reference_row_objective(new, old, adv, config, mask=None) -> float:
    """One row's sum_t of the loss's token terms (``adv``: the row's advantage, or a list of
    per-token advantages); masked tokens are left out, means are over counted tokens."""
    adv = list(adv) if isinstance(adv, (list, tuple)) else [adv] * len(new)
    kept = [t for t in range(len(new)) if mask is None or mask[t]]
    return REFERENCES[config.loss]([new[t] for t in kept], [old[t] for t in kept], [adv[t] for t in kept], config)
