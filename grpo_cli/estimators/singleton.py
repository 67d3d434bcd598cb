"""Groups of one row: what their advantage is. They have no baseline of their own, and the
frameworks disagree (see the docs' presets page). Each rule takes the rewards of the rows
alone, the scale, eps and the estimator's gain (:attr:`~.registry.Estimator.gain`)."""

from __future__ import annotations

import numpy as np

from ..errors import RowError


def zero(r: np.ndarray, scale: str, eps: float, gain: float) -> np.ndarray:
    """A = 0: no signal without a second sample (TRL; this tool's default)."""
    return np.zeros_like(r)


def reward(r: np.ndarray, scale: str, eps: float, gain: float) -> np.ndarray:
    """A = r, unscaled (ModelScope Twinkle's 'group' scale)."""
    return r


def unit_std(r: np.ndarray, scale: str, eps: float, gain: float) -> np.ndarray:
    """Mean 0 and std 1: A = r / (1 + eps) when scaled per group, A = r unscaled, times the estimator's gain (gpg: alpha r) (verl)."""
    return gain * (r / (1.0 + eps) if scale == "group" else r)


def error(r: np.ndarray, scale: str, eps: float, gain: float) -> np.ndarray:
    """Refuse a group of one row (verl's grpo_passk)."""
    raise RowError(0, "its group has one row (`singleton` 'error', as verl's grpo_passk); group two or more rows, or pass another `singleton`")


SINGLETONS = {"zero": zero, "reward": reward, "unit-std": unit_std, "error": error}
