"""Per-batch kernels: plain module-level functions of arrays and a plan.

They hold no open file and no state, so any engine can run them: on threads here, or
shipped to workers. Bad data raises :class:`~grpo_cli.errors.RowError` with the row within
the batch; the engine that ran the kernel says which file, row and prompt id that is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from .. import schema
from ..errors import InputError, RowError, UsageError, shortened
from ..estimators import Batches, GroupIndex, RowInputs, Runs, row_advantages
from ..summaries import GroupSummary

if TYPE_CHECKING:
    from ..io import Source
    from ..plan import Grouping


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
        import pyarrow.compute as pc  # here, not above: a run that needs no kernel of it skips its import

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


def one_list_array(column: pa.Array | pa.ChunkedArray, name: str) -> pa.Array:
    """A list column as one array; refused (row 0) if it holds no lists."""
    if not schema.is_list(column.type):
        raise RowError(0, f"column {name!r} must hold a list per row (found {column.type})")
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def row_sums(column: pa.Array | pa.ChunkedArray, name: str, mask: pa.Array | pa.ChunkedArray | None = None, mask_name: str = "") -> np.ndarray:
    """A list column's sum per row, float64, in list order, over the row's valid tokens where
    there is a ``mask`` column (an empty list: 0; a null list or a valid entry null: NaN).
    verl's token_level_scores hold the score on a row's last valid token and 0 on every
    other, so the sum is the row's score."""
    import pyarrow.compute as pc

    from ..token_columns import token_mask  # a run without list rewards does not import the token math
    from ..tokens import reduce_rows

    lists = one_list_array(column, name)
    null = lists.is_null().to_numpy(zero_copy_only=False)
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy().astype(np.int64)
    values = float64(pc.list_flatten(lists), name)
    if mask is not None:
        masks = pa.RecordBatch.from_arrays([one_list_array(mask, mask_name)], [mask_name])
        whole = np.where(null, pc.fill_null(pc.list_value_length(masks.column(0)), 0).to_numpy(), lengths)  # a null row: the mask's own
        values = np.where(token_mask(masks, mask_name, whole)[np.repeat(~null, whole)], values, 0.0)
    return np.where(null, np.nan, reduce_rows(values, lengths))


def row_values(column: pa.Array | pa.ChunkedArray, name: str) -> np.ndarray:
    """A list column that holds one value per row on each of its tokens (verl's outcome
    advantages: ``A * response_mask``, 0 on padding) as that value per row, float64: the first
    entry, which every other entry equals, or is 0. A row that holds two values (per-token
    advantages, GAE's), an empty or null list, or a non-finite value is refused."""
    import pyarrow.compute as pc

    from ..tokens import reduce_rows

    lists = one_list_array(column, name)
    if lists.null_count:
        raise RowError(int(np.flatnonzero(lists.is_null().to_numpy(zero_copy_only=False))[0]), f"column {name!r} is null")
    lengths = pc.list_value_length(lists).to_numpy().astype(np.int64)
    if (lengths == 0).any():
        raise RowError(int(np.flatnonzero(lengths == 0)[0]), f"column {name!r} is an empty list")
    values = float64(pc.list_flatten(lists), name)
    first = values[np.cumsum(lengths) - lengths]
    for bad, what in ((~np.isfinite(values), "a null, NaN or infinite entry"), ((values != np.repeat(first, lengths)) & (values != 0), "two values")):
        if bad.any():
            row = int(np.flatnonzero(reduce_rows(bad.astype(np.float64), lengths))[0])
            raise RowError(row, f"column {name!r} holds {what} (per-token advantages one row apart); compare takes one advantage per row")
    return first


def reward_values(table: pa.Table | pa.RecordBatch, paths: list[tuple[str, ...]], names: tuple[str, ...], mask: str | None = None) -> np.ndarray:
    """The reward columns as float64 (rows x columns), null or NaN as NaN (a list column:
    each row's sum over the ``mask``'s valid tokens, :func:`row_sums`); an infinite reward is refused."""
    read = [field(table, path) for path in paths]
    masks = table.column(mask) if mask is not None else None
    columns = [row_sums(c, name, masks, mask or "") if schema.is_list(c.type) else float64(c, name) for c, name in zip(read, names)]
    values = columns[0][:, None] if len(columns) == 1 else np.column_stack(columns) if columns else np.zeros((table.num_rows, 0))
    infinite = np.isinf(values)
    if infinite.any():
        row, k = np.argwhere(infinite)[0]
        raise RowError(int(row), f"column {names[k]!r} is infinite")
    return values


