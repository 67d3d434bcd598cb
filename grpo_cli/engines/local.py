"""The local engine: read -> validate -> group statistics -> per-row math -> write + summarise.

Pass 1 reads only the small columns (prompt id, reward) and computes one advantage per row.
Pass 2 streams every column by record batch (those pass 1 read are taken from memory), runs a
kernel on worker threads while this thread reads the next batch and a thread of its own writes
the previous one, and merges each batch's partial summary, so memory is bounded by the batch,
not by the token columns.

Each command's own modules (:mod:`.token_kernels` and the objective's math with it, the
mismatch report, filters, comparison, inspection) are imported by the method that runs it,
so that a run imports only what its command uses.
"""

from __future__ import annotations

from collections import deque
from contextlib import nullcontext
from concurrent.futures import ThreadPoolExecutor
from functools import reduce
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa

from . import kernels
from .ahead import WINDOW_ROWS, WindowsAhead
from .base import Engine
from .. import schema
from ..config import AdvantageConfig
from ..errors import InputError, RowError
from ..estimators import GroupIndex, Groups, RowInputs, Runs, lookup, row_inputs, whitened_rows, whitening
from ..io import Sink, Source, conform
from ..parallel import default_threads, ordered_map
from ..numerics import round_decimals
from ..plan import AdvantagesPlan, Grouping, Inputs, Output
from ..summaries import GroupSummary, advantage_figures, described, token_advantage_figures

if TYPE_CHECKING:
    from ..plan.compare import ComparePlan
    from ..plan.filter import FilterPlan
    from ..plan.inspect import InspectPlan
    from ..plan.mismatch import MismatchPlan
    from ..plan.objective import ObjectivePlan

WRITES_QUEUED = 1  # batches waiting for the writer thread besides the one it writes


