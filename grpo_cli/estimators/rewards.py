"""From reward columns to the reward an estimator sees.

Several reward columns (one per reward function) combine as TRL combines them: the weighted
sum, where a null counts as 0, and a row whose every reward is null is *unscorable* (NaN
here): left out of its group's statistics, advantage 0. With ``multi_reward``
``normalize-then-sum`` (or ``normalize-then-sum-tokens``) each column is estimated on its own
and the advantages are summed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..errors import RowError
from .groups import Batches
from .registry import lookup


@dataclass(frozen=True)
class RowInputs:
    """What a row-level estimator reads of each row: ``r``, the reward it sees (NaN:
    unscorable); for ``normalize-then-sum(-tokens)``, ``columns``, each column's reward (rows x
    columns, NaN where null); and ``length`` (valid tokens) and ``baseline`` where an
    estimator needs them."""

    r: np.ndarray  # normalize-then-sum(-tokens): the weighted sum of the columns, for the summary
    columns: np.ndarray | None = None
    length: np.ndarray | None = None
    baseline: np.ndarray | None = None
    unscorable: np.ndarray | None = None  # the rows whose every reward is null, where known (else: where r is NaN)
    batches: Batches | None = None  # the rows' batches (`by`): the batch-wide statistics are per batch

    def rows(self, rows: slice | np.ndarray) -> "RowInputs":
        """These ``rows`` (ascending), as one batch."""
        cut = lambda x: None if x is None else x[rows]  # noqa: E731
        return RowInputs(self.r[rows], cut(self.columns), cut(self.length), cut(self.baseline), cut(self.unscorable))

    @cached_property
    def scored(self) -> np.ndarray:
        """Which rows have a reward (``r`` not NaN)."""
        return ~(np.isnan(self.r) if self.unscorable is None else self.unscorable)


def row_inputs(values: np.ndarray, names: list[str], config, *, length=None, baseline=None, kl=None) -> RowInputs:
    """The :class:`RowInputs` of reward ``values`` (rows x columns ``names``, NaN where null).

    .. math:: r_i = \\mathrm{clip}\\left(\\sum_k w_k R_{ik}\\right) - \\beta \\sum_t \\mathrm{KL}_{it}

    (``config.reward_weights`` w, default 1; a null ``R_ik`` counts 0; ``config.reward_clip``;
    ``config.kl_in_reward`` beta with ``kl``, each row's summed KL, unless ``config.kl_at`` puts
    it after the baseline). A token-level estimator
    has no baseline, so ``config.advantage_clip`` clips its ``r`` too (OpenRLHF clips the
    score of reinforce and gae before the per-token KL). With ``on_null`` 'error', a null
    reward raises :class:`RowError` at its row.

    >>> from grpo_cli import AdvantageConfig
    >>> row_inputs(np.array([[1.0, np.nan], [np.nan, np.nan]]), ["a", "b"], AdvantageConfig()).r.tolist()
    [1.0, nan]
    """
    null = np.isnan(values)
    if config.on_null == "error" and null.any():
        row, k = np.argwhere(null)[0]
        raise RowError(
            int(row), f"column {names[k]!r} is null or NaN (`on_null` 'error'; without it, a row whose every reward is null is left unscored)"
        )
    w = weights(config, values.shape[1])
    unscorable = null[:, 0] if values.shape[1] == 1 else null.all(axis=1)
    clip = (lambda x: np.clip(x, *config.reward_clip)) if config.reward_clip is not None else (lambda x: x)

    def summed(x: np.ndarray) -> np.ndarray:  # a null counts 0; unscorable rows become NaN below
        if x.shape[1] == 1 and w[0] == 1:  # one reward column: itself (a view: no copy of every row)
            return x[:, 0]
        total = np.zeros(len(x))
        with np.errstate(over="ignore", invalid="ignore"):  # beyond float64: refused below, naming the row
            for k in range(x.shape[1]):
                total += w[k] * np.where(null[:, k], 0.0, x[:, k])
        if not np.isfinite(total).all():
            row = int(np.flatnonzero(~np.isfinite(total))[0])
            raise RowError(row, "the weighted sum of its rewards is beyond float64; rescale `reward_weights`")
        return total

    if config.multi_reward != "sum-then-normalize":  # r: only what the summary describes
        columns = clip(values)
        return RowInputs(np.where(unscorable, np.nan, summed(columns)), columns, length, baseline, unscorable)
    r = clip(summed(values))
    if config.advantage_clip is not None and lookup(config.estimator).level == "token":
        r = np.clip(r, *config.advantage_clip)  # r - b with b = 0
    if kl is not None and config.kl_at == "before-baseline":
        r = r - config.kl_in_reward * kl
    if unscorable.any():
        r = np.where(unscorable, np.nan, r)
    return RowInputs(r, None, length, baseline, unscorable if kl is None else None)  # a KL may make r NaN too


def weights(config, columns: int) -> np.ndarray:
    """The weights of ``columns`` reward columns: ``config.reward_weights``, else 1 each."""
    return np.ones(columns) if config.reward_weights is None else np.asarray(config.reward_weights, dtype=np.float64)
