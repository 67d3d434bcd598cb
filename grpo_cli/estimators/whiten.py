"""Whitening over the whole input: ``A' = (A - mu) / s``, the frameworks' three forms.

The input's mean and variance come from each row's count, mean and M2 of its values (one
value per row, or one per valid token), so they depend on the rows alone, never on batches:

.. math:: \\mu = \\frac{\\sum_i n_i m_i}{N}, \\quad
          \\sigma^2 = \\frac{\\sum_i M2_i + \\sum_i n_i (m_i - \\mu)^2}{N - \\mathrm{ddof}}

Sums and squares of values beyond 2^500 overflow: they are taken in a power-of-two unit U
(:mod:`grpo_cli.numerics`; 1 for ordinary values, whose numbers do not change by a bit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..numerics import unit
from .groups import Batches

# s / u from var, the variance in unit u (sigma^2 / u^2; u = 1 for ordinary values)
EPS_AT = {
    "std": lambda var, eps, u: np.sqrt(var) + eps / u,  # TRL: (A - mu) / (std + eps)
    "var": lambda var, eps, u: np.sqrt(var + eps / u / u),  # verl masked_whiten: (A - mu) * rsqrt(var + eps)
    "var-floor": lambda var, eps, u: np.sqrt(max(var, eps / u / u)),  # OpenRLHF: (A - mu) * rsqrt(clamp(var, min=eps))
}


@dataclass(frozen=True)
class Whitening:
    """``A' = (A - mu) / s`` with ``mu`` and ``s`` held in a power-of-two unit ``u`` (1 for
    ordinary values: the numbers do not change by a bit), so that near the top of float64's
    range neither ``A - mu`` nor ``s`` overflows.

    .. math:: A' = \\frac{A / u - \\mu / u}{s / u}
    """

    mu: float | np.ndarray  # the mean, in unit u (an array: each value's, :meth:`BatchWhitening.tokens`)
    s: float | np.ndarray  # the divisor, in unit u
    u: float | np.ndarray = 1.0

    def __call__(self, a: np.ndarray | float) -> np.ndarray | float:
        return ((a if np.all(self.u == 1.0) else a / self.u) - self.mu) / self.s


@dataclass(frozen=True)
class BatchWhitening:
    """A :class:`Whitening` per batch (`by`): row i's tokens are whitened by ``each[batch[i]]``."""

    each: tuple[Whitening, ...]
    batches: Batches

    def tokens(self, first_row: int, lengths: np.ndarray) -> Whitening:
        """The whitening of each token of the rows from ``first_row`` on, of ``lengths`` tokens each."""
        k = np.repeat(self.batches.index.codes[first_row : first_row + len(lengths)], lengths)
        return Whitening(*(np.array([getattr(w, name) for w in self.each])[k] for name in ("mu", "s", "u")))


def whitening(count: np.ndarray, mean: np.ndarray, m2: np.ndarray, config, m2_unit: np.ndarray | None = None) -> Whitening:
    """The whitening over every value of the rows (``m2`` in units of ``m2_unit`` squared, see
    :func:`pooled`), ``s`` as ``config.whiten_std`` and ``config.whiten_eps_at`` say; ``s``
    infinite (so every ``A'`` is 0) when there are no more values than the std's ddof.

    >>> from grpo_cli import AdvantageConfig
    >>> whitening(np.array([1, 1, 2]), np.array([1.0, 3.0, 2.0]), np.zeros(3), AdvantageConfig(whiten=True, whiten_eps=0.0))
    Whitening(mu=2.0, s=0.816496580927726, u=1.0)
    """
    ddof = 1 if config.whiten_std == "sample" else 0
    n, mu, total_m2, u = pooled(count, mean, m2, m2_unit)
    if n <= ddof:
        return Whitening(0.0, np.inf)
    return Whitening(mu / u, float(EPS_AT[config.whiten_eps_at](total_m2 / (n - ddof), config.whiten_eps, u)), u)


def pooled(count: np.ndarray, mean: np.ndarray, m2: np.ndarray, m2_unit: np.ndarray | None = None) -> tuple[float, float, float, float]:
    """``(N, mu, M2 / U^2, U)`` of all the values of rows with ``count``, ``mean`` and ``m2``
    each, ``m2`` in units of each row's ``m2_unit`` squared (default 1), ``U`` the unit of
    the means and row units (``mu`` is NaN when ``N`` is 0).

    >>> pooled(np.array([1, 1]), np.array([2.0**1000, -(2.0**1000)]), np.zeros(2))[1:] == (0.0, 2.0, 2.0**1000)
    True
    """
    n = float(count.sum())
    if n == 0:
        return 0.0, float("nan"), 0.0, 1.0
    weighted = count > 0  # rows without values may hold NaN means
    c, m = count[weighted], mean[weighted]
    row_unit = None if m2_unit is None else m2_unit[weighted]
    u = unit(np.abs(m) if row_unit is None else np.concatenate([np.abs(m), row_unit]))
    if u != 1.0:
        m = m / u
    mu = float(np.sum(c * m) / n)
    d = m - mu
    share = 1.0 if row_unit is None else row_unit / u  # each row's unit, in U
    return n, mu * u, float(np.sum(m2[weighted] * share * share) + np.sum(c * d * d)), u


def whitened(a: np.ndarray, config, count: np.ndarray | None = None) -> np.ndarray:
    """``(a - mu) / s`` over the rows, row i counted ``count[i]`` times (its valid tokens;
    default once, and 0 for rows left out), ``s`` as ``config`` says (whether to whiten at all
    is the caller's: :func:`~grpo_cli.estimators.whitened_rows`). Rows counted 0 times keep 0.

    >>> from grpo_cli import AdvantageConfig
    >>> whitened(np.array([1.0, 2.0, 3.0]), AdvantageConfig(whiten=True, whiten_eps=0.0)).tolist()
    [-1.0, 0.0, 1.0]
    """
    count = np.ones(len(a)) if count is None else count
    return np.where(count > 0, whitening(count, a, np.zeros_like(a), config)(a), 0.0)