class LocalEngine(Engine):
    """Streams record batches in this process; ``threads`` workers (default: one per core)."""

    @property
    def workers(self) -> int:
        return self.threads or default_threads()

    def advantages(self, source: Source, plan: AdvantagesPlan) -> dict:
        index, inputs, held, ahead = self._first_pass(source, plan.grouping, plan.inputs, plan.estimator, hold=bool(plan.output.targets))
        if plan.token_level:
            return self._token_advantages(source, plan, index, inputs)
        with ThreadPoolExecutor(2) as pool:  # the summary is computed while the advantages are, then while the rows are written
            rewards = pool.submit(self._described, _scored(inputs))
            adv, group_summary = self._advantages(source, plan.grouping, index, inputs, plan.estimator, ahead)
            figures = pool.submit(lambda: advantage_figures(group_summary, plan.grouping.described, rewards.result(),
                                                            self._described(adv, histogram=True), plan.estimator, len(adv)))
            if plan.output.targets:
                written = adv if plan.round_digits is None else round_decimals(adv, plan.round_digits)
                self._write_pass(source, plan.grouping, plan.output, [pa.field("advantage", pa.float64())], kernels.row_columns,
                                 {"advantage": written}, columns=[], held=held)
            return figures.result()

    def objective(self, source: Source, plan: ObjectivePlan) -> dict:
        from ..objective.summary import ObjectiveSummary
        from . import token_kernels

        computed = held = None
        if plan.first_pass:
            index, inputs, held, ahead = self._first_pass(source, plan.grouping, plan.inputs, plan.estimator, hold=bool(plan.output.targets))
            if plan.estimator is not None:
                computed = self._advantages(source, plan.grouping, index, inputs, plan.estimator, ahead)[0]
        partials = self._partials(source, plan.grouping, plan.output, token_kernels.objective_fields(plan), token_kernels.objective_batch, plan,
                                  computed, columns=plan.columns, held=held)
        return reduce(ObjectiveSummary.merge, partials, ObjectiveSummary()).figures(plan.config)

    def mismatch(self, source: Source, plan: MismatchPlan) -> dict:
        from ..mismatch import MismatchSummary
        from . import token_kernels

        if plan.grouping.num_generations is not None:
            self._first_pass(source, plan.grouping, None, None)  # every group has num_generations rows
        partials = self._partials(source, plan.grouping, plan.output, token_kernels.mismatch_fields(), token_kernels.mismatch_batch, plan,
                                  columns=plan.columns)
        summary = reduce(lambda done, partial: done.merge(partial, plan.config.worst), partials, MismatchSummary())
        figures = summary.figures(plan.config)
        named = _row_names(source, plan.prompt, [entry["row"] for entry in figures["worst_rows"]])
        figures["worst_rows"] = [{**entry, "row": name} for entry, name in zip(figures["worst_rows"], named)]
        return figures

    def filter(self, source: Source, plan: FilterPlan) -> dict:
        from ..filters import filter_figures, group_rules, overlong_penalty

        config, grouping = plan.config, plan.grouping
        paths = [schema.field_path(source.schema, name) for name in plan.rewards]
        label = row_labeller(source, grouping.prompt)
        table = _labelled(label, self._read_columns, source, list(dict.fromkeys(c for c in (grouping.prompt, *(p[0] for p in paths), plan.truncated)
                                                                               if c is not None)))
        read = _labelled(label, kernels.rows_read, table, 0, grouping.prompt, paths, plan.rewards, None)
        index = _labelled(label, kernels.index, read.runs, grouping, table.num_rows, source.name)
        found = _labelled(label, row_inputs, read.rewards, list(plan.rewards), plan.reward_config)
        r = found.r
        if not found.scored.all():
            null = f"column {plan.reward!r} is" if len(plan.rewards) == 1 else f"every reward column ({', '.join(plan.rewards)}) is"
            raise InputError(f"{label(int(np.flatnonzero(~found.scored)[0]))}: {null} null or NaN (`grpo filter` needs every reward)")
        groups = Groups(r, index)
        rules = group_rules(groups, config)
        keep = reduce(np.logical_and, (groups.per_row(kept) for kept in rules.values()), np.ones(len(r), dtype=bool))
        truncated = None
        if plan.truncated is not None:
            truncated = _labelled(label, kernels.truncation_flags, table.column(plan.truncated), plan.truncated)
            if config.truncated == "drop":
                keep &= ~truncated
        penalty = reward = None
        if plan.steps is not None:
            from . import token_kernels

            parts = [part for _, _, _, part in self._batches(source, grouping, token_kernels.row_steps, plan.steps, None,
                                                           columns=plan.steps.names, carry=False)]
            penalty = overlong_penalty(_joined(parts, ("length",))["length"], config)
            reward = r + penalty
        figures = filter_figures(groups, rules, keep, truncated, penalty, config)
        if plan.output.targets:
            masked = truncated if config.truncated == "mask" else None
            fields = [pa.field(plan.reward, pa.float64())] if reward is not None else []
            fields += [source.output_schema.field(plan.mask)] if masked is not None else []
            self._write_pass(source, grouping, plan.output, fields, kernels.filter_columns, plan, keep, reward, masked,
                             columns=[plan.mask] if masked is not None else [], held=table)
        return figures

    def compare(self, source: Source, plan: ComparePlan) -> dict:
        from ..compare import column_name, compare_figures

        columns = {}
        for label, inputs, config in plan.estimators:
            index, rows, held, ahead = self._first_pass(source, plan.grouping, inputs, config, hold=bool(plan.output.targets))
            columns[column_name(label)] = self._advantages(source, plan.grouping, index, rows, config, ahead)[0]
        prompt = plan.grouping.prompt

        def names(groups: np.ndarray) -> list:
            if prompt is None:
                return groups.tolist()
            return source.read_columns([prompt]).column(prompt).take(index.first[groups]).to_pylist()

        figures = compare_figures([label for label, _, _ in plan.estimators], np.column_stack(list(columns.values())), index, names, plan.top)
        if plan.output.targets:
            self._write_pass(source, plan.grouping, plan.output, [pa.field(name, pa.float64()) for name in columns], kernels.row_columns,
                             columns, columns=[], held=held)
        return figures

    def inspect(self, source: Source, plan: InspectPlan) -> dict:
        from ..inspection import inspect_figures
        from . import token_kernels

        parts = [part for _, _, _, part in self._batches(source, plan.grouping, token_kernels.inspect_batch, plan, columns=list(plan.columns),
                                                       carry=False)]
        nulls = dict(zip(plan.columns, np.sum([p["nulls"] for p in parts], axis=0).tolist()))
        lengths = entries = None
        if plan.steps is not None:
            lengths = np.concatenate([p["length"] for p in parts])
            counts = np.concatenate([p["entries"] for p in parts])
            entries = (int(counts.min()), int(counts.max())) if len(counts) else None
        label = row_labeller(source, plan.grouping.prompt)
        truncated = None
        if plan.truncated is not None:
            truncated = _labelled(label, kernels.truncation_flags, self._read_columns(source, [plan.truncated]).column(plan.truncated),
                                  plan.truncated)
        estimator, groups, rewards, adv = plan.estimator, None, None, None
        if plan.inputs is not None:
            index, inputs, _, ahead = self._first_pass(source, plan.grouping, plan.inputs, estimator)
            adv, _ = self._advantages(source, plan.grouping, index, inputs, estimator, ahead)
            groups, rewards = GroupSummary.of(Groups(inputs.r, index).subset(inputs.scored)), _scored(inputs)
        return inspect_figures(rows=int(source.row_counts.sum()), roles=plan.roles, nulls=nulls, lengths=lengths, entries=entries,
                               mask=plan.steps.mask if plan.steps else None, groups=groups, grouped_by=plan.grouping.described,
                               rewards=rewards, advantages=adv, truncated=truncated, estimator=estimator)

    def _described(self, x: np.ndarray, histogram: bool = False) -> tuple:
        """:func:`~grpo_cli.summaries.described`, its chunks on the worker threads."""
        return described(x, histogram, lambda fn, chunks: ordered_map(fn, chunks, self.workers))

    def _first_pass(self, source: Source, grouping: Grouping, inputs: Inputs | None, config: AdvantageConfig | None,
                    hold: bool = False) -> tuple[GroupIndex, RowInputs | None, pa.Table | None, Ahead | None]:
        """Each row's group and (if ``inputs``) what the estimator reads of it, in input order:
        the ids and rewards (:func:`~.kernels.rows_read`: the runs of the ids and the float64
        rewards), and a pass over the token columns the estimator needs.

        With ``hold``, the ids and rewards are read whole and returned too, in their unified
        types (a write pass takes them from there rather than reading them again; the rewards
        are a view of them). Without it they are streamed by batch, so no id column is held:
        lower peak memory, faster. Then,
        for an estimator that needs nothing more, the advantages are computed while the pass
        reads (:mod:`.ahead`): the last item returned, kept if the ids' layout allowed it, else None."""
        paths = [schema.field_path(source.schema, name) for name in inputs.rewards] if inputs else []
        baseline = inputs.baseline if inputs else None
        args = (grouping.prompt, paths, inputs.rewards if inputs else (), baseline)  # what kernels.rows_read takes
        columns = list(dict.fromkeys(c for c in (grouping.prompt, *(p[0] for p in paths), baseline) if c is not None))
        label, rows = row_labeller(source, grouping.prompt), int(source.row_counts.sum())
        if hold:
            held = _labelled(label, self._read_columns, source, columns)
            read = _labelled(label, kernels.rows_read, held, 0, *args)
        else:
            held, read = None, kernels.RowsRead(None, np.empty((rows, len(paths))), np.empty(rows) if baseline else None)
        ahead = WindowsAhead(read.rewards, read.baseline, list(inputs.rewards), config, self.workers) \
            if not hold and _ahead(grouping, inputs, config) else None
        with ahead or nullcontext():
            if not hold:
                read = self._rows_read(source, grouping, args, columns, read, ahead)
            index = _labelled(label, kernels.index, read.runs, grouping, rows, source.name)
            if inputs is None:
                return index, None, held, None
            row_level = inputs.steps is not None and lookup(config.estimator).level == "row"  # token level: in its own passes
            per_row = self._row_steps(source, grouping, inputs, config) if row_level else {}
            found = _labelled(label, lambda: row_inputs(read.rewards, list(inputs.rewards), config, baseline=read.baseline, **per_row))
            if len(found.r) and not found.scored.any():
                raise InputError(f"{source.name}: every row is unscorable (its rewards are all null)")
            return index, found, held, ahead.finish(index) if ahead else None

    def _rows_read(self, source: Source, grouping: Grouping, args: tuple, columns: list[str], into: kernels.RowsRead,
                   ahead: WindowsAhead | None) -> kernels.RowsRead:
        """:func:`~.kernels.rows_read` of every row, a batch at a time: the runs joined, the
        rewards laid in the arrays of ``into`` as the batches finish (each batch then told to ``ahead``)."""
        prompt, runs = args[0], []
        for _, first_row, batch, found in self._batches(source, grouping, kernels.rows_read, *args, columns=columns, carry=False):
            runs.append(found.runs)
            into.rewards[first_row:first_row + batch.num_rows] = found.rewards
            if into.baseline is not None:
                into.baseline[first_row:first_row + batch.num_rows] = found.baseline
            if ahead:
                ahead.read(first_row, found.runs)
        return kernels.RowsRead(Runs.joined(runs) if prompt is not None else None, into.rewards, into.baseline)

    def _row_steps(self, source: Source, grouping: Grouping, inputs: Inputs, config: AdvantageConfig) -> dict[str, np.ndarray]:
        """Per row, from a pass over the token columns: ``length`` (valid tokens) and ``kl``."""
        from . import token_kernels

        parts = [part for _, _, _, part in self._batches(source, grouping, token_kernels.row_steps, inputs.steps, config,
                                                       columns=inputs.steps.names, carry=False)]
        return _joined(parts, ("length", "kl") if config.kl_in_reward is not None else ("length",))

    def _advantages(self, source: Source, grouping: Grouping, g: GroupIndex, inputs: RowInputs,
                    config: AdvantageConfig, ahead: Ahead | None = None) -> tuple[np.ndarray, GroupSummary]:
        """Each row's advantage (float64) and the group figures; an error names its row.
        ``ahead``: the unwhitened advantages and figures pass 1 computed (:meth:`_first_pass`).

        Contiguous groups of a group-local estimator are computed a window of whole groups
        (about :data:`~.ahead.WINDOW_ROWS` rows) at a time on the worker threads: each window
        stays in cache, and its sums are the same as over the whole input, so the result is
        bit-identical. File-wide statistics (``scale='batch'``) need every reward at once.
        """
        label = row_labeller(source, grouping.prompt)
        if ahead is not None:
            out, summary = ahead
        elif not g.contiguous or not _windowed(config):
            out, summary = _labelled(label, kernels.advantage_window, inputs, g, config)
        else:
            out = np.empty_like(inputs.r)

            def fill(window: tuple[int, int]) -> GroupSummary:
                rows, local = g.window(*window)
                out[rows], summary = _labelled(lambda row: label(rows.start + row), kernels.advantage_window, inputs.rows(rows), local, config)
                return summary

            summary = reduce(GroupSummary.merge, ordered_map(fill, g.windows(WINDOW_ROWS), self.workers), GroupSummary())
        return whitened_rows(out, inputs, config), summary

    def _token_advantages(self, source: Source, plan: AdvantagesPlan, index: GroupIndex, inputs: RowInputs) -> dict:
        """A token-level estimator: one pass for each row's moments of its raw token
        advantages (the whitening needs the whole input's), one to write the columns."""
        from . import token_kernels

        config, columns = plan.estimator, plan.inputs.steps.names
        parts = [part for _, _, _, part in self._batches(source, plan.grouping, token_kernels.token_moments, plan, inputs.r,
                                                       columns=columns, carry=False)]
        moments = _joined(parts, ("count", "mean", "m2", "unit", "min", "max"))
        w = whitening(moments["count"], moments["mean"], moments["m2"], config, moments["unit"])
        groups = Groups(inputs.r, index)
        figures = token_advantage_figures(GroupSummary.of(groups.subset(inputs.scored)), plan.grouping.described, self._described(_scored(inputs)), len(inputs.r),
                                          moments, w, config)
        if plan.output.targets:
            self._write_pass(source, plan.grouping, plan.output, [pa.field(name, pa.list_(pa.float64())) for name in ("token_advantage", "token_return")],
                             token_kernels.token_columns, plan, inputs.r, w, columns=columns)
        return figures

    def _batches(self, source: Source, grouping: Grouping, kernel: Callable, *args, columns: list[str], carry: bool,
                 held: pa.Table | None = None) -> Iterator:
        """``(part index, first_row, batch, kernel(read, first_row, *args))`` for every record
        batch, in order (``first_row``: its first row in the dataset): the kernel gets the
        ``columns`` it reads in their unified types; ``batch`` holds them as stored, and with
        ``carry`` every other column of its file too.

        Batches hold ``batch_rows`` rows (default: :attr:`Source.batch_rows`, about 32 MiB);
        :meth:`_computed` says where the kernel runs. Progress is reported as batches arrive.
        """
        done, total = 0, int(source.row_counts.sum())
        kind, ends = source.pieces
        for part, batch, result in self._computed(source, grouping.prompt, kernel, args, columns, carry, held):
            yield part, done, batch, result
            done += batch.num_rows
            if self.progress is not None:
                self.progress(done, total, f"{kind} {int(np.searchsorted(ends, done, side='right'))}/{len(ends)}")

    def _computed(self, source: Source, prompt: str | None, kernel: Callable, args: tuple, columns: list[str], carry: bool,
                  held: pa.Table | None) -> Iterator:
        """The kernel on every batch, in order: on up to ``threads`` batches at once while this
        thread reads the next batch (``held``: see :meth:`Source.iter_batches`)."""
        label = row_labeller(source, prompt)
        read = source.read_schema(columns)

        def numbered() -> Iterator[tuple[int, int, pa.RecordBatch]]:
            first_row = 0
            for part, batch in source.iter_batches(self.batch_rows or source.batch_rows, None if carry else columns, held=held):
                yield first_row, part, batch
                first_row += batch.num_rows

        def work(item: tuple[int, int, pa.RecordBatch]):
            first_row, part, batch = item
            return part, batch, run_kernel(source, label, kernel, args, read, part, first_row, batch)

        yield from ordered_map(work, numbered(), self.workers)

    def _read_columns(self, source: Source, columns: list[str]) -> pa.Table:
        """The named columns of every row (pass 1's ids and rewards), in their unified types."""
        return source.read_columns(columns)

    def _partials(self, source: Source, grouping: Grouping, output: Output, new_fields: list[pa.Field], kernel: Callable, *args,
                  columns: list[str], held: pa.Table | None = None) -> list:
        """The kernel's partial summaries of every batch, in row order; with output targets, the
        batches are written too (:meth:`_write_pass`, which takes the ``held`` columns from memory)."""
        if output.targets:
            return self._write_pass(source, grouping, output, new_fields, kernel, *args, columns=columns, held=held)
        return [written.partial for _, _, _, written in self._batches(source, grouping, kernel, *args, columns=columns, carry=False)]

    def _write_pass(self, source: Source, grouping: Grouping, output: Output, new_fields: list[pa.Field], kernel: Callable, *args,
                    columns: list[str], held: pa.Table | None = None) -> list:
        """Run ``kernel`` (returning :class:`~.kernels.Written`) on every batch, write each batch
        with its new columns (the rows kept), and return the partial summaries in row order.
        ``held``: columns of every row already in memory, not read again (see :meth:`Source.iter_batches`)."""
        partials = []

        def written() -> Iterator[tuple[int, int, pa.RecordBatch, kernels.Written]]:
            for part, first_row, batch, result in self._batches(source, grouping, kernel, *args, columns=columns, carry=True, held=held):
                partials.append(result.partial)
                yield part, first_row, batch, result

        self._write(source, output, new_fields, row_labeller(source, grouping.prompt), written())
        return partials

    def _write(self, source: Source, output: Output, new_fields: list[pa.Field], label: Callable[[int], str], batches: Iterable) -> None:
        """Write ``(part, first row, batch, kernel result)`` to the output's targets: the rows
        of each batch that the result keeps, with its columns set (:func:`output_batch`), to
        one file with every input column (in its unified type; null where a file lacks it), or
        per input file with that file's own columns.

        A column of the input with the same name as a new one is replaced in place; the others
        are appended in order. Every output is written to a temporary file staged in
        :attr:`outputs`, which the caller commits (see :class:`~grpo_cli.io.Outputs`). The
        writing runs on a thread of its own, a batch behind the reading; the sinks encode
        small row groups on the worker threads too (:class:`~grpo_cli.writer.RowGroupWriter`).
        """
        inputs = source.stored_schemas if output.per_input else [source.output_schema]
        schemas = [_annotated_schema(s, new_fields) for s in inputs]
        targets = output.targets
        sinks: list[Sink] = []

        def sink(index: int) -> Sink:
            while len(sinks) <= index:
                if sinks:
                    sinks[-1].close()
                sinks.append(Sink(targets[len(sinks)], output.format, schemas[len(sinks)], output.layout, self.outputs,
                                  self.workers))
            return sinks[index]

        def write(part: int, first_row: int, batch: pa.RecordBatch, result: kernels.Written) -> None:
            k = part if output.per_input else 0
            sink(k).write(output_batch(source, label, part, first_row, batch, result, schemas[k]))

        with ThreadPoolExecutor(1) as writer:  # in order, on a thread of its own, while this one reads the next batches
            pending: deque = deque()
            for item in batches:
                pending.append(writer.submit(write, *item))
                while len(pending) > WRITES_QUEUED:
                    pending.popleft().result()
            pending.append(writer.submit(lambda: sink(len(targets) - 1).close()))
            for written in pending:
                written.result()


