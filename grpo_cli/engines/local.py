"""The local engine: read -> validate -> group statistics -> per-row math -> write + summarise.

Pass 1 reads only the small columns (prompt id, reward) and computes one advantage per row.
Pass 2 streams every column by record batch, appends the computed columns and writes each
batch before reading the next, so memory is bounded by the batch, not by the token columns.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Iterable, Iterator, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import schema
from .parallel import default_threads, ordered_map
from ..config import AdvantageConfig, ObjectiveConfig
from ..errors import ColumnNotFoundError, InputError, UsageError
from ..estimators import GroupIndex, advantage, group_index, informative_groups
from ..io import Sink, Source, open_source, output_targets
from ..objective import row_terms
from ..report import ObjectiveSummary, advantage_figures
from ..tokens import TokenColumns, read_tokens


@dataclass
class Groups:
    """Pass-1 result: each row's group (:class:`GroupIndex`) and reward, in file order."""

    index: GroupIndex
    keys: pa.ChunkedArray | None
    rewards: np.ndarray | None
    prompt_col: str | None
    reward_col: str | None
    source: Source

    num_generations: int | None = None

    @property
    def grouped_by(self) -> str:
        """Where the groups come from, as the summary says it."""
        if self.prompt_col is not None:
            return f"by column {self.prompt_col!r}"
        if self.num_generations is not None:
            return f"consecutive blocks of {self.num_generations} rows"
        return "one group: the whole input"

    @cached_property
    def informative(self) -> np.ndarray:
        """Per group: has at least two distinct rewards."""
        return informative_groups(self.rewards, self.index)

    def row_label(self, row: int) -> str:
        """``file: row 12 (prompt id 'p3')``: how errors name a row (see :func:`row_labeller`)."""
        return row_labeller(self.source, self.prompt_col)(row)


def resolve_prompt_col(source: Source, prompt_col: str | None) -> str | None:
    """The prompt id column: ``prompt_col``, else the one candidate present, else None."""
    return schema.resolve_column(
        source.schema, role="prompt id", flag="--prompt-col", explicit=prompt_col,
        candidates=schema.PROMPT_CANDIDATES, required=False, source=source.name,
    )


def row_labeller(source: Source, prompt_col: str | None) -> Callable[[int], str]:
    """How errors name a row: ``file: row 12 (prompt id 'p3')`` (0-based in its file). The
    id is read again when an error needs it, so no per-row key is held while streaming."""

    def label(row: int) -> str:
        if prompt_col is None:
            return source.locate(row)
        key = source.read_columns([prompt_col]).column(prompt_col)[row].as_py()
        return f"{source.locate(row)} (prompt id {key!r})"

    return label


def read_groups(
    source: Source,
    *,
    prompt_col: str | None,
    reward_col: str | None,
    num_generations: int | None,
    need_reward: bool = True,
    need_groups: bool = True,
) -> Groups:
    """Read the id and reward columns and assign each row its group key.

    Groups come from the prompt id column (rows need not be contiguous), else from
    consecutive blocks of ``num_generations`` rows, else (``need_groups=False``) the whole
    file is one group. With both an id column and ``num_generations``, every group must have
    exactly that many rows. ``need_reward=False`` reads no reward column.
    """
    schema.positive_int(num_generations, "num_generations")
    arrow_schema = source.schema
    prompt = resolve_prompt_col(source, prompt_col)
    if prompt is None and num_generations is None and need_groups:
        raise ColumnNotFoundError(
            f"{source.name}: no prompt id column (looked for {', '.join(schema.PROMPT_CANDIDATES)}); "
            "pass --prompt-col, or --num-generations N to group consecutive blocks of N rows"
        )
    reward = schema.resolve_column(
        arrow_schema, role="reward", flag="--reward-col", explicit=reward_col,
        candidates=schema.REWARD_CANDIDATES, source=source.name,
    ) if need_reward else None
    table = source.read_columns([c for c in (prompt, reward) if c is not None])
    keys = table.column(prompt) if prompt is not None else None
    index = _group_index(keys, prompt, num_generations, table.num_rows, source)
    if reward is not None:
        schema.check_numeric(arrow_schema.field(reward), source.name)
    rewards = _float64(table.column(reward)) if reward is not None else None
    groups = Groups(index, keys, rewards, prompt, reward, source, num_generations)
    if rewards is not None:
        schema.check_finite_scalars(rewards, column=reward, row_label=groups.row_label)
    if prompt is not None and num_generations is not None:
        _check_group_sizes(groups, num_generations)
    return groups


def _float64(column: pa.ChunkedArray) -> np.ndarray:
    """A numeric column as float64 with nulls as NaN."""
    return pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)


