"""Per-token KL estimators of http://joschu.net/blog/kl-approx.html, with d = log p - log q."""

from __future__ import annotations

import numpy as np


def k1(d: np.ndarray) -> np.ndarray:
    """k1 = d (unbiased, high variance)."""
    return d


def k2(d: np.ndarray) -> np.ndarray:
    """k2 = d^2 / 2."""
    with np.errstate(over="ignore"):  # inf beyond float64
        return 0.5 * d * d


def k3(d: np.ndarray) -> np.ndarray:
    """k3 = exp(-d) + d - 1 (unbiased, non-negative; inf where exp(-d) is beyond float64)."""
    with np.errstate(over="ignore"):
        return np.expm1(-d) + d


def absolute(d: np.ndarray) -> np.ndarray:
    """abs = |d|."""
    return np.abs(d)


KL_ESTIMATORS = {"k1": k1, "k2": k2, "k3": k3, "abs": absolute}
