"""Token-level estimators: per-token returns and advantages over each row's valid tokens.

A row's valid tokens are its steps t = 0 .. L-1 (masked tokens are skipped: a step's "next"
is the next valid token, as verl carries returns and values through masked positions). Each
step has a reward: the row's reward on its last step, minus ``kl_in_reward * KL_t`` at every
step when asked. Discounted sums run on the flat buffer of all rows at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from .registry import estimator
from ..errors import present

if TYPE_CHECKING:
    from .optimal_token_baseline import TokenGroups


@dataclass(frozen=True)
class Steps:
    """Rows of steps: ``lengths[i]`` valid tokens of row i; flat per-step ``rewards`` and,
    for GAE, ``values`` (float64); for the optimal token baseline, per step ``w`` (1 - 2 pi +
    sum pi^2) and ``columns`` (its entry in its row's list), and the rows' ``groups``."""

    lengths: np.ndarray
    rewards: np.ndarray
    values: np.ndarray | None = None
    runs_end: np.ndarray | None = None  # per step, where its sequence ends, when a row holds several (`masked_steps` 'restart')
    w: np.ndarray | None = None
    columns: np.ndarray | None = None
    groups: TokenGroups | None = None

    @cached_property
    def ends(self) -> np.ndarray:
        """Per step: the flat position just past its row's last step (or its run's)."""
        return self.runs_end if self.runs_end is not None else np.repeat(np.cumsum(self.lengths), self.lengths)


def discounted_sums(x: np.ndarray, ends: np.ndarray, factor: float) -> np.ndarray:
    """Per step t of a row ending at ``ends[t]``: the discounted sum of what follows,

    .. math:: G_t = \\sum_{k=t}^{\\mathrm{end}-1} \\mathrm{factor}^{k-t} x_k

    by doubling (Hillis-Steele): after the pass with offset d, G_t sums ``x`` over
    ``[t, t + 2d)`` within the row. log2(longest row) vector passes; each step's sum depends
    only on its row, never on the other rows of the buffer.

    >>> discounted_sums(np.array([1.0, 1.0, 1.0, 5.0]), np.array([3, 3, 3, 4]), 0.5).tolist()
    [1.75, 1.5, 1.0, 5.0]
    """
    g = np.array(x, dtype=np.float64)
    t = np.arange(len(g))
    d, f = 1, float(factor)
    while d < len(g):
        inside = t[: len(g) - d] + d < ends[: len(g) - d]
        if not inside.any():
            break
        g[: len(g) - d] += np.where(inside, f * g[d:], 0.0)  # the right side is evaluated before the add
        d, f = 2 * d, f * f
    return g


@estimator("reinforce", level="token", params=("gamma",), scales=("none",), default_scale="none", scope="file", grouped=False, whitens="tokens")
def reinforce(steps: Steps, gamma: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-token discounted returns, whitened over all valid tokens (REINFORCE++).

    .. math:: G_t = r_t + \\gamma G_{t+1}, \\quad A_t = (G_t - \\mu) / s

    r_t: the row's reward on its last valid token (minus the KL penalty per token with
    ``kl_in_reward``); mu, s over every valid token of the input.
    """
    g = discounted_sums(steps.rewards, steps.ends, gamma)
    return g, g


@estimator(
    "gae",
    level="token",
    needs=("values",),
    params=("gamma", "lam"),
    scales=("none",),
    default_scale="none",
    scope="file",
    grouped=False,
    whitens="tokens",
)
def gae(steps: Steps, gamma: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Generalized advantage estimation from per-token values, whitened (PPO's GAE).

    .. math:: \\delta_t = r_t + \\gamma V_{t+1} - V_t, \\quad A_t = \\delta_t + \\gamma\\lambda A_{t+1},
              \\quad R_t = A_t + V_t

    V after the last valid token is 0. The returns R are taken before the whitening.
    """
    v = present(steps.values, "GAE's values")
    following = np.zeros_like(v)  # V_{t+1}
    following[:-1] = v[1:]
    following[np.arange(1, len(v) + 1) == steps.ends] = 0.0  # after a row's last step
    a = discounted_sums(steps.rewards + gamma * following - v, steps.ends, gamma * lam)
    return a, a + v