def _group_index(keys: pa.ChunkedArray | None, prompt: str | None, num_generations: int | None, n_rows: int, source: Source) -> GroupIndex:
    if keys is not None:
        if keys.null_count:
            row = pc.indices_nonzero(pc.is_null(keys))[0].as_py()
            raise InputError(f"{source.locate(row)}: column {prompt!r} (prompt id) is null")
        return group_index(keys)
    if num_generations is not None:
        if n_rows % num_generations:
            raise InputError(
                f"{source.name}: {n_rows} rows is not a multiple of --num-generations {num_generations}"
            )
        return GroupIndex.blocks(n_rows, num_generations)
    return GroupIndex.whole(n_rows)


def _check_group_sizes(groups: Groups, num_generations: int) -> None:
    sizes = groups.index.sizes
    wrong = np.flatnonzero(sizes != num_generations)
    if len(wrong):
        key, size = groups.keys[int(groups.index.first[wrong[0]])].as_py(), int(sizes[wrong[0]])
        raise InputError(
            f"{groups.source.name}: prompt id {key!r} has {size} rows, expected --num-generations {num_generations}"
        )


WINDOW_ROWS = 1 << 16


def group_advantages(groups: Groups, config: AdvantageConfig, threads: int | None = None) -> np.ndarray:
    """Each row's advantage (float64) from the rewards of its group.

    Contiguous groups are computed a window of whole groups (about :data:`WINDOW_ROWS` rows)
    at a time on ``threads`` threads: each window stays in cache, and its sums (and its
    groups' informative test) are the same as over the whole input, so the result is
    bit-identical. ``scale='batch'`` needs every reward at once and is computed in one piece.
    """
    r, g = groups.rewards, groups.index
    if not g.contiguous or config.scale == "batch":
        return advantage(r, g, config, groups.informative)
    out = np.empty_like(r)

    def fill(window: tuple[int, int]) -> None:
        rows, local = g.window(*window)
        out[rows] = advantage(r[rows], local, config)

    for _ in ordered_map(fill, g.windows(WINDOW_ROWS), threads or default_threads()):
        pass
    return out


T = TypeVar("T")
Annotate = Callable[[pa.RecordBatch, int], T]
Progress = Callable[[int, int, str], None]


def write_annotated(
    source: Source,
    targets: list[str],
    fmt: str,
    new_fields: list[pa.Field],
    batches: Iterable[tuple[int, pa.RecordBatch, dict[str, pa.Array]]],
) -> None:
    """Write ``(part, batch, columns)`` (from :func:`annotated_batches`) to ``targets`` (one
    file, or one per input file): each batch with ``columns`` set.

    A column of the input with the same name as a new one is replaced in place; the others
    are appended in order. Every output is written to a temporary file and all are moved
    into place only after the last batch (see :class:`~grpo_cli.io.Sink`).
    """
    out_schema = _annotated_schema(source.schema, new_fields)
    with contextlib.ExitStack() as stack:
        sinks: list[Sink] = []

        def sink(index: int) -> Sink:
            while len(sinks) <= index:  # also opens the outputs of inputs with no rows
                if sinks:
                    sinks[-1].close()
                sinks.append(stack.enter_context(Sink(targets[len(sinks)], fmt, out_schema)))
            return sinks[index]

        per_part = len(targets) > 1
        for part, batch, columns in batches:
            out = _set_columns(batch, columns)
            sink(part if per_part else 0).write(out if out.schema.equals(out_schema) else out.cast(out_schema))
        sink(len(targets) - 1)
        for s in sinks:
            s.commit()


def annotated_batches(
    source: Source,
    annotate: Annotate,
    batch_rows: int | None,
    threads: int | None,
    progress: Progress | None = None,
    columns: list[str] | None = None,
) -> Iterator[tuple[int, pa.RecordBatch, T]]:
    """``(part index, batch, annotate(batch, first_row))`` for every record batch, in order.

    Batches hold ``batch_rows`` rows (default: :attr:`Source.batch_rows`, about 32 MiB).
    ``annotate`` runs on up to ``threads`` batches at once (default: one per core) while
    this thread reads the next batch and writes the previous one. ``progress(rows done,
    rows in all, pieces)`` is called as each batch is handed back; ``pieces`` says how many
    stored pieces are done, e.g. ``row groups 3/12`` (see :attr:`Source.pieces`).
    """

    def numbered() -> Iterator[tuple[int, int, pa.RecordBatch]]:
        first_row = 0
        for part, batch in source.iter_batches(batch_rows or source.batch_rows, columns):
            yield first_row, part, batch
            first_row += batch.num_rows

    def work(item: tuple[int, int, pa.RecordBatch]) -> tuple[int, pa.RecordBatch, T]:
        first_row, part, batch = item
        return part, batch, annotate(batch, first_row)

    done, total = 0, int(source.row_counts.sum())
    kind, ends = source.pieces
    for part, batch, columns in ordered_map(work, numbered(), threads or default_threads()):
        yield part, batch, columns
        done += batch.num_rows
        if progress is not None:
            progress(done, total, f"{kind} {int(np.searchsorted(ends, done, side='right'))}/{len(ends)}")


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


