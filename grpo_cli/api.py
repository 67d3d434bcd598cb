"""Python API for notebooks and trainers: Twinkle-style advantage callables and seed 000's
group normalisation. Both call the same polars expression as the CLI."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import polars as pl

from .config import AdvantageConfig
from .errors import InputError, UsageError
from .estimators import advantage

TWINKLE_STD = "sample"
TWINKLE_EPS = 1e-8


def advantages(rewards: Sequence[float] | np.ndarray, groups: Sequence[Any] | np.ndarray, config: AdvantageConfig) -> np.ndarray:
    """Advantages (float64) of ``rewards`` grouped by the keys in ``groups`` (any order).

    >>> advantages([0.0, 1.0, 5.0, 5.0], ["a", "a", "b", "b"], AdvantageConfig()).tolist()
    [-1.0, 1.0, 0.0, 0.0]
    """
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 1 or len(groups) != r.shape[0]:
        raise InputError(f"rewards and groups must be 1-d of equal length (found {r.shape} and {len(groups)})")
    if not np.isfinite(r).all():
        raise InputError(f"reward {int(np.flatnonzero(~np.isfinite(r))[0])} is NaN or infinite")
    frame = pl.DataFrame({"group": groups, "reward": r})
    return frame.select(advantage(pl.col("reward"), pl.col("group"), config))["advantage"].to_numpy()


def _to_numpy(rewards) -> tuple[np.ndarray, Any]:
    """Rewards as float64 numpy, and a function giving results back in the caller's type:
    a tensor of the same dtype and device for a torch tensor, numpy otherwise."""
    if type(rewards).__module__.split(".")[0] == "torch":
        import torch

        values = rewards.detach().to("cpu", torch.float64).numpy()
        return values, lambda a: torch.tensor(a, dtype=rewards.dtype, device=rewards.device)
    return np.asarray(rewards, dtype=np.float64), lambda a: a


class _GroupAdvantage:
    """Twinkle's interface: ``adv(rewards, num_generations=4, scale='group')``.

    Consecutive blocks of ``num_generations`` rewards form the groups. 2-d rewards are
    summed over the last axis first (one column per reward function), as in Twinkle.
    The defaults ``std='sample'``, ``eps=1e-8`` reproduce Twinkle's numerics (computed in
    float64 here, not float32).

    Where this differs from Twinkle, on purpose:

    - ``num_generations=1``: every group has one row, so every advantage is 0 (Twinkle's
      GRPO returns the raw rewards for ``'group'`` and ``rewards - mean`` for ``'none'``;
      its RLOO raises).
    - An unknown ``scale`` raises ``ValueError`` listing the valid names (Twinkle silently
      applies no scaling).
    - A group whose rewards are all equal gets exactly 0.
    """

    estimator = "grpo"

    def __call__(self, rewards, num_generations: int = 1, scale: str = "group", *,
                 std: str = TWINKLE_STD, eps: float = TWINKLE_EPS, **_: Any):
        config = AdvantageConfig(estimator=self.estimator, scale=scale, std=std, eps=eps)
        values, restore = _to_numpy(rewards)
        if values.ndim > 1:
            values = values.sum(axis=-1)
        if num_generations < 1 or values.shape[0] % num_generations:
            raise UsageError(
                f"{values.shape[0]} rewards do not split into groups of `num_generations` {num_generations!r}"
            )
        groups = np.arange(values.shape[0]) // num_generations
        return restore(advantages(values, groups, config))


class GRPOAdvantage(_GroupAdvantage):
    """GRPO: ``A = (r - mean_g) / (std_g + eps)`` (``scale='group'``).

    >>> GRPOAdvantage()([0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0], num_generations=4, scale='none').tolist()
    [-0.5, 0.5, -0.5, 0.5, 0.75, -0.25, -0.25, -0.25]
    """

    estimator = "grpo"


class RLOOAdvantage(_GroupAdvantage):
    """RLOO: ``A = r - mean of the other rewards = G / (G - 1) * (r - mean_g)``, then scaled.

    >>> RLOOAdvantage()([0.0, 1.0, 0.0, 1.0], num_generations=4, scale='none').round(4).tolist()
    [-0.6667, 0.6667, -0.6667, 0.6667]
    """

    estimator = "rloo"


def normalize_group(rewards: Sequence[float], decimals: int = 4) -> list[float]:
    """Seed 000: z-scores of one group, ``(r - mean) / std`` with the population std,
    rounded to ``decimals``. A group of equal rewards gives zeros.

    >>> normalize_group([0.2, 0.5, 0.8, 0.3, 0.7])
    [-1.3156, 0.0, 1.3156, -0.8771, 0.8771]
    """
    adv = advantages(rewards, np.zeros(len(rewards), dtype=np.int64), AdvantageConfig(std="population"))
    return np.round(adv, decimals).tolist()
