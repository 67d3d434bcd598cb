"""Aggregations: how the per-token terms of every row become one number.

Each is a function of running totals that merge exactly across batches and workers: the sum
over rows of the row sums ``S_i``, the sum of ``S_i / n_i`` over rows with ``n_i > 0``
counted tokens, the row count, the count of rows with counted tokens, and the token count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Totals:
    """What every aggregation is computed from (see the module docstring)."""

    sum_s: float
    sum_s_per_token: float
    rows: int
    counted_rows: int
    tokens: int
    max_length: int | None = None


@dataclass(frozen=True)
class Aggregation:
    fn: Callable[[Totals], float]
    needs_max_length: bool = False

    @property
    def help(self) -> str:
        return (self.fn.__doc__ or "").strip()


def seq_mean_token_sum(t: Totals) -> float:
    """mean_i sum_t L_it (Dr.GRPO's unbiased objective; the default of the original GRPO notes)"""
    return t.sum_s / t.rows


def seq_mean_token_mean(t: Totals) -> float:
    """mean_i mean_t L_it over rows with counted tokens (original GRPO)"""
    return t.sum_s_per_token / t.counted_rows if t.counted_rows else 0.0


def token_mean(t: Totals) -> float:
    """sum_i sum_t L_it / total counted tokens (DAPO, verl's default)"""
    return t.sum_s / t.tokens if t.tokens else 0.0


def token_sum(t: Totals) -> float:
    """sum_i sum_t L_it"""
    return t.sum_s


def seq_mean_token_sum_norm(t: Totals) -> float:
    """sum_i sum_t L_it / (rows * max_length) (Dr.GRPO, as TRL's dr_grpo)"""
    return t.sum_s / (t.rows * t.max_length)


AGGREGATIONS = {
    "seq-mean-token-sum": Aggregation(seq_mean_token_sum),
    "seq-mean-token-mean": Aggregation(seq_mean_token_mean),
    "token-mean": Aggregation(token_mean),
    "token-sum": Aggregation(token_sum),
    "seq-mean-token-sum-norm": Aggregation(seq_mean_token_sum_norm, needs_max_length=True),
}


# TRL's loss_type names (a generation batch is the whole input here)
ALIASES = {"grpo": "seq-mean-token-mean", "bnpo": "token-mean", "dapo": "token-mean", "dr_grpo": "seq-mean-token-sum-norm"}


def aggregate(agg: str, totals: Totals) -> float:
    """One number from the running totals, as aggregation ``agg`` says.

    >>> aggregate("seq-mean-token-sum", Totals(1.2 - 1.35, 0.6 - 0.675, rows=2, counted_rows=2, tokens=4))
    -0.07500000000000007
    """
    return AGGREGATIONS[agg].fn(totals)