def advantages_file(
    input: str | list[str],
    output: str | None = None,
    *,
    output_dir: str | None = None,
    config: AdvantageConfig = AdvantageConfig(),
    prompt_col: str | None = None,
    reward_col: str | None = None,
    num_generations: int | None = None,
    round_digits: int | None = None,
    input_format: str | None = None,
    output_format: str | None = None,
    batch_rows: int | None = None,
    threads: int | None = None,
    progress: Progress | None = None,
) -> dict:
    """Compute advantages for every row of ``input`` (files, folders or globs read as one
    dataset); write them to ``output``, or one file per input into ``output_dir``.

    Returns the summary figures (see :func:`grpo_cli.report.advantage_figures`).
    The written file holds every input column unchanged plus ``advantage`` (float64),
    rounded to ``round_digits`` decimals if given.
    """
    if round_digits is not None and round_digits < 0:
        raise UsageError(f"require `round` >= 0 (found {round_digits!r})")
    with open_source(input, input_format) as source:
        targets, fmt = output_targets(source, output, output_dir, output_format)
        groups = read_groups(source, prompt_col=prompt_col, reward_col=reward_col, num_generations=num_generations)
        adv = group_advantages(groups, config, threads)
        with ThreadPoolExecutor(1) as pool:
            figures = pool.submit(advantage_figures, groups, adv, config)  # while the rows are written
            if targets:
                written = adv if round_digits is None else np.round(adv, round_digits)
                batches = annotated_batches(
                    source, lambda batch, start: {"advantage": pa.array(written[start : start + batch.num_rows])},
                    batch_rows, threads, progress,
                )
                write_annotated(source, targets, fmt, [pa.field("advantage", pa.float64())], batches)
            return figures.result()


RowAdvantages = Callable[[pa.RecordBatch, int], np.ndarray]


def row_advantages(
    source: Source,
    *,
    advantage_config: AdvantageConfig | None,
    advantage_col: str | None,
    prompt_col: str | None,
    reward_col: str | None,
    num_generations: int | None,
    threads: int | None = None,
) -> tuple[Callable[[int], str], RowAdvantages, str | None]:
    """How errors name a row (:func:`row_labeller`); ``advantages(batch, first_row)``, the
    advantage of each row of a streamed batch; and the input column they are read from.

    From ``advantage_col`` (explicit, or an ``advantage`` column found in the input) they
    are read from each batch as it streams by: one pass, nothing held per row. Otherwise
    they are computed first with ``advantage_config`` (default: seed 002's mean baseline
    per group; one group if there are no ids) and held as one float64 per row.
    """
    if advantage_config is not None and advantage_col is not None:
        raise UsageError("pass either an advantage column or an estimator, not both")
    column = None
    if advantage_config is None:
        column = schema.resolve_column(
            source.schema, role="advantage", flag="--advantage-col", explicit=advantage_col,
            candidates=schema.ADVANTAGE_CANDIDATES, required=advantage_col is not None, source=source.name,
        )
    if column is None or num_generations is not None:  # group sizes are checked up front
        groups = read_groups(
            source, prompt_col=prompt_col, reward_col=reward_col, num_generations=num_generations,
            need_reward=column is None, need_groups=False,
        )
        prompt = groups.prompt_col
    else:
        prompt = resolve_prompt_col(source, prompt_col)
    label = row_labeller(source, prompt)
    if column is None:
        adv = group_advantages(groups, advantage_config or AdvantageConfig(estimator="mean"), threads)
        return label, lambda batch, start: adv[start : start + batch.num_rows], None
    schema.check_numeric(source.schema.field(column), source.name)

    def from_column(batch: pa.RecordBatch, start: int) -> np.ndarray:
        adv = _float64(batch.column(column))
        schema.check_finite_scalars(adv, column=column, row_label=lambda row: label(start + row))
        return adv

    return label, from_column, column


