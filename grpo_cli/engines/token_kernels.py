"""Per-batch kernels over token columns (lists per row): token-level advantages, the
objective's terms, the mismatch report's, and the token counts `grpo inspect` reports.

Plain functions as in :mod:`.kernels`; apart from it so that a run without token columns
imports none of the token math (:mod:`grpo_cli.token_columns`, :mod:`grpo_cli.objective`,
:mod:`grpo_cli.mismatch`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..errors import RowError
from ..estimators import Steps, Whitening, lookup
from ..kl import KL_ESTIMATORS
from ..mismatch import MismatchSummary, batch_terms
from ..numerics import units
from ..objective import LOSSES, row_terms
from ..objective.summary import ObjectiveSummary
from ..schema import arrow_array
from ..token_columns import StepColumns, StepData, read_steps, read_tokens
from ..tokens import reduce_rows
from .kernels import Written, scalars

if TYPE_CHECKING:
    from ..commands.inspect import InspectPlan
    from ..commands.mismatch import MismatchPlan
    from ..commands.objective import ObjectivePlan
    from ..plan import AdvantagesPlan


def row_steps(batch: pa.RecordBatch, first_row: int, columns: StepColumns, config) -> dict[str, np.ndarray]:
    """Per row of the batch: ``length``, its valid tokens, and ``kl``, the sum of its KL
    (policy vs reference, estimator ``config.kl``) when the reward takes it."""
    data = read_steps(batch, columns)
    out = {"length": data.valid_lengths}
    if data.kl_d is not None:
        out["kl"] = reduce_rows(KL_ESTIMATORS[config.kl](data.kl_d), out["length"], dtype=np.float64)
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
        rewards -= config.kl_in_reward * KL_ESTIMATORS[config.kl](data.kl_d[kept])
    values = None if data.values is None else data.values[kept]
    return Steps(lengths, rewards, values), valid


def token_estimates(batch: pa.RecordBatch, plan: AdvantagesPlan, r: np.ndarray) -> tuple[StepData, Steps, np.ndarray, np.ndarray, np.ndarray]:
    """The batch's token data, its steps and where they sit, and the estimator's raw
    per-step advantages and returns."""
    config = plan.estimator
    data = read_steps(batch, plan.inputs.steps)
    s, valid = steps(data, r, config)
    a, returns = lookup(config.estimator).compute(s, config.gamma, config.lam)
    return data, s, valid, a, returns


def token_moments(batch: pa.RecordBatch, first_row: int, plan: AdvantagesPlan, r: np.ndarray) -> dict[str, np.ndarray]:
    """Per row of the batch, of its raw token advantages: ``count``, ``mean``, ``m2`` (sum of
    squared deviations from the row's mean, in units of ``unit`` squared), ``unit`` (the
    power of two of the row's largest magnitude, :func:`~grpo_cli.numerics.units`: 1 for
    ordinary values), ``min``, ``max`` (NaN for rows without steps). A token advantage
    beyond float64 is refused."""
    _, s, _, a, _ = token_estimates(batch, plan, r[first_row: first_row + batch.num_rows])
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


def token_columns(batch: pa.RecordBatch, first_row: int, plan: AdvantagesPlan, r: np.ndarray, w: Whitening) -> Written:
    """The ``token_advantage`` (whitened, ``(A - mu) / s``) and ``token_return`` list columns
    of a batch: one entry per list entry, 0 where masked or unscorable."""
    data, _, valid, a, returns = token_estimates(batch, plan, r[first_row: first_row + batch.num_rows])
    offsets = arrow_array(np.concatenate([[0], np.cumsum(data.lengths)]).astype(np.int32))
    out = {}
    for name, values in (("token_advantage", w(a)), ("token_return", returns)):
        flat = np.zeros(len(valid))
        flat[valid] = values
        out[name] = pa.ListArray.from_arrays(offsets, arrow_array(flat))
    return Written(out)


def objective_fields(plan: ObjectivePlan) -> list[pa.Field]:
    """The per-row columns `grpo objective` writes, in order."""
    names = [] if plan.per_token else ["advantage"]
    names += ["objective_sum", "objective_mean", "n_tokens", "clip_frac", "ratio_mean", "ratio_max", "kl_old"]
    names += ["kl_ref"] if plan.tokens.ref else []
    names += list(MISMATCH_COLUMNS) if plan.tokens.rollout else []
    names += ["is_weight_mean"] if plan.config.is_level else []
    names += ["rejected_tokens"] if plan.config.reject else []
    return [pa.field(name, pa.int64() if name in ("n_tokens", "rejected_tokens") else pa.float64()) for name in names]


# per-row mismatch columns: (per-row sum or value, divided by the row's tokens as given, sign)
MISMATCH_COLUMNS = {"rollout_abs_diff_mean": ("abs_diff_sum", True, 1.0), "rollout_abs_diff_max": ("abs_diff_max", False, 1.0),
                    "rollout_kl_k1": ("k1_sum", True, 1.0), "rollout_kl_k3": ("k3_sum", True, 1.0),
                    "train_log_ppl": ("old_sum", True, -1.0), "rollout_log_ppl": ("rollout_sum", True, -1.0),
                    "rollout_log_weight": ("k1_sum", False, -1.0)}


def mismatch_columns(terms: dict[str, np.ndarray]) -> dict[str, pa.Array]:
    """The per-row mismatch columns (null for rows without counted tokens): means of |old -
    rollout|, k1 and k3 of KL(rollout || old), log-perplexities -mean log p of the old and
    the rollout policy, the max |old - rollout|, and the sequence log-weight sum_t (old - rollout)."""
    n = terms["mismatch_tokens"]
    empty = n == 0
    safe_n = np.where(empty, 1, n)
    return {name: arrow_array(sign * (terms[key] / safe_n if per_token else terms[key]), mask=empty)
            for name, (key, per_token, sign) in MISMATCH_COLUMNS.items()}


def objective_batch(batch: pa.RecordBatch, first_row: int, plan: ObjectivePlan, computed: np.ndarray | None) -> Written:
    """The per-row columns (when the plan writes rows) and the partial summary of one batch.

    Advantages come from ``computed`` (every row's, from the first pass), else from the
    plan's advantage column in the batch, else per token from ``plan.tokens.advantage``.
    """
    tokens = read_tokens(batch, plan.tokens)
    if computed is not None:
        adv = computed[first_row : first_row + batch.num_rows]
    elif plan.advantage is not None:
        adv = scalars(batch.column(plan.advantage), plan.advantage)
    else:
        adv = None
    terms = row_terms(tokens, adv, plan.config)
    summary = ObjectiveSummary.of(terms, first_row)
    return Written(_per_row_columns(terms, adv, plan) if plan.output.targets else {}, partial=summary)


def _per_row_columns(terms: dict[str, np.ndarray], adv: np.ndarray | None, plan: ObjectivePlan) -> dict[str, pa.Array]:
    n = terms["n_tokens"]
    empty = n == 0
    safe_n = np.where(empty, 1, n)

    def per_token(x: np.ndarray) -> pa.Array:
        return arrow_array(x / safe_n, mask=empty)

    flagged = sum(terms[f"flag_{flag.name}"] for flag in LOSSES[plan.config.loss].flags if flag.per_row)
    columns = {} if adv is None else {"advantage": arrow_array(adv)}
    columns.update({
        "objective_sum": arrow_array(terms["objective_sum"]),
        "objective_mean": per_token(terms["objective_sum"]),
        "n_tokens": arrow_array(n),
        "clip_frac": per_token(np.asarray(flagged, dtype=np.float64)),
        "ratio_mean": per_token(terms["ratio_sum"]),
        "ratio_max": arrow_array(terms["ratio_max"], mask=empty),
        "kl_old": per_token(terms["kl_old_sum"]),
    })
    if "kl_ref_sum" in terms:
        columns["kl_ref"] = per_token(terms["kl_ref_sum"])
    if "mismatch_tokens" in terms:
        columns.update(mismatch_columns(terms))
    if "is_weight_sum" in terms:
        columns["is_weight_mean"] = per_token(terms["is_weight_sum"])
    if "rejected_tokens" in terms:
        columns["rejected_tokens"] = arrow_array(terms["rejected_tokens"])
    return columns


def mismatch_fields() -> list[pa.Field]:
    """The per-row columns `grpo mismatch` writes, in order."""
    return [pa.field("n_tokens", pa.int64()), *(pa.field(name, pa.float64()) for name in MISMATCH_COLUMNS)]


def mismatch_batch(batch: pa.RecordBatch, first_row: int, plan: MismatchPlan) -> Written:
    """The per-row mismatch columns (when the plan writes rows) and the partial report of one batch."""
    terms = batch_terms(read_tokens(batch, plan.tokens), plan.config)
    summary = MismatchSummary.of(terms, first_row, plan.config.worst)
    columns = {"n_tokens": arrow_array(terms["mismatch_tokens"]), **mismatch_columns(terms)} if plan.output.targets else {}
    return Written(columns, partial=summary)


def inspect_batch(batch: pa.RecordBatch, first_row: int, plan: InspectPlan) -> dict:
    """A batch's null count per column (a null list counts one) and, with token columns,
    each row's entries and valid tokens."""
    out = {"nulls": np.array([batch.column(name).null_count for name in plan.columns], dtype=np.int64)}
    if plan.steps is not None:
        data = read_steps(batch, plan.steps)
        out.update(length=data.valid_lengths.astype(np.int32), entries=data.lengths)
    return out