@dataclass(frozen=True)
class RowsToRead:
    """What pass 1 reads of each row: its group ``key`` (the id column, or the columns of a
    composite key, :attr:`grpo_cli.plan.Grouping.key`; None: no id), the reward columns
    (``names``, at ``paths``), the ``baseline`` reward, the batch column ``by``, the sample
    index ``order`` and the ``mask`` list rewards are summed over."""

    key: str | tuple[str, ...] | None
    paths: tuple[tuple[str, ...], ...] = ()
    names: tuple[str, ...] = ()
    baseline: str | None = None
    by: str | None = None
    order: str | None = None
    mask: str | None = None

    @property
    def columns(self) -> list[str]:
        """The input columns read."""
        key = (self.key,) if isinstance(self.key, str) else self.key or ()
        found = (*key, *(p[0] for p in self.paths), self.baseline, self.by, self.order, self.mask)
        return list(dict.fromkeys(c for c in found if c is not None))


@dataclass(frozen=True)
class RowsRead:
    """What pass 1 takes from a batch: the ``runs`` of its prompt ids (None without a prompt
    id column), its ``rewards`` (rows x reward columns, float64, NaN where null) and its
    ``baseline`` rewards (None without a baseline column)."""

    runs: Runs | None
    rewards: np.ndarray
    baseline: np.ndarray | None
    batch_runs: Runs | None = None  # the runs of the batch column (`by`), if any
    order_runs: Runs | None = None  # the runs of the sample index (:attr:`~grpo_cli.plan.Grouping.order`), if any


def rows_read(batch: pa.RecordBatch | pa.Table, first_row: int, read: RowsToRead) -> RowsRead:
    """Pass 1's kernel: a batch's :class:`RowsRead` (or a table's, read whole), as ``read`` says."""
    key = read.key
    return RowsRead(
        prompt_runs(group_keys(batch, key), ", ".join(key) if isinstance(key, tuple) else key) if key is not None else None,
        reward_values(batch, list(read.paths), read.names, read.mask),
        scalars(batch.column(read.baseline), read.baseline) if read.baseline is not None else None,
        prompt_runs(batch.column(read.by), read.by, "batch") if read.by is not None else None,
        prompt_runs(batch.column(read.order), read.order, "sample index") if read.order is not None else None,
    )


def group_keys(batch: pa.RecordBatch | pa.Table, key: str | tuple[str, ...]) -> pa.Array | pa.ChunkedArray:
    """Each row's group key: its id, or for a composite key one text that tells its values
    apart, ``step | prompt`` (each value as text, its ``\\`` and ``|`` escaped, so two
    different tuples never give the same text); a null in any column stays null."""
    if isinstance(key, str):
        return batch.column(key)
    import pyarrow.compute as pc

    parts = []
    for name in key:
        column = batch.column(name)
        if pa.types.is_nested(column.type):
            raise UsageError(f"column {name!r} of the composite `prompt_col` holds {column.type}; a key column holds one value per row")
        text = pc.cast(column, pa.string())
        parts.append(pc.replace_substring(pc.replace_substring(text, "\\", "\\\\"), "|", "\\|"))
    return pc.binary_join_element_wise(*parts, " | ")


def prompt_runs(keys: pa.Array | pa.ChunkedArray, name: str, role: str = "prompt id") -> Runs:
    """The :class:`~grpo_cli.estimators.groups.Runs` of the prompt id column ``name`` (or of
    another key column playing ``role``); a null key is refused."""
    if pa.types.is_string_view(keys.type) or pa.types.is_binary_view(keys.type):  # compared as their plain kind
        import pyarrow.compute as pc

        keys = pc.cast(keys, pa.large_string() if pa.types.is_string_view(keys.type) else pa.large_binary())
    if keys.null_count:
        import pyarrow.compute as pc

        raise RowError(pc.indices_nonzero(pc.is_null(keys))[0].as_py(), f"column {name!r} ({role}) is null")
    return Runs.of(keys)