Ahead = tuple[np.ndarray, GroupSummary]  # advantages (before any whitening) and group figures computed during pass 1


def _windowed(config: AdvantageConfig) -> bool:
    """The estimator's advantages of contiguous groups can be computed a window of groups at a time."""
    return lookup(config.estimator).scope == "group" and config.scale != "batch"


def _ahead(grouping: Grouping, inputs: Inputs | None, config: AdvantageConfig | None) -> bool:
    """The groups are runs of prompt ids, pass 1 reads all the estimator needs (no token
    columns), and it is windowed: its advantages can be computed while the pass reads."""
    return grouping.prompt is not None and inputs is not None and inputs.steps is None and lookup(config.estimator).level == "row" \
        and _windowed(config)


def _scored(inputs: RowInputs) -> np.ndarray:
    """The rewards of the scored rows."""
    return inputs.r if inputs.scored.all() else inputs.r[inputs.scored]


def _joined(parts: list[dict[str, np.ndarray]], keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Per-batch arrays of each key joined in row order."""
    return {k: np.concatenate([p[k] for p in parts]) if parts else np.zeros(0) for k in keys}


def row_labeller(source: Source, prompt: str | None) -> Callable[[int], str]:
    """How errors name a row: ``file: row 12 (prompt id 'p3')`` (0-based in its file). The
    id is read again when an error needs it, so no per-row key is held while streaming."""

    return lambda row: _row_names(source, prompt, [row])[0]


def _row_names(source: Source, prompt: str | None, rows: list[int]) -> list[str]:
    """How a report names rows: ``file: row 12 (prompt id 'p3')``, the ids read once."""
    keys = source.read_columns([prompt]).column(prompt).take(rows).to_pylist() if prompt is not None and rows else [None] * len(rows)
    return [source.locate(row) if key is None else f"{source.locate(row)} (prompt id {key!r})" for row, key in zip(rows, keys)]


def run_kernel(source: Source, label: Callable[[int], str], kernel: Callable, args: tuple, read: pa.Schema, part: int, first_row: int,
               batch: pa.RecordBatch):
    """``kernel`` on one batch of part ``part`` whose first row is ``first_row``: its ``read``
    columns in their unified types; a bad row named by ``label``."""
    return _labelled(lambda row: label(first_row + row), lambda: kernel(conform(batch, read, source.parts[part].name), first_row, *args))


def output_batch(source: Source, label: Callable[[int], str], part: int, first_row: int, batch: pa.RecordBatch,
                 result: kernels.Written, schema: pa.Schema) -> pa.RecordBatch:
    """The rows of ``batch`` (of part ``part``, its first row the dataset's ``first_row``) that
    the kernel's ``result`` keeps, with its columns set, in the output ``schema``; a value that
    the schema cannot hold is named by ``label`` at its row."""
    kept, columns = result.applied(batch)

    def input_row(row: int) -> int:  # the kept row's row in the input, worked out only for an error
        return first_row + (row if result.keep is None else int(np.flatnonzero(result.keep)[row]))

    return _labelled(lambda row: label(input_row(row)), conform, _set_columns(kept, columns), schema, source.parts[part].name)


def _labelled(label: Callable[[int], str], fn: Callable, *args):
    """``fn(*args)``, with a :class:`RowError` turned into an error that says where its row is."""
    try:
        return fn(*args)
    except RowError as exc:
        raise InputError(f"{label(exc.row)}: {exc.detail}") from None


def _annotated_schema(base: pa.Schema, new_fields: list[pa.Field]) -> pa.Schema:
    out = base
    for f in new_fields:
        i = out.get_field_index(f.name)
        out = out.set(i, f) if i >= 0 else out.append(f)
    return out


def _set_columns(batch: pa.RecordBatch, columns: dict[str, pa.Array]) -> pa.RecordBatch:
    for name, values in columns.items():
        i = batch.schema.get_field_index(name)
        batch = batch.set_column(i, name, values) if i >= 0 else batch.append_column(name, values)
    return batch
