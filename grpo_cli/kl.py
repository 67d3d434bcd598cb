"""Per-token KL estimators of http://joschu.net/blog/kl-approx.html, with d = log p - log q."""

from __future__ import annotations

import numpy as np

FAST_K3_MIN = -10.0  # below it, rho = 1 + expm1(d) has lost digits to the 1 (under 12 left; none below d = -37)


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


def k3_with_ratio(d: np.ndarray, ratio_minus_one: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """k3 of ``d`` when rho = exp(d) is at hand (``ratio_minus_one``, from ``expm1``, and
    ``ratio``): k3 = exp(-d) + d - 1 = d - (rho - 1) / rho, one division; :func:`k3` where
    ``d`` < :data:`FAST_K3_MIN`, where ``ratio`` has lost its digits."""
    with np.errstate(divide="ignore"):  # ratio 0 below d = -37: those are recomputed
        out = d - ratio_minus_one / ratio
    if d.size and d.min() < FAST_K3_MIN:
        far = d < FAST_K3_MIN
        out[far] = k3(d[far])
    return out


def absolute(d: np.ndarray) -> np.ndarray:
    """abs = |d|."""
    return np.abs(d)


KL_ESTIMATORS = {"k1": k1, "k2": k2, "k3": k3, "abs": absolute}
