"""Optimal token baseline (verl 0.9.1's ``optimal_token_baseline`` and
``tir_optimal_token_baseline``, trainer/ppo/core_algos.py:872-1121): a baseline per token
position of each group, the group's returns weighted by each row's path variance so far.

Per valid step t of a row (old log-prob log pi_t, the policy's sum of squared probabilities
Sum pi^2_t over the vocabulary):

.. math:: G_t = \\sum_{k \\ge t} r_k, \\quad w_t = 1 - 2\\pi_t + \\sum \\pi^2_t,
          \\quad W_t = \\sum_{k \\le t} w_k

and per group g and position p, over the rows j of g with a valid step at p:

.. math:: B_{g,p} = \\frac{\\sum_j G_{jp} W_{jp}}{\\sum_j W_{jp} + 10^{-8}}, \\quad A_t = G_t - B_{g,p(t)}

``optimal-token-baseline``: p is the step's entry in its row's list (verl's column);
``tir-optimal-token-baseline``: its number among the row's valid steps (each row's valid
tokens compacted first). The longest row of a group, when no other row is as long, gets
B = 0 from the second-longest row's length on; so does a group's only row (A = G).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from ..errors import present
from .registry import estimator
from .returns import Steps, discounted_sums

EPSILON = 1e-8  # verl's `epsilon`; compute_advantage passes none, nor `handle_zero_tail` (True)
NO_TAIL = np.iinfo(np.int64).max


def path_variance(old_logprobs: np.ndarray, sum_pi_squared: np.ndarray) -> np.ndarray:
    """w_t = 1 - 2 pi_t + sum pi^2_t, pi_t = exp(old log-prob): verl's proxy of the squared
    norm of the token's score function."""
    return 1.0 - 2.0 * np.exp(old_logprobs) + sum_pi_squared


