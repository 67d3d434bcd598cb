"""Advantage estimators: a registry of one function each (see :mod:`.registry`).

Adding an estimator is one module here with one registered function (found by
:func:`grpo_cli.plugins.import_registering`; listed by name), and its test, which holds its
slow reference (``REFERENCES`` in ``tests/estimators/test_<module>.py``).
"""

from __future__ import annotations

import numpy as np

from ..errors import RowError, present
from ..numerics import units
from ..plugins import import_registering
from .groups import Batches, GroupIndex, Groups, Runs, group_index
from .registry import ESTIMATORS, SCALES, Estimator, lookup, names
from .returns import Steps
from .float32 import GROUP_STATS, float32_advantage
from .rewards import RowInputs, row_inputs, weights
from .scale import SCALE_DIVISORS
from .singleton import SINGLETONS
from .whiten import BatchWhitening, Whitening, pooled, whitened, whitening

import_registering(__name__, __path__[0], "@estimator(", ESTIMATORS)

__all__ = [
    "Batches",
    "BatchWhitening",
    "ESTIMATORS",
    "GROUP_STATS",
    "SCALES",
    "SINGLETONS",
    "Estimator",
    "GroupIndex",
    "Groups",
    "RowInputs",
    "Runs",
    "Steps",
    "advantage",
    "group_index",
    "in_units",
    "kl_after_baseline",
    "lookup",
    "names",
    "needed_by",
    "needs",
    "pooled",
    "row_advantages",
    "row_inputs",
    "token_whitened",
    "Whitening",
    "whitened",
    "whitened_rows",
    "whitening",
]


def row_advantages(inputs: RowInputs, index: GroupIndex, config) -> tuple[np.ndarray, Groups]:
    """Each row's advantage before any whitening (0 for unscorable rows), and the scored rows
    in their groups (what the summary describes).

    With ``multi_reward`` 'normalize-then-sum' (or '-tokens') each reward column is estimated
    over the rows where it is not null, and the advantages are summed with the reward weights:
    :math:`A_i = \\sum_k w_k A^{(k)}_i`. With ``advantage_clip`` (lo, hi), the scored rows'
    :math:`A_i` are clipped to it (OpenRLHF's reward clip, after the baseline).
    """
    groups = Groups(inputs.r, index, length=inputs.length, baseline=inputs.baseline)
    if inputs.columns is None:
        a = _scored(groups, inputs.scored, config)
    else:
        w = weights(config, inputs.columns.shape[1])
        with np.errstate(over="ignore", invalid="ignore"):  # beyond float64: refused below, naming the row
            a = sum(w[k] * _scored(groups.with_rewards(inputs.columns[:, k]), ~np.isnan(inputs.columns[:, k]), config) for k in range(len(w)))
        if not np.isfinite(a).all():
            raise RowError(int(np.flatnonzero(~np.isfinite(a))[0]), "the weighted sum of its advantages is beyond float64; rescale `reward_weights`")
    scored = inputs.scored
    if config.advantage_clip is not None:
        a = np.where(scored, np.clip(a, *config.advantage_clip), 0.0)
    return a, groups if scored.all() else groups.subset(scored)


def token_whitened(config) -> bool:
    """The advantages are whitened over valid tokens (a row counts once per token): an
    estimator that whitens so, or ``multi_reward`` 'normalize-then-sum-tokens' (verl's GDPO)."""
    return lookup(config.estimator).whitens == "tokens" or config.multi_reward == "normalize-then-sum-tokens"


def needs(config) -> tuple[str, ...]:
    """What the estimator of ``config`` reads besides the rewards and the grouping
    (:attr:`Estimator.needs`), and ``length`` where the whitening counts tokens."""
    spec = lookup(config.estimator)
    return spec.needs + ("length",) if token_whitened(config) and "length" not in spec.needs else spec.needs


def kl_after_baseline(config) -> bool:
    """The KL in the reward comes after a row-level estimator's baseline, token by token
    (``kl_at`` 'after-baseline', OpenRLHF): its advantages are per token."""
    return config.kl_in_reward is not None and config.kl_at == "after-baseline" and lookup(config.estimator).level == "row"


def needed_by(config, need: str) -> str:
    """What reads ``need`` (:func:`needs`), as an error names it."""
    if need == "length" and need not in lookup(config.estimator).needs and token_whitened(config):
        return f"`multi_reward` {config.multi_reward!r}"
    return f"estimator {config.estimator!r}"


