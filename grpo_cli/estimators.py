"""Advantage estimators on rewards grouped by key.

polars finds the groups (a hash group-by gives each row the index of its group's first
row); sums over a group are ``np.bincount`` in row order. polars' own float sums are not
used because they can differ by an ulp from run to run (their summation order depends on
memory alignment and hashing), and results here must depend on the values alone.

A group of one row, or a group whose rewards are all equal, carries no learning signal:
its advantage is exactly 0 for every estimator (never NaN, and never the noise that
``r - mean`` leaves when the mean of equal floats is not exact).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from .config import AdvantageConfig


def group_index(keys: pl.Series) -> np.ndarray:
    """Each row's group, as the row index of the group's first row (int64).

    >>> group_index(pl.Series(["a", "b", "a"])).tolist()
    [0, 1, 0]
    """
    frame = pl.DataFrame({"key": keys}).with_row_index("row")
    return frame.select(pl.col("row").first().over("key").cast(pl.Int64))["row"].to_numpy()


def group_sum(values: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Each row gets the float64 sum of ``values`` over its group, added in row order."""
    return np.bincount(g, weights=values, minlength=len(g))[g]


def group_size(g: np.ndarray) -> np.ndarray:
    """Each row gets the number of rows in its group."""
    return np.bincount(g, minlength=len(g))[g]


def centered(r: np.ndarray, g: np.ndarray) -> np.ndarray:
    """GRPO baseline: ``r - mean_g(r)``."""
    return r - group_sum(r, g) / group_size(g)


def leave_one_out(c: np.ndarray, g: np.ndarray) -> np.ndarray:
    """RLOO baseline from the centered rewards ``c`` (:func:`centered`): ``r - mean of the
    other rewards = G / (G - 1) * (r - mean_g(r))`` (inf for groups of one; :func:`informative`
    zeroes them)."""
    n = group_size(g).astype(np.float64)
    return n / (n - 1.0) * c


def informative(r: np.ndarray, g: np.ndarray) -> np.ndarray:
    """True where the row's group has at least two distinct rewards (``g`` indexes the
    group's first row, so ``r[g]`` is that row's reward: an exact comparison)."""
    return group_sum((r != r[g]).astype(np.float64), g) > 0


def scale_divisor(r: np.ndarray, c: np.ndarray, g: np.ndarray, config: AdvantageConfig) -> np.ndarray | float:
    """``std + eps`` of the group (``group``), of all rewards (``batch``), or 1 (``none``);
    std with ``config.ddof`` (0: population, 1: sample). ``c`` is :func:`centered` ``(r, g)``."""
    if config.scale == "group":
        return np.sqrt(group_sum(c * c, g) / (group_size(g) - config.ddof)) + config.eps
    if config.scale == "batch":
        everything = np.zeros(len(r), dtype=np.int64)
        c = centered(r, everything)
        return float(np.sqrt(group_sum(c * c, everything)[0] / (len(r) - config.ddof))) + config.eps
    return 1.0


def advantage(r: np.ndarray, g: np.ndarray, config: AdvantageConfig) -> np.ndarray:
    """The advantage of each row.

    .. math:: A_i = (r_i - b_i) / s

    with baseline ``b`` from the estimator and divisor ``s`` from :func:`scale_divisor`.

    >>> advantage(np.array([0.0, 1.0, 0.0, 1.0]), np.zeros(4, dtype=np.int64), AdvantageConfig()).tolist()
    [-1.0, 1.0, -1.0, 1.0]
    """
    keep = informative(r, g)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = centered(r, g)
        baseline_removed = leave_one_out(c, g) if config.estimator == "rloo" else c
        a = baseline_removed / scale_divisor(r, c, g, config)
    # a spread so small that the std underflows to 0 (subnormal rewards) is no signal either
    return np.where(keep & np.isfinite(a), a, 0.0)
