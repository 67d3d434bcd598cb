"""Advantage estimators: a registry of one function each (see :mod:`.registry`).

Adding an estimator is one module here with one registered function, plus its import below
and its slow reference in ``tests/estimators/references.py``.
"""

from __future__ import annotations

import numpy as np

from . import grpo, rloo, mean  # noqa: F401, I001  (each registers itself; this order is the listing order)
from .groups import GroupIndex, Groups, group_index
from .registry import ESTIMATORS, SCALES, Estimator, lookup, names
from .scale import SCALE_DIVISORS

__all__ = ["ESTIMATORS", "SCALES", "Estimator", "GroupIndex", "Groups", "advantage", "group_index", "lookup", "names"]


def advantage(groups: Groups, config) -> np.ndarray:
    """The advantage of each row: the estimator's ``r - b`` divided by the scale,

    .. math:: A_i = (r_i - b_i) / s

    and exactly 0 in groups without signal (:attr:`Groups.informative`): never NaN, and never
    the noise that ``r - mean`` leaves when the mean of equal floats is not exact.
    ``config`` is a resolved :class:`~grpo_cli.config.AdvantageConfig`.

    >>> from grpo_cli import AdvantageConfig
    >>> advantage(Groups(np.array([0.0, 1.0, 0.0, 1.0]), GroupIndex.whole(4)), AdvantageConfig()).tolist()
    [-1.0, 1.0, -1.0, 1.0]
    """
    keep = groups.per_row(groups.informative)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = lookup(config.estimator).baseline_removed(groups) / SCALE_DIVISORS[config.scale](groups, config.ddof, config.eps)
    # a spread so small that the std underflows to 0 (subnormal rewards) is no signal either
    return np.where(keep & np.isfinite(a), a, 0.0)
