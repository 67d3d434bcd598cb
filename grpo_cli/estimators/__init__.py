"""Advantage estimators: a registry of one function each (see :mod:`.registry`).

Adding an estimator is one module here with one registered function, plus its import below
and its slow reference in ``tests/estimators/references.py``.
"""

from __future__ import annotations

import numpy as np

from . import grpo, rloo, mean, passk, gpg  # noqa: F401, I001  (each registers itself; this order is the listing order)
from ..errors import RowError
from ..numerics import units
from .groups import GroupIndex, Groups, group_index
from .registry import ESTIMATORS, SCALES, Estimator, lookup, names
from .scale import SCALE_DIVISORS
from .singleton import SINGLETONS

__all__ = ["ESTIMATORS", "SCALES", "SINGLETONS", "Estimator", "GroupIndex", "Groups", "advantage", "group_index", "lookup", "names",
           "whitened"]


def advantage(groups: Groups, config) -> np.ndarray:
    """The advantage of each row: the estimator's ``r - b`` divided by the scale,

    .. math:: A_i = (r_i - b_i) / s

    and exactly 0 in groups without signal (:attr:`Groups.informative`): never NaN, and never
    the noise that ``r - mean`` leaves when the mean of equal floats is not exact. A group of
    one row gets what ``config.singleton`` says (:data:`.singleton.SINGLETONS`; default 0).
    ``config`` is a resolved :class:`~grpo_cli.config.AdvantageConfig`.

    Rewards beyond 2^500 (or within 2^-500) of 0 are computed on ``r / U``, ``U`` a power of
    two per group (per input for file-wide statistics; see :mod:`grpo_cli.numerics`): ``A`` is
    the same with ``eps / U``, times ``U`` when unscaled. An advantage that is still not a
    float64 (``r - b`` beyond 1.8e308) raises :class:`RowError` at its first row.

    >>> from grpo_cli import AdvantageConfig
    >>> advantage(Groups(np.array([0.0, 1.0, 0.0, 1.0]), GroupIndex.whole(4)), AdvantageConfig()).tolist()
    [-1.0, 1.0, -1.0, 1.0]
    """
    if config.reward_clip is not None:
        groups = Groups(np.clip(groups.r, *config.reward_clip), groups.index)
    scaled, u = in_units(groups, file_wide=lookup(config.estimator).scope == "file" or config.scale == "batch")
    with np.errstate(all="ignore"):
        a = lookup(config.estimator).baseline_removed(scaled) / SCALE_DIVISORS[config.scale](scaled, config.ddof, config.eps / u)
        a = np.where(groups.per_row(groups.informative), a, 0.0)
        if config.scale == "none" and scaled is not groups:
            a *= groups.per_row(u) if len(u) > 1 else u[0]
        if config.singleton != "zero":
            alone = groups.per_row(groups.count == 1)
            a = np.where(alone, SINGLETONS[config.singleton](groups.r, config.scale, config.eps), a)
    bad = np.flatnonzero(~np.isfinite(a))
    if bad.size:
        raise RowError(int(bad[0]), f"the advantage is beyond float64 (rewards up to {np.max(np.abs(groups.r)):.3g}); rescale the rewards")
    return a


def whitened(a: np.ndarray, config) -> np.ndarray:
    """With ``config.whiten``: the advantages of the whole input whitened (TRL's
    ``normalize_advantages``), else ``a``. Fewer than two rows give 0.

    .. math:: A'_i = (A_i - \\bar A) / (\\mathrm{std}_{ddof=1}(A) + \\epsilon_w)

    >>> from grpo_cli import AdvantageConfig
    >>> whitened(np.array([1.0, 2.0, 3.0]), AdvantageConfig(whiten=True, whiten_eps=0.0)).tolist()
    [-1.0, 0.0, 1.0]
    """
    if not config.whiten:
        return a
    if len(a) < 2:
        return np.zeros_like(a)
    c = a - np.mean(a)
    return c / (np.sqrt(np.sum(c * c) / (len(a) - 1)) + config.whiten_eps)


def in_units(groups: Groups, file_wide: bool) -> tuple[Groups, np.ndarray]:
    """``groups`` with rewards divided by their unit (:func:`~grpo_cli.numerics.units` of each
    group's largest magnitude, or of the input's if ``file_wide``), and the units (one per
    group, or one). Rewards in range: ``groups`` itself and ``[1.0]``."""
    peak = np.maximum(groups.max, -groups.min)
    u = units(peak.max(initial=0.0, keepdims=True) if file_wide else peak)
    if (u == 1.0).all():
        return groups, np.ones(1)
    return Groups(groups.r / (u[0] if file_wide else groups.per_row(u)), groups.index), u
