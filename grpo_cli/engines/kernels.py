"""Per-batch kernels: plain module-level functions of arrays and a plan.

They hold no open file and no state, so any engine can run them: on threads here, or
shipped to workers. Bad data raises :class:`~grpo_cli.errors.RowError` with the row within
the batch; the engine that ran the kernel says which file, row and prompt id that is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .. import schema
from ..errors import InputError, RowError
from ..estimators import GroupIndex, RowInputs, Runs, Steps, Whitening, lookup, row_advantages
from ..objective import KL_ESTIMATORS, LOSSES, reduce_rows, row_terms
from ..mismatch import MismatchSummary, batch_terms
from ..numerics import units
from ..plan import AdvantagesPlan, FilterPlan, Grouping, InspectPlan, MismatchPlan, ObjectivePlan
from ..summaries import GroupSummary, ObjectiveSummary
from ..token_columns import StepColumns, StepData, read_steps, read_tokens


@dataclass(frozen=True)
class Written:
    """What a write pass's kernel returns for a batch: the ``columns`` to set (one value per
    row of the batch), the rows to ``keep`` (``None``: all) and a ``partial`` summary."""

    columns: dict[str, pa.Array]
    keep: np.ndarray | None = None
    partial: object = None

    def applied(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, dict[str, pa.Array]]:
        """The rows kept of ``batch`` and of the new columns."""
        if self.keep is None:
            return batch, self.columns
        return batch.filter(self.keep), {name: values.filter(self.keep) for name, values in self.columns.items()}


def float64(column: pa.Array | pa.ChunkedArray, name: str) -> np.ndarray:
    """A numeric column (named ``name``) as float64 with nulls as NaN; an integer that float64
    would round (beyond 2^53) is refused, naming its row."""
    if column.type != pa.float64():
        import pyarrow.compute as pc  # here, not above: a run that needs no kernel of it skips its import (0.03 s)

        try:
            column = pc.cast(column, pa.float64())
        except pa.ArrowInvalid:  # the safe cast refuses integers beyond 2^53
            raise schema.inexact_integer(column, name) from None
    return column.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)


def field(table: pa.Table | pa.RecordBatch, path: tuple[str, ...]) -> pa.ChunkedArray | pa.Array:
    """The column ``path[0]``, or its struct field ``path[1:]`` (nulls where a struct is null)."""
    values = table.column(path[0])
    if len(path) == 1:
        return values
    import pyarrow.compute as pc

    return pc.struct_field(values, list(path[1:]))


def scalars(column: pa.Array | pa.ChunkedArray, name: str) -> np.ndarray:
    """A reward or advantage column as float64; null, NaN or infinite values are refused."""
    values = float64(column, name)
    schema.check_finite_scalars(values, name)
    return values


def reward_values(table: pa.Table | pa.RecordBatch, paths: list[tuple[str, ...]], names: tuple[str, ...]) -> np.ndarray:
    """The reward columns as float64 (rows x columns), null or NaN as NaN; an infinite reward
    is refused."""
    columns = [float64(field(table, path), name) for path, name in zip(paths, names)]
    values = columns[0][:, None] if len(columns) == 1 else np.column_stack(columns) if columns else np.zeros((table.num_rows, 0))
    infinite = np.isinf(values)
    if infinite.any():
        row, k = np.argwhere(infinite)[0]
        raise RowError(int(row), f"column {names[k]!r} is infinite")
    return values


@dataclass(frozen=True)
class RowsRead:
    """What pass 1 takes from a batch: the ``runs`` of its prompt ids (None without a prompt
    id column), its ``rewards`` (rows x reward columns, float64, NaN where null) and its
    ``baseline`` rewards (None without a baseline column)."""

    runs: Runs | None
    rewards: np.ndarray
    baseline: np.ndarray | None


def rows_read(batch: pa.RecordBatch | pa.Table, first_row: int, prompt: str | None, paths: list[tuple[str, ...]], names: tuple[str, ...],
              baseline: str | None) -> RowsRead:
    """Pass 1's kernel: a batch's :class:`RowsRead` (or a table's, read whole)."""
    return RowsRead(prompt_runs(batch.column(prompt), prompt) if prompt is not None else None, reward_values(batch, paths, names),
                    scalars(batch.column(baseline), baseline) if baseline is not None else None)


def prompt_runs(keys: pa.Array | pa.ChunkedArray, name: str) -> Runs:
    """The :class:`~grpo_cli.estimators.groups.Runs` of the prompt id column ``name``; a null id is refused."""
    if keys.null_count:
        import pyarrow.compute as pc

        raise RowError(pc.indices_nonzero(pc.is_null(keys))[0].as_py(), f"column {name!r} (prompt id) is null")
    return Runs.of(keys)


def index(runs: Runs | None, grouping: Grouping, rows: int, source: str) -> GroupIndex:
    """Each row's group, as ``grouping`` says (``runs``: of the prompt ids, if there are any)."""
    if runs is not None:
        found = runs.index()
        if grouping.num_generations is not None:
            wrong = np.flatnonzero(found.sizes != grouping.num_generations)
            if len(wrong):
                key, size = runs.key_at(int(found.first[wrong[0]])), int(found.sizes[wrong[0]])
                raise InputError(f"{source}: prompt id {key!r} has {size} rows, expected `num_generations` {grouping.num_generations}")
        return found
    if grouping.num_generations is not None:
        if rows % grouping.num_generations:
            raise InputError(f"{source}: {rows} rows is not a multiple of `num_generations` {grouping.num_generations}")
        return GroupIndex.blocks(rows, grouping.num_generations)
    return GroupIndex.whole(rows)


def advantage_window(inputs: RowInputs, index: GroupIndex, config) -> tuple[np.ndarray, GroupSummary]:
    """Advantages of whole groups (``config``: a resolved AdvantageConfig), before any
    whitening, and the group figures of their scored rows."""
    a, scored = row_advantages(inputs, index, config)
    return a, GroupSummary.of(scored)


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
    offsets = pa.array(np.concatenate([[0], np.cumsum(data.lengths)]).astype(np.int32))
    out = {}
    for name, values in (("token_advantage", w(a)), ("token_return", returns)):
        flat = np.zeros(len(valid))
        flat[valid] = values
        out[name] = pa.ListArray.from_arrays(offsets, pa.array(flat))
    return Written(out)


def row_columns(batch: pa.RecordBatch, first_row: int, columns: dict[str, np.ndarray]) -> Written:
    """The batch's rows of per-row ``columns`` computed for every row (e.g. ``advantage``)."""
    return Written({name: pa.array(values[first_row : first_row + batch.num_rows]) for name, values in columns.items()})


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
    return {name: pa.array(sign * (terms[key] / safe_n if per_token else terms[key]), mask=empty)
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
        return pa.array(x / safe_n, mask=empty)

    flagged = sum(terms[f"flag_{flag.name}"] for flag in LOSSES[plan.config.loss].flags if flag.per_row)
    columns = {} if adv is None else {"advantage": pa.array(adv)}
    columns.update({
        "objective_sum": pa.array(terms["objective_sum"]),
        "objective_mean": per_token(terms["objective_sum"]),
        "n_tokens": pa.array(n),
        "clip_frac": per_token(np.asarray(flagged, dtype=np.float64)),
        "ratio_mean": per_token(terms["ratio_sum"]),
        "ratio_max": pa.array(terms["ratio_max"], mask=empty),
        "kl_old": per_token(terms["kl_old_sum"]),
    })
    if "kl_ref_sum" in terms:
        columns["kl_ref"] = per_token(terms["kl_ref_sum"])
    if "mismatch_tokens" in terms:
        columns.update(mismatch_columns(terms))
    if "is_weight_sum" in terms:
        columns["is_weight_mean"] = per_token(terms["is_weight_sum"])
    if "rejected_tokens" in terms:
        columns["rejected_tokens"] = pa.array(terms["rejected_tokens"])
    return columns


def mismatch_fields() -> list[pa.Field]:
    """The per-row columns `grpo mismatch` writes, in order."""
    return [pa.field("n_tokens", pa.int64()), *(pa.field(name, pa.float64()) for name in MISMATCH_COLUMNS)]


def mismatch_batch(batch: pa.RecordBatch, first_row: int, plan: MismatchPlan) -> Written:
    """The per-row mismatch columns (when the plan writes rows) and the partial report of one batch."""
    terms = batch_terms(read_tokens(batch, plan.tokens), plan.config)
    summary = MismatchSummary.of(terms, first_row, plan.config.worst)
    columns = {"n_tokens": pa.array(terms["mismatch_tokens"]), **mismatch_columns(terms)} if plan.output.targets else {}
    return Written(columns, partial=summary)


def truncation_flags(column: pa.ChunkedArray, name: str) -> np.ndarray:
    """A truncation column (booleans or 0/1) as bool; nulls and other values are refused."""
    import pyarrow.compute as pc

    values = pc.cast(column, pa.int64()) if not pa.types.is_boolean(column.type) else column
    if values.null_count:
        raise RowError(pc.indices_nonzero(pc.is_null(values))[0].as_py(), f"column {name!r} (truncation flag) is null")
    flags = values.to_numpy(zero_copy_only=False)
    if flags.dtype != bool and not np.isin(flags, (0, 1)).all():
        raise RowError(int(np.flatnonzero(~np.isin(flags, (0, 1)))[0]), f"column {name!r} (truncation flag) must hold booleans or 0/1")
    return flags.astype(bool)


def filter_columns(batch: pa.RecordBatch, first_row: int, plan: FilterPlan, keep: np.ndarray, reward: np.ndarray | None,
                   masked: np.ndarray | None) -> Written:
    """Which rows of a batch `grpo filter` keeps, and its changed columns (all rows): the
    penalised ``reward``; the mask, 0 on every token of a ``masked`` row."""
    import pyarrow.compute as pc

    rows = slice(first_row, first_row + batch.num_rows)
    columns = {} if reward is None else {plan.reward: pa.array(reward[rows])}
    if masked is not None:
        mask = batch.column(plan.mask)
        lengths = pc.list_value_length(mask).to_numpy().astype(np.int64)
        flat = mask.flatten()
        values = np.where(np.repeat(masked[rows], lengths), 0, flat.to_numpy(zero_copy_only=False)).astype(flat.to_numpy(zero_copy_only=False).dtype)
        offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
        columns[plan.mask] = pa.ListArray.from_arrays(offsets, pa.array(values, type=flat.type))
    return Written(columns, keep=keep[rows])


def inspect_batch(batch: pa.RecordBatch, first_row: int, plan: InspectPlan) -> dict:
    """A batch's null count per column (a null list counts one) and, with token columns,
    each row's entries and valid tokens."""
    out = {"nulls": np.array([batch.column(name).null_count for name in plan.columns], dtype=np.int64)}
    if plan.steps is not None:
        data = read_steps(batch, plan.steps)
        out.update(length=data.valid_lengths.astype(np.int32), entries=data.lengths)
    return out
