"""Groups of one row: what their advantage is. They have no baseline of their own, and the
frameworks disagree (see the docs' presets page). Each rule takes the rewards of the rows
alone, every row's groups (the input), the resolved config (its scale, ddof, eps) and the
estimator's gain (:attr:`~.registry.Estimator.gain`)."""

from __future__ import annotations

import numpy as np

from ..errors import RowError
from .groups import Groups
from .scale import SCALE_DIVISORS


def zero(r: np.ndarray, groups: Groups, config, gain: float) -> np.ndarray:
    """A = 0: no signal without a second sample (TRL; this tool's default)."""
    return np.zeros_like(r)


def reward(r: np.ndarray, groups: Groups, config, gain: float) -> np.ndarray:
    """A = r, unscaled (ModelScope Twinkle's 'group' scale)."""
    return r


def unit_std(r: np.ndarray, groups: Groups, config, gain: float) -> np.ndarray:
    """Mean 0 and std 1: A = r / (1 + eps) when scaled per group, A = r unscaled, times the estimator's gain (gpg: alpha r) (verl)."""
    return gain * (r / (1.0 + config.eps) if config.scale == "group" else r)


def batch(r: np.ndarray, groups: Groups, config, gain: float) -> np.ndarray:
    """The batch as baseline: A = r - mean of every reward, / (std of every reward + eps) under scale batch; A = r under scale group (ModelScope Twinkle's num_generations 1)."""
    # twinkle-kit 0.5.1 advantage/grpo.py:48-55: 'batch' (r - mean) / (std + 1e-8), a std of 1 for
    # a batch of one; 'none' r - mean; 'group' r
    if config.scale == "group":
        return r
    centered = r - np.mean(groups.r)
    if config.scale == "none":
        return centered
    s = SCALE_DIVISORS["batch"](groups, config.ddof, config.eps) if len(groups.r) > 1 else 1.0 + config.eps
    return centered / s


def error(r: np.ndarray, groups: Groups, config, gain: float) -> np.ndarray:
    """Refuse a group of one row (verl's grpo_passk, Twinkle's RLOO)."""
    raise RowError(0, "its group has one row (`singleton` 'error', as verl's grpo_passk); group two or more rows, or pass another `singleton`")


SINGLETONS = {"zero": zero, "reward": reward, "unit-std": unit_std, "batch": batch, "error": error}