def cumulative(x: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Per step t of each row, the sum of ``x`` over the row's steps up to t: the sums to go of
    the reversed buffer (:func:`~.returns.discounted_sums`), so no row's sum holds another's.

    >>> cumulative(np.array([1.0, 2.0, 3.0, 5.0]), np.array([3, 1])).tolist()
    [1.0, 3.0, 6.0, 5.0]
    """
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return discounted_sums(x[::-1], (len(x) - starts)[::-1], 1.0)[::-1]


def step_numbers(lengths: np.ndarray) -> np.ndarray:
    """Per step, its number among its row's steps (0 first)."""
    return np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def tail_starts(lengths: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Per row, the position from which its baseline is 0: for the longest row of its group
    when no other is as long, the second-longest row's length (0 for a group's only row);
    :data:`NO_TAIL` for every other row.

    >>> tail_starts(np.array([3, 5, 2, 4, 4, 1]), np.array([0, 0, 0, 1, 1, 2])).tolist() == [NO_TAIL, 3, NO_TAIL, NO_TAIL, NO_TAIL, 0]
    True
    """
    order = np.lexsort((lengths, codes))
    c, n = codes[order], lengths[order]
    last = np.flatnonzero(np.append(c[1:] != c[:-1], True))  # each group's longest row, in sorted order
    paired = (last > 0) & (c[np.maximum(last - 1, 0)] == c[last])
    second = np.where(paired, n[np.maximum(last - 1, 0)], 0)
    tail = np.full(len(lengths), NO_TAIL, dtype=np.int64)
    unique = n[last] > second
    tail[order[last[unique]]] = second[unique]
    return tail


@dataclass(frozen=True)
class PositionBaselines:
    """B per (group, position) of the whole input, at ``keys`` = group * ``width`` + position
    (sorted), and each row's :func:`tail_starts`."""

    keys: np.ndarray
    b: np.ndarray
    width: int
    tail: np.ndarray

    def at(self, group: np.ndarray, position: np.ndarray) -> np.ndarray:
        """B at each (group, position) of the input."""
        return self.b[np.searchsorted(self.keys, group * self.width + position)]


@dataclass(frozen=True)
class TokenGroups:
    """Each row's group (``codes``), and once known the input's :class:`PositionBaselines`."""

    codes: np.ndarray
    baselines: PositionBaselines | None = None

    def rows(self, lo: int, hi: int) -> TokenGroups:
        """Rows ``lo`` to ``hi - 1`` (a batch's): their codes and tails."""
        b = self.baselines
        return TokenGroups(self.codes[lo:hi], None if b is None else replace(b, tail=b.tail[lo:hi]))


@dataclass(frozen=True)
class PositionSums:
    """A batch's sums per (``group``, ``position``): ``gw`` = sum of G W and ``w`` = sum of W
    over its steps there, and each row's valid tokens (``lengths``)."""

    group: np.ndarray
    position: np.ndarray
    gw: np.ndarray
    w: np.ndarray
    lengths: np.ndarray


def _positions(steps: Steps, compact: bool) -> np.ndarray:
    return step_numbers(steps.lengths) if compact else present(steps.columns, "each step's entry in its row")


def _returns(steps: Steps) -> np.ndarray:
    """G_t, each step's reward to go."""
    return discounted_sums(steps.rewards, steps.ends, 1.0)


def position_sums(steps: Steps, compact: bool) -> PositionSums:
    """The sums of the batch's steps per (group, position) that B needs."""
    groups = present(steps.groups, "each row's group")
    g, p = np.repeat(groups.codes, steps.lengths), _positions(steps, compact)
    big_w = cumulative(present(steps.w, "each step's path variance"), steps.lengths)
    width = int(p.max(initial=0)) + 1
    keys, inverse = np.unique(g * width + p, return_inverse=True)
    return PositionSums(keys // width, keys % width, np.bincount(inverse, _returns(steps) * big_w), np.bincount(inverse, big_w), steps.lengths)


def position_baselines(parts: list[PositionSums], codes: np.ndarray) -> PositionBaselines:
    """B per (group, position) from every batch's sums (in row order; ``codes``: every row's group)."""
    group, position = np.concatenate([s.group for s in parts]), np.concatenate([s.position for s in parts])
    width = int(position.max(initial=0)) + 1
    keys, inverse = np.unique(group * width + position, return_inverse=True)
    gw = np.bincount(inverse, np.concatenate([s.gw for s in parts]), minlength=len(keys))
    w = np.bincount(inverse, np.concatenate([s.w for s in parts]), minlength=len(keys))
    return PositionBaselines(keys, gw / (w + EPSILON), width, tail_starts(np.concatenate([s.lengths for s in parts]), codes))


def baselined(steps: Steps, compact: bool) -> tuple[np.ndarray, np.ndarray]:
    """A_t = G_t - B (0 in the row's tail), and the returns G_t."""
    groups = present(steps.groups, "each row's group")
    b = present(groups.baselines, "the input's position baselines")
    p = _positions(steps, compact)
    baseline = b.at(np.repeat(groups.codes, steps.lengths), p)
    baseline[p >= np.repeat(b.tail, steps.lengths)] = 0.0
    g = _returns(steps)
    return g - baseline, g


OTB = {"level": "token", "needs": ("old", "sum_pi_squared"), "params": (), "scales": ("none",), "default_scale": "none"}


@estimator("optimal-token-baseline", sums=partial(position_sums, compact=False), **OTB)
def optimal_token_baseline(steps: Steps, gamma: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """G_t - a baseline per token position of the group, weighted by path variance (verl's optimal_token_baseline).

    .. math:: A_t = G_t - \\frac{\\sum_j G_{jt} W_{jt}}{\\sum_j W_{jt} + 10^{-8}}, \\quad W_t = \\sum_{k \\le t} (1 - 2\\pi_k + \\sum \\pi^2_k)

    t: the token's entry in its row's list; the sum over the group's rows with a valid token
    there. Reads old log-probs and a per-token sum of pi^2 column.
    """
    return baselined(steps, compact=False)


@estimator("tir-optimal-token-baseline", sums=partial(position_sums, compact=True), **OTB)
def tir_optimal_token_baseline(steps: Steps, gamma: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """optimal-token-baseline over each row's valid tokens compacted, for multi-turn rows (verl's tir_optimal_token_baseline).

    .. math:: A_t = G_t - \\frac{\\sum_j G_{jt} W_{jt}}{\\sum_j W_{jt} + 10^{-8}}

    t: the token's number among its row's valid tokens, so masked turns between them shift
    no position.
    """
    return baselined(steps, compact=True)
