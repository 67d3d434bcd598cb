"""Slow, obvious references for every registered loss: one row's sum of token terms, token
by token, as the paper writes it. Each loss's own test module holds its reference,
``REFERENCES = {name: fn(new, old, adv, config)}``, built from the pieces here; a test fails for
a loss that has none. A loss whose terms depend on every row (verl's covariance losses) has a
:func:`whole_input` reference: ``fn(news, olds, advs, config)`` of all rows, each row's sum."""

from __future__ import annotations

import functools
import math
from pathlib import Path

from ..conftest import gathered_references


@functools.cache
def references() -> dict:
    """Every ``REFERENCES`` of the test modules beside this one."""
    return gathered_references(__package__, Path(__file__).parent)


def ratios(new, old, config) -> list[float]:
    """rho_t: exp of the clamped token log-ratio, or of the row's mean (or sum) log-ratio (capped above)."""
    d = [n - o for n, o in zip(new, old)]
    if config.ratio_level == "sequence":
        mean = sum(d) / len(d) if d else 0.0
        return [math.exp(min(mean, config.logratio_clamp))] * len(d)
    if config.ratio_level == "sequence-sum":
        return [math.exp(min(sum(d), config.logratio_clamp))] * len(d)
    c = config.logratio_clamp
    return [math.exp(max(-c, min(c, x))) for x in d]


def clip(x, config):
    return min(max(x, 1 - config.epsilon_low), 1 + config.epsilon_high)


def ppo_term(ratio: float, adv: float, config) -> float:
    unclipped = ratio if config.delta is None else min(ratio, config.delta)
    term = min(unclipped * adv, clip(ratio, config) * adv)
    if config.dual_clip is not None and adv < 0:
        term = max(term, config.dual_clip * adv)
    return term


def whole_input(fn):
    """Mark ``fn(news, olds, advs, config) -> row sums`` as a reference of the whole input."""
    fn.whole_input = True
    return fn


def reference_objectives(news, olds, advs, config) -> list[float]:
    """Each row's sum_t of the loss's token terms, from its reference (per row, or of the whole input)."""
    fn = references()[config.loss]
    if getattr(fn, "whole_input", False):
        return fn(news, olds, [list(a) if isinstance(a, (list, tuple)) else [a] * len(n) for n, a in zip(news, advs)], config)
    return [reference_row_objective(n, o, a, config) for n, o, a in zip(news, olds, advs)]


def reference_row_objective(new, old, adv, config, mask=None) -> float:
    """One row's sum_t of the loss's token terms (``adv``: the row's advantage, or a list of
    per-token advantages); masked tokens are left out, means are over counted tokens."""
    adv = list(adv) if isinstance(adv, (list, tuple)) else [adv] * len(new)
    kept = [t for t in range(len(new)) if mask is None or mask[t]]
    return references()[config.loss]([new[t] for t in kept], [old[t] for t in kept], [adv[t] for t in kept], config)


def reference_aggregate(row_sums, n, agg, empty_rows="count", max_length=None) -> float:
    """``agg`` of the rows' sums ``S_i`` over ``n_i`` counted tokens, row by row as its formula
    reads; the means over rows take every row (``count``: an empty row adds 0) or the rows
    with tokens (``skip``). ``luspo-padded``: rows of ``n_i`` unmasked tokens at ratio 1, so
    ``A_i = S_i / n_i`` on each of the ``T = max n_i`` positions of its padded row."""
    rows = [(s, k) for s, k in zip(row_sums, n) if empty_rows == "count" or k > 0]
    total, tokens, width = sum(row_sums), sum(n), max(n, default=0)
    formulas = {
        "token-mean": lambda: total / tokens if tokens else 0.0,
        "token-sum": lambda: total,
        "token-sum-norm": lambda: total / max_length,
        "seq-mean-token-sum": lambda: sum(s for s, _ in rows) / len(rows),
        "seq-mean-token-mean": lambda: sum(s / k if k else 0.0 for s, k in rows) / len(rows),
        "seq-mean-token-sum-norm": lambda: sum(s for s, _ in rows) / (len(rows) * max_length),
        "luspo-padded": lambda: sum(k * (s + (width - k) * s / k) for s, k in rows if k) / (len(rows) * width) if width else 0.0,
    }
    return formulas[agg]() if rows or agg.startswith("token") else 0.0
