"""The passes several commands share, built from an engine's primitives (:class:`~grpo_cli.engines.Engine`).

Pass 1 (:func:`first_pass`) reads only the small columns (prompt id, reward) and finds each
row's group and what the estimator reads of it; :func:`advantages` computes one advantage
per row from them (for contiguous groups, while pass 1 still reads: :mod:`.ahead`). A
command's second pass streams every column by record batch (those pass 1 read are taken from
memory, ``held``), and :func:`partials` merges each batch's partial summary in row order, so
memory is bounded by the batch, not by the token columns. :func:`run_advantages` is `grpo
advantages` itself, shared with the Python API (:mod:`grpo_cli.frames`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import replace
from functools import reduce
from typing import TYPE_CHECKING, Any, Callable, Iterator, overload

import numpy as np
import pyarrow as pa

from .. import schema
from ..config import AdvantageConfig
from ..engines import Engine, kernels
from ..engines.base import labelled, row_labeller
from ..errors import InputError
from ..estimators import Batches, BatchWhitening, GroupIndex, Groups, RowInputs, Runs, Whitening, lookup, row_inputs, whitened_rows, whitening
from ..io import Source
from ..numerics import round_decimals
from ..parallel import ordered_map
from ..summaries import (
    GroupSummary,
    advantage_figures,
    describe,
    described as described_chunks,
    reward_figures,
    token_advantage_figures,
    whitened_figures,
)
from .ahead import WINDOW_ROWS, WindowsAhead

HELD_ROWS = 1 << 20  # pass 1 over columns read whole: rows per call on the engine's threads

if TYPE_CHECKING:
    from ..plan import AdvantagesPlan, Grouping, Inputs, Output
    from ..token_columns import StepColumns

Ahead = tuple[np.ndarray, GroupSummary]  # advantages (before any whitening) and group figures computed during pass 1


def results(engine: Engine, source: Source, kernel: Callable, *args: Any, columns: list[str], prompt: str | None = None) -> list:
    """The kernel's result on every batch (:meth:`~grpo_cli.engines.Engine.map_batches`), in row order."""
    return list(streamed(engine, source, kernel, *args, columns=columns, prompt=prompt))


def streamed(engine: Engine, source: Source, kernel: Callable, *args: Any, columns: list[str], prompt: str | None = None) -> Iterator:
    """:func:`results` as they come, for a caller that merges them without holding them all."""
    return (mapped.result for mapped in engine.map_batches(source, kernel, *args, columns=columns, prompt=prompt))


def partials(
    engine: Engine,
    source: Source,
    output: Output,
    new_fields: list[pa.Field],
    kernel: Callable,
    *args: Any,
    columns: list[str],
    prompt: str | None = None,
    held: pa.Table | None = None,
) -> list:
    """The kernel's partial summaries of every batch, in row order; with output targets, the
    batches are written too (:meth:`~grpo_cli.engines.Engine.write_pass`, which takes the
    ``held`` columns from memory)."""
    if output.targets:
        return engine.write_pass(source, output, new_fields, kernel, *args, columns=columns, prompt=prompt, held=held)
    return [written.partial for written in results(engine, source, kernel, *args, columns=columns, prompt=prompt)]