def whitened_rows(a: np.ndarray, inputs: RowInputs, config) -> np.ndarray:
    """With ``config.whiten``, ``a`` whitened as ``config`` says (:func:`.whiten.whitened`) over
    the scored rows, each counted once, or once per valid token where :func:`token_whitened`;
    else ``a``, as when the KL comes after the baseline (the tokens are whitened then)."""
    if not config.whiten or kl_after_baseline(config):
        return a
    per_row = present(inputs.length, "each row's length") if token_whitened(config) else 1
    return whitened(a, config, np.where(inputs.scored, per_row, 0))


def _scored(groups: Groups, scored: np.ndarray, config) -> np.ndarray:
    """:func:`advantage` over the ``scored`` rows (their reward is not NaN); the others get 0."""
    if scored.all():
        return advantage(groups, config)
    a = np.zeros(len(groups.r))
    a[scored] = _renumbered(advantage, np.flatnonzero(scored), groups.subset(scored), config)
    return a


def _renumbered(fn, rows: np.ndarray, *args):
    """``fn(*args)``, computed on ``rows`` only: a :class:`RowError` names its row among all."""
    try:
        return fn(*args)
    except RowError as exc:
        raise RowError(int(rows[exc.row]), exc.detail) from None


def advantage(groups: Groups, config) -> np.ndarray:
    """The advantage of each row: the estimator's ``r - b`` divided by the scale,

    .. math:: A_i = (r_i - b_i) / s

    and exactly 0 in groups without signal (:attr:`Groups.informative`): never NaN, and never
    the noise that ``r - mean`` leaves when the mean of equal floats is not exact. A group of
    one row gets what ``config.singleton`` says (:data:`.singleton.SINGLETONS`; default 0;
    'error' raises :class:`RowError` at its row). With ``config.group_stats`` float32, verl's
    grpo_vectorized instead (:func:`.float32.float32_advantage`).
    ``config`` is a resolved :class:`~grpo_cli.config.AdvantageConfig`.

    Rewards beyond 2^500 (or within 2^-500) of 0 are computed on ``r / U``, ``U`` a power of
    two per group (per input for file-wide statistics; see :mod:`grpo_cli.numerics`): ``A`` is
    the same with ``eps / U``, times ``U`` when unscaled. An advantage that is still not a
    float64 (``r - b`` beyond 1.8e308) raises :class:`RowError` at its first row.

    >>> from grpo_cli import AdvantageConfig
    >>> advantage(Groups(np.array([0.0, 1.0, 0.0, 1.0]), GroupIndex.whole(4)), AdvantageConfig()).tolist()
    [-1.0, 1.0, -1.0, 1.0]
    """
    if config.group_stats != "float64":  # verl's grpo_vectorized: no exact 0, its own singletons
        return float32_advantage(groups, config)
    spec = lookup(config.estimator)
    scaled, u = in_units(groups, file_wide=spec.scope == "file" or config.scale == "batch" or not spec.grouped)
    with np.errstate(all="ignore"):
        a = spec.compute(scaled) / SCALE_DIVISORS[config.scale](scaled, config.ddof, config.eps / u)
        if spec.grouped:
            groups.set_rows(a, ~groups.informative, 0.0)
        if config.scale == "none" and scaled is not groups:
            a *= groups.per_row(u) if len(u) > 1 else u[0]
        if config.singleton != "zero" and spec.grouped:
            alone = np.flatnonzero(groups.per_row(groups.count == 1))
            if alone.size:
                gain = 1.0 if spec.gain is None else spec.gain(groups)
                a[alone] = _renumbered(SINGLETONS[config.singleton], alone, groups.r[alone], groups, config, gain)
    bad = np.flatnonzero(~np.isfinite(a))
    if bad.size:
        raise RowError(int(bad[0]), f"the advantage is beyond float64 (rewards up to {np.max(np.abs(groups.r)):.3g}); rescale the rewards")
    return a


def in_units(groups: Groups, file_wide: bool) -> tuple[Groups, np.ndarray]:
    """``groups`` with rewards divided by their unit (:func:`~grpo_cli.numerics.units` of each
    group's largest magnitude, or of the input's if ``file_wide``), and the units (one per
    group, or one). Rewards in range: ``groups`` itself and ``[1.0]``."""
    peak = np.maximum(groups.max, -groups.min)
    u = units(peak.max(initial=0.0, keepdims=True) if file_wide else peak)
    if (u == 1.0).all():
        return groups, np.ones(1)
    return groups.divided(u[0] if file_wide else groups.per_row(u)), u
