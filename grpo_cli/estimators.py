"""Advantage estimators as composable polars expressions.

Every function takes the reward expression ``r`` and the group key ``g`` and returns an
expression evaluated per row, so a whole file is one vectorized ``select``.

A group of one row, or a group whose rewards are all equal, carries no learning signal:
its advantage is exactly 0 for every estimator (never NaN, and never the noise that
``r - mean`` leaves when the mean of equal floats is not exact).
"""

from __future__ import annotations

import polars as pl

from .config import AdvantageConfig


def centered(r: pl.Expr, g: pl.Expr) -> pl.Expr:
    """GRPO baseline: ``r - mean_g(r)``."""
    return r - r.mean().over(g)


def leave_one_out(r: pl.Expr, g: pl.Expr) -> pl.Expr:
    """RLOO baseline: ``r - mean of the other rewards = G / (G - 1) * (r - mean_g(r))``."""
    n = pl.len().over(g).cast(pl.Float64)
    return n / (n - 1.0) * centered(r, g)


def informative(r: pl.Expr, g: pl.Expr) -> pl.Expr:
    """True where the row's group has at least two distinct rewards."""
    return r.max().over(g) > r.min().over(g)


def scale_divisor(r: pl.Expr, g: pl.Expr, config: AdvantageConfig) -> pl.Expr:
    """``std + eps`` of the group (``group``), of all rewards (``batch``), or 1 (``none``)."""
    if config.scale == "group":
        return r.std(ddof=config.ddof).over(g) + config.eps
    if config.scale == "batch":
        return r.std(ddof=config.ddof) + config.eps
    return pl.lit(1.0)


def advantage(r: pl.Expr, g: pl.Expr, config: AdvantageConfig) -> pl.Expr:
    """The advantage of each row.

    .. math:: A_i = (r_i - b_i) / s

    with baseline ``b`` from the estimator and divisor ``s`` from :func:`scale_divisor`.

    >>> df = pl.DataFrame({"g": [0, 0, 0, 0], "r": [0.0, 1.0, 0.0, 1.0]})
    >>> df.select(advantage(pl.col("r"), pl.col("g"), AdvantageConfig()))["advantage"].to_list()
    [-1.0, 1.0, -1.0, 1.0]
    """
    baseline_removed = leave_one_out(r, g) if config.estimator == "rloo" else centered(r, g)
    a = baseline_removed / scale_divisor(r, g, config)
    return pl.when(informative(r, g)).then(a).otherwise(0.0).alias("advantage")
