"""Whitening over the whole input: ``A' = (A - mu) / s``, the frameworks' three forms.

The input's mean and variance come from each row's count, mean and M2 of its values (one
value per row, or one per valid token), so they depend on the rows alone, never on batches:

.. math:: \\mu = \\frac{\\sum_i n_i m_i}{N}, \\quad
          \\sigma^2 = \\frac{\\sum_i M2_i + \\sum_i n_i (m_i - \\mu)^2}{N - \\mathrm{ddof}}
"""

from __future__ import annotations

import numpy as np

EPS_AT = {
    "std": lambda var, eps: np.sqrt(var) + eps,  # TRL: (A - mu) / (std + eps)
    "var": lambda var, eps: np.sqrt(var + eps),  # verl masked_whiten: (A - mu) * rsqrt(var + eps)
    "var-floor": lambda var, eps: np.sqrt(max(var, eps)),  # OpenRLHF: (A - mu) * rsqrt(clamp(var, min=eps))
}


def whitening(count: np.ndarray, mean: np.ndarray, m2: np.ndarray, config) -> tuple[float, float]:
    """``(mu, s)`` over every value of the rows, ``s`` as ``config.whiten_std`` and
    ``config.whiten_eps_at`` say; ``(0, inf)`` (so every ``A'`` is 0) when there are no
    more values than the std's ddof.

    >>> from grpo_cli import AdvantageConfig
    >>> whitening(np.array([1, 1, 2]), np.array([1.0, 3.0, 2.0]), np.zeros(3), AdvantageConfig(whiten=True, whiten_eps=0.0))
    (2.0, 0.816496580927726)
    """
    ddof = 1 if config.whiten_std == "sample" else 0
    n, mu, total_m2 = pooled(count, mean, m2)
    if n <= ddof:
        return 0.0, np.inf
    return mu, float(EPS_AT[config.whiten_eps_at](total_m2 / (n - ddof), config.whiten_eps))


def pooled(count: np.ndarray, mean: np.ndarray, m2: np.ndarray) -> tuple[float, float, float]:
    """``(N, mu, M2)`` of all the values of rows with ``count``, ``mean`` and ``m2`` each
    (``mu`` is NaN when ``N`` is 0)."""
    n = float(count.sum())
    if n == 0:
        return 0.0, float("nan"), 0.0
    weighted = count > 0  # rows without values may hold NaN means
    mu = float(np.sum(count[weighted] * mean[weighted]) / n)
    d = mean[weighted] - mu
    return n, mu, float(np.sum(m2[weighted]) + np.sum(count[weighted] * d * d))


def whitened(a: np.ndarray, config, count: np.ndarray | None = None) -> np.ndarray:
    """With ``config.whiten``: ``(a - mu) / s`` over the rows, row i counted ``count[i]``
    times (its valid tokens; default once, and 0 for rows left out), else ``a``. Rows counted
    0 times keep 0.

    >>> from grpo_cli import AdvantageConfig
    >>> whitened(np.array([1.0, 2.0, 3.0]), AdvantageConfig(whiten=True, whiten_eps=0.0)).tolist()
    [-1.0, 0.0, 1.0]
    """
    if not config.whiten:
        return a
    count = np.ones(len(a)) if count is None else count
    mu, s = whitening(count, a, np.zeros_like(a), config)
    return np.where(count > 0, (a - mu) / s, 0.0)