def index(runs: Runs | None, grouping: Grouping, rows: int, source: str) -> GroupIndex:
    """Each row's group, as ``grouping`` says (``runs``: of the prompt ids, if there are any)."""
    if runs is not None:
        found = runs.index()
        if grouping.detected and rows > 1 and found.sizes.max() == 1:
            raise InputError(
                f"{source}: column {grouping.prompt!r}, found as the prompt id, is unique on every row: every group would be one row, "
                "every advantage 0; pass `num_generations` N to group consecutive blocks of N rows (with `prompt_col` 'none'), "
                "or `prompt_col` the column that names the prompt"
            )
        if grouping.num_generations is not None:
            wrong = np.flatnonzero(found.sizes != grouping.num_generations)
            if len(wrong):
                key, size = runs.key_at(int(found.first[wrong[0]])), int(found.sizes[wrong[0]])
                raise InputError(f"{source}: prompt id {shortened(key)!r} has {size} rows, expected `num_generations` {grouping.num_generations}")
        return found
    if grouping.num_generations is not None:
        if rows % grouping.num_generations:
            raise InputError(f"{source}: {rows} rows is not a multiple of `num_generations` {grouping.num_generations}")
        return GroupIndex.blocks(rows, grouping.num_generations)
    return GroupIndex.whole(rows)


def grouped(read: RowsRead, grouping: Grouping, rows: int, source: Source) -> tuple[GroupIndex, Batches | None]:
    """Pass 1's groups and batches from what it ``read`` of the ``rows``: the samples' order
    checked (:func:`in_order`), each row's group (:func:`index`) and the batches (:func:`batched`)."""
    in_order(read.order_runs, grouping)
    return batched(read.batch_runs, index(read.runs, grouping, rows, source.name), grouping, source)


def in_order(order_runs: Runs | None, grouping: Grouping) -> None:
    """Blocks of ``num_generations`` rows are taken in file order: where the input numbers its
    samples (:attr:`~grpo_cli.plan.Grouping.order`), a row whose number goes down (a dump in
    another order than the trainer's) is refused."""
    if order_runs is None or len(order_runs.keys) < 2:
        return
    keys = np.asarray(order_runs.keys)
    down = np.flatnonzero(keys[1:] < keys[:-1])
    if len(down):
        j = int(down[0]) + 1
        raise RowError(
            int(order_runs.starts[j]),
            f"column {grouping.order!r} goes down here ({keys[j - 1]} then {keys[j]}): the blocks of `num_generations` rows follow the "
            f"file's order, and {grouping.order!r} numbers the samples; sort the rows by {grouping.order!r}, or pass `prompt_col` the prompt's column",
        )


def batched(batch_runs: Runs | None, index: GroupIndex, grouping: Grouping, source: Source) -> tuple[GroupIndex, Batches | None]:
    """The batches (``batch_runs``: of the batch column; else, with ``grouping.by_file``, the
    input files) and the groups: ``index``, or without an id or a group size, one group per
    batch. A group that spans two batches is refused at its first row there."""
    if batch_runs is not None:
        b = batch_runs.index()
        found = Batches(b, [batch_runs.key_at(int(row)) for row in b.first], grouping.by)
    elif grouping.by_file:
        has = source.row_counts > 0
        first = (np.cumsum(source.row_counts) - source.row_counts)[has]
        found = Batches(GroupIndex(first.astype(np.int64), index.rows), [part.name for part, kept in zip(source.parts, has) if kept], None)
    else:
        return index, None
    if grouping.prompt is None and grouping.num_generations is None:
        return found.index, found
    spans = found.spanning(index)
    if len(spans):
        row = int(spans[0])
        before = found.values[found.index.codes[index.first[index.codes[row]]]]  # the batch of the group's first row
        here = found.values[found.index.codes[row]]
        where = (
            f"values {shortened(before)!r} and {shortened(here)!r} of `by` column {grouping.by!r}" if grouping.by else f"files {before} and {here}"
        )
        fix = (
            f"key the groups by both (`prompt_col` {grouping.by!r} and {grouping.prompt!r}), or pass `by` none to merge the batches"
            if grouping.by and grouping.prompt
            else f"pass {'`by` none' if grouping.by else 'no `by_file`'} to make the input one batch"
        )
        raise RowError(row, f"its group spans two batches ({where}): {fix}")
    return index, found


def advantage_window(inputs: RowInputs, index: GroupIndex, config) -> tuple[np.ndarray, GroupSummary]:
    """Advantages of whole groups (``config``: a resolved AdvantageConfig), before any
    whitening, and the group figures of their scored rows."""
    a, scored = row_advantages(inputs, index, config)
    return a, GroupSummary.of(scored)


def row_columns(batch: pa.RecordBatch, first_row: int, columns: dict[str, np.ndarray]) -> Written:
    """The batch's rows of per-row ``columns`` computed for every row (e.g. ``advantage``)."""
    return Written({name: schema.arrow_array(values[first_row : first_row + batch.num_rows]) for name, values in columns.items()})


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
