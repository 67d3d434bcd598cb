"""Statistics of values near the ends of float64's range.

Sums and squares of values beyond about 2^500 overflow, and squares of values below about
2^-500 underflow. Advantages and summary figures scale with the values (multiply every reward
by c and baselines, stds and figures are multiplied by c), so such values are divided by a
power of two ``U`` first, which is exact, and the results scaled back. Values within range
get ``U = 1``: their numbers do not change by a bit.
"""

from __future__ import annotations

import numpy as np

SAFE_EXPONENT = 500  # |x| in [2^-500, 2^500]: squares and sums of up to 2^20 of them stay normal


def units(peak: np.ndarray) -> np.ndarray:
    """For each ``peak`` (a largest magnitude, >= 0): a power of two ``U`` with ``peak / U`` in
    [1, 2) if ``peak`` is finite, nonzero and outside [2^-500, 2^500]; else 1.0.

    >>> units(np.array([1e308, 3.0, 0.0])).tolist() == [2.0 ** 1023, 1.0, 1.0]
    True
    """
    outside = np.isfinite(peak) & (peak > 0) & ((peak > 2.0**SAFE_EXPONENT) | (peak < 2.0**-SAFE_EXPONENT))
    return np.where(outside, np.ldexp(1.0, np.frexp(peak)[1] - 1), 1.0)


def unit(x: np.ndarray) -> float:
    """The unit (see :func:`units`) of ``max |x|``; 1.0 for empty ``x``."""
    return float(units(np.array([max(float(np.max(x)), -float(np.min(x)))]))[0]) if x.size else 1.0
