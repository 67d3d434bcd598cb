"""Aggregations: how the per-token terms of every row become one number.

Each is a function of running totals that merge exactly across batches and workers: the sum
over rows of the row sums ``S_i``, the sum of ``S_i / n_i`` over rows with ``n_i > 0``
counted tokens, the row count, the count of rows with counted tokens, and the token count.

A row with no counted tokens (fully masked, or emptied by sequence-level rejection) has
``S_i = 0``. An aggregation that averages over rows divides by ``B``, the rows that count:
every row (``empty_rows`` ``count``, the default: an empty row adds 0 to the mean, as verl
0.9.1's trainer divides by the whole mini-batch in every mode, TRL's grpo/sapo/dr_grpo and
twinkle-kit 0.5.1 count them) or the rows with counted tokens (``skip``: verl 0.7.0's actor
on one micro-batch, OpenRLHF 0.11.2's seq-mean-token-mean). ``refuse``: such a row with a
per-row advantage is refused, whatever the aggregation (twinkle-kit 0.1 raises there); with
per-token advantages it counts as 0, as ``count``. Split into micro-batches, each
has totals of its own, which :mod:`grpo_cli.objective.micro` combines as a framework does.

``luspo-padded`` is TRL 1.9.0's token-level luspo (trainer/grpo_trainer.py:3143-3146,
``(per_token_loss * mask.sum(1, keepdim=True)).mean()``): the mean over the ``B x T`` padded
block of ``n_i L_it``, ``T`` the longest row of the input (TRL pads the generation batch to its
longest completion), each position weighted by its row's count ``n_i`` and, the per-token loss
not being masked, the positions without a counted token included. A file holds no values
there: they are taken at ratio 1, where TRL's clipped term is ``A_i`` (as it is with TRL's
defaults, which compute no old log-probs: ``num_iterations`` 1), and 0 under the high-entropy
mask (TRL ands it with the mask), so

.. math:: \\frac{1}{B T} \\sum_i n_i \\Big(\\sum_t L_{it} + (T - n_i) A_i\\Big)

needs the totals ``sum_i n_i S_i + T sum_i n_i A_i - sum_i n_i^2 A_i`` (``sum_padded``) and ``T``
(``width``). 1.16.0 aggregates luspo as ``seq-mean-token-sum``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import present

EMPTY_ROWS = ("count", "skip")  # the means over rows; `empty_rows` also takes "refuse" (objective/config.py)


@dataclass(frozen=True)
class Totals:
    """What every aggregation is computed from (see the module docstring)."""

    sum_s: float
    sum_s_per_token: float
    rows: int
    counted_rows: int
    tokens: int
    max_length: int | None = None
    sum_padded: float = 0.0
    width: int = 0

    def batch_rows(self, empty_rows: str) -> int:
        """``B``, the rows a mean over rows divides by: every row (``count``, ``refuse``) or
        those with counted tokens (``skip``)."""
        return self.counted_rows if empty_rows == "skip" else self.rows


@dataclass(frozen=True)
class Aggregation:
    """``fn(totals, B)``; ``over_rows``: it averages over the ``B`` rows (so ``empty_rows``
    applies); ``needs_max_length``: it divides by the constant ``max_length``; ``padded``: it
    reads ``sum_padded`` and ``width``."""

    fn: Callable[[Totals, int], float]
    over_rows: bool = False
    needs_max_length: bool = False
    padded: bool = False

    @property
    def help(self) -> str:
        return (self.fn.__doc__ or "").strip()


def seq_mean_token_sum(t: Totals, b: int) -> float:
    """sum_i sum_t L_it / B (Dr.GRPO's unbiased objective; TRL 1.16's luspo)"""
    return t.sum_s / b if b else 0.0


def seq_mean_token_mean(t: Totals, b: int) -> float:
    """sum_i mean_t L_it / B (original GRPO; TRL's grpo and sapo)"""
    return t.sum_s_per_token / b if b else 0.0


def token_mean(t: Totals, b: int) -> float:
    """sum_i sum_t L_it / total counted tokens (DAPO, verl's default)"""
    return t.sum_s / t.tokens if t.tokens else 0.0


def token_sum(t: Totals, b: int) -> float:
    """sum_i sum_t L_it (verl 0.9.1, core_algos.py agg_loss)"""
    return t.sum_s


def seq_mean_token_sum_norm(t: Totals, b: int) -> float:
    """sum_i sum_t L_it / (B * max_length) (Dr.GRPO, as TRL's dr_grpo and verl 0.9.1)"""
    return t.sum_s / (b * present(t.max_length, "max_length")) if b else 0.0


def token_sum_norm(t: Totals, b: int) -> float:
    """sum_i sum_t L_it / max_length, no rows (verl 0.7.0's seq-mean-token-sum-norm, core_algos.py:819-823)"""
    return t.sum_s / present(t.max_length, "max_length")


def luspo_padded(t: Totals, b: int) -> float:
    """sum_i n_i (sum_t L_it + (T - n_i) A_i) / (B * T), T the longest row: the rows x T padded block, each
    position times its row's n_i, a position without a counted token at ratio 1 (TRL 1.9.0's token-level luspo)"""
    return t.sum_padded / (b * t.width) if b and t.width else 0.0


AGGREGATIONS = {
    "seq-mean-token-sum": Aggregation(seq_mean_token_sum, over_rows=True),
    "seq-mean-token-mean": Aggregation(seq_mean_token_mean, over_rows=True),
    "token-mean": Aggregation(token_mean),
    "token-sum": Aggregation(token_sum),
    "seq-mean-token-sum-norm": Aggregation(seq_mean_token_sum_norm, over_rows=True, needs_max_length=True),
    "token-sum-norm": Aggregation(token_sum_norm, needs_max_length=True),
    "luspo-padded": Aggregation(luspo_padded, over_rows=True, padded=True),
}


# TRL's loss_type names whose loss is the clipped ratio (a generation batch is the whole input
# here); luspo as TRL 1.16 aggregates it (1.9's token level: luspo-padded, presets.Preset.aliases)
ALIASES = {
    "grpo": "seq-mean-token-mean",
    "bnpo": "token-mean",
    "dapo": "token-mean",
    "dr_grpo": "seq-mean-token-sum-norm",
    "luspo": "seq-mean-token-sum",
}


def aggregate(agg: str, totals: Totals, empty_rows: str = "count") -> float:
    """One number from the running totals, as aggregation ``agg`` says, a mean over rows
    counting or skipping the rows without counted tokens as ``empty_rows`` says.

    >>> aggregate("seq-mean-token-sum", Totals(1.2 - 1.35, 0.6 - 0.675, rows=2, counted_rows=2, tokens=4))
    -0.07500000000000007
    >>> [aggregate("seq-mean-token-mean", Totals(3.0, 1.5, rows=3, counted_rows=2, tokens=4), rule) for rule in EMPTY_ROWS]
    [0.5, 0.75]
    """
    return AGGREGATIONS[agg].fn(totals, totals.batch_rows(empty_rows))