def _per_row_columns(terms: dict[str, np.ndarray], adv: np.ndarray) -> dict[str, pa.Array]:
    n = terms["n_tokens"]
    empty = n == 0
    safe_n = np.where(empty, 1, n)

    def per_token(x: np.ndarray) -> pa.Array:
        return pa.array(x / safe_n, mask=empty)

    columns = {
        "advantage": pa.array(adv),
        "objective_sum": pa.array(terms["objective_sum"]),
        "objective_mean": per_token(terms["objective_sum"]),
        "n_tokens": pa.array(n),
        "clip_frac": per_token((terms["clip_low"] + terms["clip_high"]).astype(np.float64)),
        "ratio_mean": per_token(terms["ratio_sum"]),
        "ratio_max": pa.array(terms["ratio_max"], mask=empty),
        "kl_old": per_token(terms["kl_old_sum"]),
    }
    if "kl_ref_sum" in terms:
        columns["kl_ref"] = per_token(terms["kl_ref_sum"])
    return columns


def objective_file(
    input: str | list[str],
    output: str | None = None,
    *,
    output_dir: str | None = None,
    config: ObjectiveConfig = ObjectiveConfig(),
    advantage_config: AdvantageConfig | None = None,
    advantage_col: str | None = None,
    prompt_col: str | None = None,
    reward_col: str | None = None,
    num_generations: int | None = None,
    logprobs_col: str | None = None,
    old_logprobs_col: str | None = None,
    ref_logprobs_col: str | None = None,
    mask_col: str | None = None,
    input_format: str | None = None,
    output_format: str | None = None,
    batch_rows: int | None = None,
    threads: int | None = None,
    progress: Progress | None = None,
) -> dict:
    """The clipped policy objective of ``input``; per-row diagnostics written to ``output``
    (or one file per input into ``output_dir``).

    Returns the summary figures (see :class:`grpo_cli.report.ObjectiveSummary`); the scalar
    under ``objective`` is aggregated as ``config.agg`` says, and ``loss`` is its negative.
    """
    with open_source(input, input_format) as source:
        targets, fmt = output_targets(source, output, output_dir, output_format)
        columns = resolve_token_columns(source, logprobs_col, old_logprobs_col, ref_logprobs_col, mask_col)
        if config.beta > 0 and columns.ref is None:
            raise UsageError(
                f"`beta` > 0 needs reference log-probs: pass --ref-logprobs-col "
                f"(looked for {', '.join(schema.REF_LOGPROBS_CANDIDATES)})"
            )
        row_label, advantages_of, advantage_column = row_advantages(
            source, advantage_config=advantage_config, advantage_col=advantage_col,
            prompt_col=prompt_col, reward_col=reward_col, num_generations=num_generations, threads=threads,
        )
        summary = ObjectiveSummary()

        def annotate(batch: pa.RecordBatch, start: int) -> tuple[dict, np.ndarray, dict[str, pa.Array]]:
            tokens = read_tokens(batch, columns, start, row_label)
            rows_adv = advantages_of(batch, start)
            terms = row_terms(tokens, rows_adv, config)
            return terms, rows_adv, _per_row_columns(terms, rows_adv) if targets else {}

        def summarised() -> Iterator[tuple[int, pa.RecordBatch, dict[str, pa.Array]]]:
            read = None if targets else columns.names + ([advantage_column] if advantage_column else [])
            for part, batch, (terms, rows_adv, per_row) in annotated_batches(source, annotate, batch_rows, threads, progress, read):
                summary.add(terms, rows_adv)
                yield part, batch, per_row

        if targets:
            fields = [pa.field(name, pa.int64() if name == "n_tokens" else pa.float64()) for name in objective_columns(columns)]
            write_annotated(source, targets, fmt, fields, summarised())
        else:
            for _ in summarised():
                pass
    return summary.figures(config)


def objective_columns(columns: TokenColumns) -> list[str]:
    """Names of the per-row columns `grpo objective` writes, in order."""
    names = ["advantage", "objective_sum", "objective_mean", "n_tokens", "clip_frac", "ratio_mean", "ratio_max", "kl_old"]
    return names + (["kl_ref"] if columns.ref else [])


def resolve_token_columns(source: Source, new: str | None, old: str | None, ref: str | None, mask: str | None) -> TokenColumns:
    s = source.schema
    kw = {"source": source.name}
    return TokenColumns(
        new=schema.resolve_column(s, role="new log-probs", flag="--logprobs-col", explicit=new, candidates=schema.LOGPROBS_CANDIDATES, **kw),
        old=schema.resolve_column(s, role="old log-probs", flag="--old-logprobs-col", explicit=old, candidates=schema.OLD_LOGPROBS_CANDIDATES, **kw),
        ref=schema.resolve_column(s, role="reference log-probs", flag="--ref-logprobs-col", explicit=ref, candidates=schema.REF_LOGPROBS_CANDIDATES, required=False, **kw),
        mask=schema.resolve_column(s, role="token mask", flag="--mask-col", explicit=mask, required=False, **kw),
    )
