"""Groups of one row: what their advantage is. They have no baseline of their own, and the
frameworks disagree (see the docs' presets page)."""

from __future__ import annotations

import numpy as np


def zero(r: np.ndarray, scale: str, eps: float) -> np.ndarray:
    """A = 0: no signal without a second sample (TRL; this tool's default)."""
    return np.zeros_like(r)


def reward(r: np.ndarray, scale: str, eps: float) -> np.ndarray:
    """A = r, unscaled (ModelScope Twinkle's 'group' scale)."""
    return r


def unit_std(r: np.ndarray, scale: str, eps: float) -> np.ndarray:
    """Mean 0 and std 1: A = r / (1 + eps) when scaled per group, A = r unscaled (verl)."""
    return r / (1.0 + eps) if scale == "group" else r


SINGLETONS = {"zero": zero, "reward": reward, "unit-std": unit_std}
