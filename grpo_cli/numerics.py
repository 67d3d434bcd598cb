"""Values near the ends of float64's range: statistics in power-of-two units, rounding to
decimals, and the integers float64 holds exactly.

Sums and squares of values beyond about 2^500 overflow, and squares of values below about
2^-500 underflow. Advantages and summary figures scale with the values (multiply every reward
by c and baselines, stds and figures are multiplied by c), so such values are divided by a
power of two ``U`` first, which is exact, and the results scaled back. Values within range
get ``U = 1``: their numbers do not change by a bit.
"""

from __future__ import annotations

import numpy as np

SAFE_EXPONENT = 500  # |x| in [2^-500, 2^500]: squares and sums of up to 2^20 of them stay normal
ROUND_DIGITS_MAX = 308  # 10^308 is the largest power of ten float64 holds
EXACT_INTEGERS = 2**53  # every integer up to it in magnitude is a float64 (an int: int64 compares with it exactly)
LOGRATIO_CLAMP_MAX = 709.0  # the largest log-ratio clamp: exp of a larger log-ratio is beyond float64 (its largest value is e^709.78)


def units(peak: np.ndarray) -> np.ndarray:
    """For each ``peak`` (a largest magnitude, >= 0): a power of two ``U`` with ``peak / U`` in
    [1, 2) if ``peak`` is finite, nonzero and outside [2^-500, 2^500]; else 1.0.

    >>> units(np.array([1e308, 3.0, 0.0])).tolist() == [2.0 ** 1023, 1.0, 1.0]
    True
    """
    outside = np.isfinite(peak) & (peak > 0) & ((peak > 2.0**SAFE_EXPONENT) | (peak < 2.0**-SAFE_EXPONENT))
    if not outside.any():  # the usual case: no exponent to take
        return np.ones(np.shape(peak))
    return np.where(outside, np.ldexp(1.0, np.frexp(peak)[1] - 1), 1.0)


def round_decimals(x: np.ndarray, digits: int) -> np.ndarray:
    """``x`` rounded to ``digits`` decimals (0 to :data:`ROUND_DIGITS_MAX`), half to even as
    :func:`numpy.round`. A value whose ``|x| * 10^digits`` reaches 2^53 is kept: float64 holds
    no digit of it beyond the ``digits``-th decimal (and the product may overflow).

    >>> round_decimals(np.array([0.12346, 1e306, -2.5]), 4).tolist() == [0.1235, 1e306, -2.5]
    True
    """
    scale = 10.0**digits
    with np.errstate(over="ignore"):
        scaled = x * scale
    return np.where(np.abs(scaled) < EXACT_INTEGERS, np.rint(scaled) / scale, x)


def inexact_integers(values: np.ndarray) -> np.ndarray:
    """Which of ``values`` (an integer array) float64 would round: those beyond 2^53 in
    magnitude (not every integer there is a float64; refusing them all is the one rule).

    >>> inexact_integers(np.array([2**53, 2**53 + 1, -(2**60)])).tolist()
    [False, True, True]
    """
    beyond = values > EXACT_INTEGERS
    return beyond | (values < -EXACT_INTEGERS) if values.dtype.kind == "i" else beyond


def unit(x: np.ndarray) -> float:
    """The unit (see :func:`units`) of ``max |x|``; 1.0 for empty ``x``."""
    return float(units(np.array([max(float(np.max(x)), -float(np.min(x)))]))[0]) if x.size else 1.0