def joined(parts: list[dict[str, np.ndarray]], keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Per-batch arrays of each key joined in row order."""
    return {k: np.concatenate([p[k] for p in parts]) if parts else np.zeros(0) for k in keys}


def scored(inputs: RowInputs) -> np.ndarray:
    """The rewards of the scored rows."""
    return inputs.r if inputs.scored.all() else inputs.r[inputs.scored]


def described(engine: Engine, x: np.ndarray, histogram: bool = False) -> tuple:
    """:func:`~grpo_cli.summaries.described`, its chunks on the engine's threads."""
    return described_chunks(x, histogram, lambda fn, chunks: ordered_map(fn, chunks, engine.workers))


@overload
def first_pass(
    engine: Engine, source: Source, grouping: Grouping, inputs: Inputs, config: AdvantageConfig, hold: bool = False
) -> tuple[GroupIndex, RowInputs, pa.Table | None, Ahead | None]: ...
@overload
def first_pass(
    engine: Engine, source: Source, grouping: Grouping, inputs: None, config: None, hold: bool = False
) -> tuple[GroupIndex, None, pa.Table | None, Ahead | None]: ...
@overload
def first_pass(
    engine: Engine, source: Source, grouping: Grouping, inputs: Inputs | None, config: AdvantageConfig | None, hold: bool = False
) -> tuple[GroupIndex, RowInputs | None, pa.Table | None, Ahead | None]: ...
def first_pass(
    engine: Engine, source: Source, grouping: Grouping, inputs: Inputs | None, config: AdvantageConfig | None, hold: bool = False
) -> tuple[GroupIndex, RowInputs | None, pa.Table | None, Ahead | None]:
    """Each row's group and (if ``inputs``) what the estimator reads of it, in input order:
    the ids and rewards (:func:`~grpo_cli.engines.kernels.rows_read`: the runs of the ids and
    the float64 rewards), and a pass over the token columns the estimator needs.

    With ``hold``, the ids and rewards are read whole and returned too, in their unified
    types (a write pass takes them from there rather than reading them again), and passed
    over :data:`HELD_ROWS` rows at a time on the engine's threads. Without it they are
    streamed by batch, so no id column is held: lower peak memory, faster. Then, for an
    estimator that needs nothing more, the advantages are computed while the pass reads
    (:mod:`.ahead`): the last item returned, kept if the ids' layout allowed it, else None."""
    spec = rows_to_read(source, grouping, inputs)
    label, rows = row_labeller(source, grouping.prompt), int(source.row_counts.sum())
    held = labelled(label, engine.read_columns, source, spec.columns) if hold else None
    read = kernels.RowsRead(None, np.empty((rows, len(spec.paths))), np.empty(rows) if spec.baseline else None)
    ahead = (
        WindowsAhead(read.rewards, read.baseline, list(inputs.rewards), config, engine.workers)
        if not hold and inputs is not None and config is not None and _ahead(grouping, inputs, config)
        else None
    )
    with ahead or nullcontext():
        read = _rows_read(engine, source, spec, read, ahead, held, label)
        index, batches = labelled(label, kernels.grouped, read, grouping, rows, source)
        if inputs is None:
            return index, None, held, None
        assert config is not None  # given with the inputs
        steps = inputs.steps if lookup(config.estimator).level == "row" else None  # token level: in its own passes
        per_row = _row_steps(engine, source, grouping, steps, config) if steps is not None else {}
        found = labelled(label, lambda: row_inputs(read.rewards, list(inputs.rewards), config, baseline=read.baseline, **per_row))
        found = replace(found, batches=batches)
        if len(found.r) and not found.scored.any():
            raise InputError(f"{source.name}: every row is unscorable (its rewards are all null)")
        return index, found, held, ahead.finish(index) if ahead else None


def rows_to_read(source: Source, grouping: Grouping, inputs: Inputs | None) -> kernels.RowsToRead:
    """What pass 1 reads of each row: the group key, batch and sample index of ``grouping``,
    and what the estimator reads of ``inputs`` (if any)."""
    if inputs is None:
        return kernels.RowsToRead(grouping.key, by=grouping.by, order=grouping.order)
    paths = tuple(column_path(source, name) for name in inputs.rewards)
    return kernels.RowsToRead(grouping.key, paths, inputs.rewards, inputs.baseline, grouping.by, grouping.order, inputs.reward_mask)


def _rows_read(
    engine: Engine,
    source: Source,
    spec: kernels.RowsToRead,
    into: kernels.RowsRead,
    ahead: WindowsAhead | None,
    held: pa.Table | None,
    label: Callable[[int], str],
) -> kernels.RowsRead:
    """:func:`~grpo_cli.engines.kernels.rows_read` of every row, a batch at a time (of the
    ``held`` columns, if read whole: :data:`HELD_ROWS` rows at a time on the engine's threads):
    the runs joined, the rewards laid in the arrays of ``into`` as the batches finish (each
    batch then told to ``ahead``)."""
    key, runs, batch_runs, order_runs = spec.key, [], [], []
    mapped: Iterator[tuple[int, Any]]  # first row, its kernels.RowsRead
    if held is None:
        prompt = key[-1] if isinstance(key, tuple) else key  # the column that names a row's group in messages
        mapped = (
            (first_row, found) for _, first_row, _, found in engine.map_batches(source, kernels.rows_read, spec, columns=spec.columns, prompt=prompt)
        )
    else:

        def window(first_row: int) -> tuple[int, kernels.RowsRead]:
            rows = held.slice(first_row, HELD_ROWS)
            return first_row, labelled(lambda row: label(first_row + row), kernels.rows_read, rows, first_row, spec)

        mapped = ordered_map(window, range(0, held.num_rows, HELD_ROWS), engine.workers)
    for first_row, found in mapped:
        runs.append(found.runs)
        batch_runs.append(found.batch_runs)
        order_runs.append(found.order_runs)
        into.rewards[first_row : first_row + len(found.rewards)] = found.rewards
        if into.baseline is not None:
            into.baseline[first_row : first_row + len(found.rewards)] = found.baseline
        if ahead:
            ahead.read(first_row, found.runs)
    return kernels.RowsRead(
        Runs.joined(runs) if key is not None else None,
        into.rewards,
        into.baseline,
        Runs.joined(batch_runs) if spec.by is not None else None,
        Runs.joined(order_runs) if spec.order is not None else None,
    )


def column_path(source: Source, name: str) -> tuple[str, ...]:
    """Where column or struct field ``name`` is (the plan found it there)."""
    path = schema.field_path(source.schema, name)
    assert path is not None
    return path


def _row_steps(engine: Engine, source: Source, grouping: Grouping, steps: StepColumns, config: AdvantageConfig) -> dict[str, np.ndarray]:
    """Per row, from a pass over the token columns: ``length`` (valid tokens) and ``kl``."""
    from ..engines import token_kernels

    parts = results(engine, source, token_kernels.row_steps, steps, config, columns=steps.names, prompt=grouping.prompt)
    return joined(parts, ("length", "kl") if config.kl_in_reward is not None else ("length",))


def advantages(
    engine: Engine, source: Source, grouping: Grouping, g: GroupIndex, inputs: RowInputs, config: AdvantageConfig, ahead: Ahead | None = None
) -> tuple[np.ndarray, GroupSummary]:
    """Each row's advantage (float64) and the group figures; an error names its row.
    ``ahead``: the unwhitened advantages and figures pass 1 computed (:func:`first_pass`).

    Contiguous groups of a group-local estimator are computed a window of whole groups
    (about :data:`~.ahead.WINDOW_ROWS` rows) at a time on the engine's threads: each window
    stays in cache, and its sums are the same as over the whole input, so the result is
    bit-identical. File-wide statistics (``scale='batch'``, whitening) need every reward at
    once: of each batch, when the rows are in batches (``inputs.batches``, `by`).
    """
    label = row_labeller(source, grouping.prompt)
    batches = inputs.batches.rows if inputs.batches is not None and (not _windowed(config) or config.whiten) else None
    if ahead is not None:
        out, summary = ahead
    elif not _windowed(config) and batches is not None:
        out, summary = np.empty_like(inputs.r), GroupSummary()
        for rows in batches:
            out[rows], part = labelled(_in_batch(label, rows), kernels.advantage_window, inputs.rows(rows), g.subset(rows), config)
            summary = summary.merge(part)
    elif not g.contiguous or not _windowed(config):
        out, summary = labelled(label, kernels.advantage_window, inputs, g, config)
    else:
        out = np.empty_like(inputs.r)

        def fill(window: tuple[int, int]) -> GroupSummary:
            rows, local = g.window(*window)
            out[rows], summary = labelled(lambda row: label(rows.start + row), kernels.advantage_window, inputs.rows(rows), local, config)
            return summary

        summary = reduce(GroupSummary.merge, ordered_map(fill, g.windows(WINDOW_ROWS), engine.workers), GroupSummary())
    if batches is None:
        return whitened_rows(out, inputs, config), summary
    for rows in batches:
        out[rows] = whitened_rows(out[rows], inputs.rows(rows), config)
    return out, summary


def _in_batch(label: Callable[[int], str], rows: slice | np.ndarray) -> Callable[[int], str]:
    """How errors name row ``row`` of the batch ``rows``: as ``label`` names it among all."""
    return lambda row: label((rows.start or 0) + row if isinstance(rows, slice) else int(rows[row]))


def run_advantages(engine: Engine, source: Source, plan: AdvantagesPlan) -> dict:
    """`grpo advantages`: compute and write the advantages; the figures of
    :func:`grpo_cli.summaries.advantage_figures`. The summary is computed while the
    advantages are, then while the rows are written."""
    index, inputs, held, ahead = first_pass(engine, source, plan.grouping, plan.inputs, plan.estimator, hold=bool(plan.output.targets))
    if plan.token_level:
        return _token_advantages(engine, source, plan, index, inputs)
    with ThreadPoolExecutor(2) as pool:
        rewards = pool.submit(described, engine, scored(inputs))
        adv, group_summary = advantages(engine, source, plan.grouping, index, inputs, plan.estimator, ahead)
        figures = pool.submit(
            lambda: advantage_figures(
                group_summary, plan.grouping.described, rewards.result(), described(engine, adv, histogram=True), plan.estimator, len(adv)
            )
        )
        by = pool.submit(batch_figures, engine, index, inputs, lambda _, rows: {"advantage": describe(*described(engine, adv[rows]))})
        if plan.output.targets:
            written = adv if plan.round_digits is None else round_decimals(adv, plan.round_digits)
            engine.write_pass(
                source,
                plan.output,
                [pa.field(plan.advantage_name, pa.float64())],
                kernels.row_columns,
                {plan.advantage_name: written},
                columns=[],
                prompt=plan.grouping.prompt,
                held=held,
            )
        return {**figures.result(), **by.result()}


def _token_advantages(engine: Engine, source: Source, plan: AdvantagesPlan, index: GroupIndex, inputs: RowInputs) -> dict:
    """A token-level estimator: one pass for each row's moments of its raw token
    advantages (the whitening needs the whole input's), one to write the columns; before
    them, for a baseline per group and position, one for its sums over the input. A
    row-level estimator with the KL after its baseline: each row's advantage is the reward
    of its last token (NaN: unscorable)."""
    from ..engines import token_kernels

    steps = plan.inputs.steps
    assert steps is not None  # per-token advantages read token columns
    config, columns, prompt = plan.estimator, steps.names, plan.grouping.prompt
    r = inputs.r
    if lookup(config.estimator).level == "row":
        r = np.where(inputs.scored, advantages(engine, source, plan.grouping, index, inputs, config)[0], np.nan)
    by_position = None
    if lookup(config.estimator).sums is not None:  # a baseline per group and position: the input's sums first
        from ..estimators.optimal_token_baseline import TokenGroups, position_baselines

        sums = results(engine, source, token_kernels.position_sums, plan, r, TokenGroups(index.codes), columns=columns, prompt=prompt)
        by_position = TokenGroups(index.codes, position_baselines(sums, index.codes))
    parts = results(engine, source, token_kernels.token_moments, plan, r, by_position, columns=columns, prompt=prompt)
    moments = joined(parts, ("count", "mean", "m2", "unit", "min", "max"))
    w = _token_whitening(moments, config, inputs.batches)
    groups = Groups(inputs.r, index)
    figures = token_advantage_figures(
        GroupSummary.of(groups.subset(inputs.scored)), plan.grouping.described, described(engine, scored(inputs)), len(inputs.r), moments, w, config
    )
    figures |= batch_figures(engine, index, inputs, lambda k, rows: _token_figures(moments, w, k, rows))
    if plan.output.targets:
        engine.write_pass(
            source,
            plan.output,
            [pa.field(name, pa.list_(pa.float64())) for name in (plan.advantage_name, "token_return")],
            token_kernels.token_columns,
            plan,
            r,
            w,
            by_position,
            columns=columns,
            prompt=prompt,
        )
    return figures


def _token_whitening(moments: dict[str, np.ndarray], config: AdvantageConfig, batches: Batches | None) -> Whitening | BatchWhitening:
    """The whitening of the token advantages (none without ``config.whiten``): over every
    valid token of the input, or of each batch."""
    if not config.whiten:
        return Whitening(0.0, 1.0)
    count, mean, m2, u = (moments[k] for k in ("count", "mean", "m2", "unit"))
    if batches is None or batches.index.count == 1:
        return whitening(count, mean, m2, config, u)
    return BatchWhitening(tuple(whitening(count[rows], mean[rows], m2[rows], config, u[rows]) for rows in batches.rows), batches)


def _token_figures(moments: dict[str, np.ndarray], w: Whitening | BatchWhitening, k: int, rows: slice | np.ndarray) -> dict:
    """Batch ``k``'s whitened token advantages described (its ``rows``)."""
    figures = whitened_figures({name: values[rows] for name, values in moments.items()}, w.each[k] if isinstance(w, BatchWhitening) else w)
    return {"tokens": figures.pop("tokens"), "advantage": figures}


def batch_figures(engine: Engine, g: GroupIndex, inputs: RowInputs, advantages: Callable[[int, slice | np.ndarray], dict]) -> dict:
    """With batches (`by`), ``by``: each batch's figures, as the whole input's are (its value
    as ``batch``, and what ``advantages`` says of batch k's rows); else nothing."""
    b = inputs.batches
    if b is None:
        return {}
    each = []
    for k, (value, rows) in enumerate(zip(b.values, b.rows)):
        batch = inputs.rows(rows)
        groups = GroupSummary.of(Groups(batch.r, g.subset(rows)).subset(batch.scored))
        figures = reward_figures(groups, "", described(engine, scored(batch)), len(batch.r))
        del figures["grouped_by"]
        each.append({"batch": value if isinstance(value, (int, float, str)) else str(value)} | figures | advantages(k, rows))
    return {"by": {"column": b.column, "batches": each}}


def _windowed(config: AdvantageConfig) -> bool:
    """The estimator's advantages of contiguous groups can be computed a window of groups at a time
    (not with file-wide statistics: the batch scale, or lone rows' batch baseline)."""
    return lookup(config.estimator).scope == "group" and config.scale != "batch" and config.singleton != "batch"


def _ahead(grouping: Grouping, inputs: Inputs, config: AdvantageConfig) -> bool:
    """The groups are runs of prompt ids, pass 1 reads all the estimator needs (no token
    columns), and it is windowed: its advantages can be computed while the pass reads."""
    return grouping.prompt is not None and inputs.steps is None and lookup(config.estimator).level == "row" and _windowed(config)
