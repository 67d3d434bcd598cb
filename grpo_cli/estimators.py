"""Advantage estimators on rewards grouped by key.

polars finds the groups: each row gets a dense group number (:class:`GroupIndex`), found
from runs of equal keys when every group's rows are contiguous (the common layout, checked
cheaply), else by a hash group-by. Sums over a group are ``np.bincount`` in row order.
polars' own float sums are not used because they can differ by an ulp from run to run
(their summation order depends on memory alignment and hashing), and results here must
depend on the values alone.

A group of one row, or a group whose rewards are all equal, carries no learning signal:
its advantage is exactly 0 for every estimator (never NaN, and never the noise that
``r - mean`` leaves when the mean of equal floats is not exact).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl

from .config import AdvantageConfig


@dataclass(frozen=True)
class GroupIndex:
    """Rows grouped by key: ``codes[i]`` is row i's group (0, 1, ... in order of first
    appearance) and ``first[k]`` the row where group k first appears."""

    codes: np.ndarray
    first: np.ndarray

    @classmethod
    def whole(cls, rows: int) -> "GroupIndex":
        """All ``rows`` rows as one group."""
        return cls(np.zeros(rows, dtype=np.int64), np.zeros(1, dtype=np.int64))

    @property
    def count(self) -> int:
        """Number of groups."""
        return len(self.first)

    @cached_property
    def sizes(self) -> np.ndarray:
        """Rows in each group."""
        return np.bincount(self.codes, minlength=self.count)


def group_index(keys: pl.Series) -> GroupIndex:
    """The :class:`GroupIndex` of ``keys`` (any hashable dtype; rows of a group need not be
    contiguous).

    >>> g = group_index(pl.Series(["a", "b", "a"])); g.codes.tolist(), g.first.tolist()
    ([0, 1, 0], [0, 1])
    """
    run_start = (keys != keys.shift(1)).fill_null(True).to_numpy()
    first = np.flatnonzero(run_start)
    if keys.gather(first).n_unique() == len(first):  # each key is one run: contiguous groups
        codes = np.zeros(len(keys), dtype=np.int64)
        codes[first[1:]] = 1
        return GroupIndex(np.cumsum(codes, out=codes), first)
    frame = pl.DataFrame({"key": keys}).with_row_index("row")
    first_row = frame.select(pl.col("row").first().over("key").cast(pl.Int64))["row"].to_numpy()
    is_first = first_row == np.arange(len(first_row))
    return GroupIndex((np.cumsum(is_first) - 1)[first_row], np.flatnonzero(is_first))


def group_sum(values: np.ndarray, g: GroupIndex) -> np.ndarray:
    """Per group: the float64 sum of ``values`` over its rows, added in row order."""
    return np.bincount(g.codes, weights=values, minlength=g.count)


def per_row(group_values: np.ndarray, g: GroupIndex) -> np.ndarray:
    """Each row gets its group's value."""
    return np.take(group_values, g.codes)


def centered(r: np.ndarray, g: GroupIndex) -> np.ndarray:
    """GRPO baseline: ``r - mean_g(r)``."""
    return r - per_row(group_sum(r, g) / g.sizes, g)


def leave_one_out(c: np.ndarray, g: GroupIndex) -> np.ndarray:
    """RLOO baseline from the centered rewards ``c`` (:func:`centered`): ``r - mean of the
    other rewards = G / (G - 1) * (r - mean_g(r))`` (inf for groups of one;
    :func:`informative_groups` zeroes them)."""
    n = g.sizes.astype(np.float64)
    return per_row(n / (n - 1.0), g) * c


def informative_groups(r: np.ndarray, g: GroupIndex) -> np.ndarray:
    """Per group: True where it has at least two distinct rewards (an exact comparison with
    the reward of the group's first row)."""
    differs = r != per_row(r[g.first], g)
    return np.bincount(g.codes[differs], minlength=g.count) > 0


def scale_divisor(r: np.ndarray, c: np.ndarray, g: GroupIndex, config: AdvantageConfig) -> np.ndarray | float:
    """``std + eps`` of the group (``group``), of all rewards (``batch``), or 1 (``none``);
    std with ``config.ddof`` (0: population, 1: sample). ``c`` is :func:`centered` ``(r, g)``."""
    if config.scale == "group":
        return per_row(np.sqrt(group_sum(c * c, g) / (g.sizes - config.ddof)) + config.eps, g)
    if config.scale == "batch":
        everything = GroupIndex.whole(len(r))
        c = centered(r, everything)
        return float(np.sqrt(group_sum(c * c, everything)[0] / (len(r) - config.ddof))) + config.eps
    return 1.0


def advantage(r: np.ndarray, g: GroupIndex, config: AdvantageConfig, informative: np.ndarray | None = None) -> np.ndarray:
    """The advantage of each row.

    .. math:: A_i = (r_i - b_i) / s

    with baseline ``b`` from the estimator and divisor ``s`` from :func:`scale_divisor`;
    0 in groups that are not ``informative`` (:func:`informative_groups`, computed if not given).

    >>> advantage(np.array([0.0, 1.0, 0.0, 1.0]), group_index(pl.Series([7, 7, 7, 7])), AdvantageConfig()).tolist()
    [-1.0, 1.0, -1.0, 1.0]
    """
    keep = per_row(informative_groups(r, g) if informative is None else informative, g)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = centered(r, g)
        baseline_removed = leave_one_out(c, g) if config.estimator == "rloo" else c
        a = baseline_removed / scale_divisor(r, c, g, config)
    # a spread so small that the std underflows to 0 (subnormal rewards) is no signal either
    return np.where(keep & np.isfinite(a), a, 0.0)
