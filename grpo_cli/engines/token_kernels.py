"""Per-batch kernels over token columns (lists per row) that several commands share: each
row's length and KL, token-level advantages, the per-row mismatch columns.

Plain functions as in :mod:`.kernels`; apart from it so that a run without token columns
imports none of the token math (:mod:`grpo_cli.token_columns`, :mod:`grpo_cli.tokens`). A
command's own kernels live in its module (:mod:`grpo_cli.commands`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..errors import RowError, present
from ..estimators import BatchWhitening, Steps, Whitening, lookup
from ..estimators.optimal_token_baseline import PositionSums, TokenGroups, path_variance
from ..estimators.returns import reinforce
from ..numerics import units
from ..schema import arrow_array
from ..token_columns import StepColumns, StepData, read_steps
from ..tokens import reduce_rows
from .kernels import Written

if TYPE_CHECKING:
    from ..plan import AdvantagesPlan


def row_steps(batch: pa.RecordBatch, first_row: int, columns: StepColumns, config) -> dict[str, np.ndarray]:
    """Per row of the batch: ``length``, its valid tokens, and ``kl``, the sum of its KL
    (policy vs reference, estimator ``config.kl``) when the reward takes it."""
    data = read_steps(batch, columns)
    out = {"length": data.valid_lengths}
    if data.kl_d is not None:
        out["kl"] = reduce_rows(config.reward_kl(data.kl_d), out["length"], dtype=np.float64)
    return out


def steps(data: StepData, r: np.ndarray, config) -> tuple[Steps, np.ndarray]:
    """A batch's :class:`Steps` for a token-level estimator (unscorable rows, NaN ``r``, have
    none) and where they sit among the batch's list entries (a bool per entry).

    .. math:: r_t = [t = L - 1] \\, r - \\beta \\, \\mathrm{KL}_t
    """
    scored = ~np.isnan(r)
    valid = data.valid & np.repeat(scored, data.lengths)
    lengths = np.where(scored, data.valid_lengths, 0)
    kept = valid[data.valid]  # valid entries of scored rows, among all valid entries
    rewards = np.zeros(int(lengths.sum()))
    last = np.cumsum(lengths)[lengths > 0] - 1
    rewards[last] = r[lengths > 0]
    if data.kl_d is not None:
        rewards -= config.kl_in_reward * config.reward_kl(data.kl_d[kept])
    values = None if data.values is None else data.values[kept]
    if data.sum_pi_squared is None:
        return Steps(lengths, rewards, values), valid
    w = path_variance(present(data.old, "the old log-probs")[kept], data.sum_pi_squared[kept])
    if data.is_weights is not None:  # verl: W of the truncated-IS weighted gradient, w times rho^2
        w = w * data.is_weights[kept] ** 2
    columns = (np.arange(len(valid)) - np.repeat(np.cumsum(data.lengths) - data.lengths, data.lengths))[valid]
    return Steps(lengths, rewards, values, w=w, columns=columns), valid


def token_estimates(
    batch: pa.RecordBatch, plan: AdvantagesPlan, r: np.ndarray, groups: TokenGroups | None = None
) -> tuple[StepData, Steps, np.ndarray, np.ndarray, np.ndarray]:
    """The batch's token data, its steps and where they sit, and the estimator's raw
    per-step advantages and returns (a row-level estimator's, ``r``, with the KL after the
    baseline: its sum to go, gamma 1, as OpenRLHF's cumulative returns). ``groups``: the
    batch's rows' groups and baselines, for an estimator with a baseline per group and position."""
    config, columns = plan.estimator, plan.inputs.steps
    assert columns is not None  # these estimates read token columns
    data = read_steps(batch, columns)
    s, valid = steps(data, r, config)
    if groups is not None:
        s = replace(s, groups=groups)
    spec = lookup(config.estimator)
    compute = spec.compute if spec.level == "token" else lambda steps, gamma, lam: reinforce(steps, 1.0, 1.0)
    if config.masked_steps != "skip":  # masked entries inside a row: steps of reward 0, or the ends of runs
        positions, kept = in_positions(data, s, valid)
        if config.masked_steps == "count":
            a, returns = compute(replace(positions, values=None if s.values is None else _at(kept, s.values)), config.gamma, config.lam)
            return data, s, valid, a[kept], returns[kept]
        new = ((kept & ~np.concatenate([[False], kept[:-1]])) | _row_starts(positions))[kept]  # each step after a masked entry, or a row's first
        s = replace(s, runs_end=np.append(np.flatnonzero(new)[1:], len(new))[np.cumsum(new) - 1])
    a, returns = compute(s, config.gamma, config.lam)
    return data, s, valid, a, returns


def in_positions(data: StepData, s: Steps, valid: np.ndarray) -> tuple[Steps, np.ndarray]:
    """The rows of ``s`` with every list entry a step (`masked_steps` 'count', OpenRLHF's: a
    masked entry is a step of reward 0), and which of those steps are ``s``'s (its valid ones)."""
    rows = s.lengths > 0
    kept = valid[np.repeat(rows, data.lengths)]
    return Steps(np.where(rows, data.lengths, 0), _at(kept, s.rewards)), kept


def _at(kept: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` laid at the ``kept`` positions, 0 elsewhere."""
    out = np.zeros(len(kept))
    out[kept] = values
    return out


def _row_starts(positions: Steps) -> np.ndarray:
    """Whether each step is its row's first."""
    starts = np.zeros(len(positions.rewards), dtype=bool)
    starts[(np.cumsum(positions.lengths) - positions.lengths)[positions.lengths > 0]] = True
    return starts


def position_sums(batch: pa.RecordBatch, first_row: int, plan: AdvantagesPlan, r: np.ndarray, groups: TokenGroups) -> PositionSums:
    """The batch's sums per (group, position) that the estimator's baseline needs (:attr:`~grpo_cli.estimators.Estimator.sums`)."""
    columns = plan.inputs.steps
    assert columns is not None  # these sums read token columns
    s, _ = steps(read_steps(batch, columns), r[first_row : first_row + batch.num_rows], plan.estimator)
    sums = lookup(plan.estimator.estimator).sums
    assert sums is not None  # this pass runs for such estimators only
    return sums(replace(s, groups=_batch_groups(groups, first_row, batch.num_rows)))


def _batch_groups(groups: TokenGroups | None, first_row: int, rows: int) -> TokenGroups | None:
    return None if groups is None else groups.rows(first_row, first_row + rows)


def token_moments(
    batch: pa.RecordBatch, first_row: int, plan: AdvantagesPlan, r: np.ndarray, groups: TokenGroups | None = None
) -> dict[str, np.ndarray]:
    """Per row of the batch, of its raw token advantages: ``count``, ``mean``, ``m2`` (sum of
    squared deviations from the row's mean, in units of ``unit`` squared), ``unit`` (the
    power of two of the row's largest magnitude, :func:`~grpo_cli.numerics.units`: 1 for
    ordinary values), ``min``, ``max`` (NaN for rows without steps). A token advantage
    beyond float64 is refused."""
    _, s, _, a, _ = token_estimates(batch, plan, r[first_row : first_row + batch.num_rows], _batch_groups(groups, first_row, batch.num_rows))
    n = s.lengths
    lo, hi = reduce_rows(a, n, np.minimum, np.nan), reduce_rows(a, n, np.maximum, np.nan)
    beyond = np.flatnonzero((n > 0) & ~(np.isfinite(lo) & np.isfinite(hi)))
    if len(beyond):
        raise RowError(int(beyond[0]), "a token advantage is beyond float64; rescale the rewards (or values)")
    u = units(np.fmax(np.abs(lo), np.abs(hi)))
    scaled = a / np.repeat(u, n) if (u != 1.0).any() else a
    mean = reduce_rows(scaled, n) / np.where(n > 0, n, 1)
    d = scaled - np.repeat(mean, n)
    return {"count": n, "mean": mean * u, "m2": reduce_rows(d * d, n), "unit": u, "min": lo, "max": hi}


def token_columns(
    batch: pa.RecordBatch, first_row: int, plan: AdvantagesPlan, r: np.ndarray, w: Whitening | BatchWhitening, groups: TokenGroups | None = None
) -> Written:
    """The token advantage (whitened, ``(A - mu) / s``; named ``plan.advantage_name``) and
    ``token_return`` list columns of a batch: one entry per list entry, 0 where masked or unscorable."""
    data, s, valid, a, returns = token_estimates(
        batch, plan, r[first_row : first_row + batch.num_rows], _batch_groups(groups, first_row, batch.num_rows)
    )
    offsets = arrow_array(np.concatenate([[0], np.cumsum(data.lengths)]).astype(np.int32))
    out = {}
    if isinstance(w, BatchWhitening):
        w = w.tokens(first_row, s.lengths)
    for name, values in ((plan.advantage_name, w(a)), ("token_return", returns)):
        flat = np.zeros(len(valid))
        flat[valid] = values
        out[name] = pa.ListArray.from_arrays(offsets, arrow_array(flat))
    return Written(out)


# per-row mismatch columns: (per-row sum or value, divided by the row's tokens as given, sign)
MISMATCH_COLUMNS = {
    "rollout_abs_diff_mean": ("abs_diff_sum", True, 1.0),
    "rollout_abs_diff_max": ("abs_diff_max", False, 1.0),
    "rollout_kl_k1": ("k1_sum", True, 1.0),
    "rollout_kl_k3": ("k3_sum", True, 1.0),
    "train_log_ppl": ("old_sum", True, -1.0),
    "rollout_log_ppl": ("rollout_sum", True, -1.0),
    "rollout_log_weight": ("k1_sum", False, -1.0),
}


def mismatch_columns(terms: dict[str, np.ndarray]) -> dict[str, pa.Array]:
    """The per-row mismatch columns (null for rows without counted tokens): means of |old -
    rollout|, k1 and k3 of KL(rollout || old), log-perplexities -mean log p of the old and
    the rollout policy, the max |old - rollout|, and the sequence log-weight sum_t (old - rollout)."""
    n = terms["mismatch_tokens"]
    empty = n == 0
    safe_n = np.where(empty, 1, n)
    return {
        name: arrow_array(sign * (terms[key] / safe_n if per_token else terms[key]), mask=empty)
        for name, (key, per_token, sign) in MISMATCH_COLUMNS.items()
    }
