"""Write the rows to keep: drop groups without signal (DAPO), outside reward bounds (OpenRLHF), truncated rows; DAPO's overlong penalty.

Without -o (or --output-dir), only reports what would be kept and why the rest would not. The rewards are read as `grpo advantages` reads them (several reward columns, their weights, nulls, clip); a row without any reward is refused.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import reduce

import numpy as np
import pyarrow as pa

from .. import options as o
from .. import passes, schema
from ..config import REWARD_OPTIONS, AdvantageConfig
from ..engines import Engine, kernels
from ..engines.base import labelled, row_labeller
from ..engines.kernels import Written
from ..errors import ColumnNotFoundError, InputError, UsageError
from ..estimators import Groups, row_inputs
from ..files import file_function
from ..filters import FilterConfig
from ..io import Source
from ..plan import Grouping, Inputs, Output, resolve_grouping, resolve_output, resolve_reward_mask, resolve_rewards, summed_rewards
from ..token_columns import StepColumns

__all__ = ["EXAMPLES", "OPTIONS", "filter_file", "keywords", "plan", "render"]  # what a command is (commands.base.Command)

OPTIONS = (
    *o.INPUTS,
    *o.GROUPING,
    o.REWARD_COL,
    o.column_option("truncated", "Truncation flag: booleans or 0/1, read by --truncated."),
    o.MASK_COL,
    o.NEW_COL,
    *o.REWARD_OPTIONS,
    *o.config_options(FilterConfig).values(),
    *o.WRITES,
    *o.RUN,
)
EXAMPLES = """\
Examples:

  grpo filter sample_data/rollouts.parquet --drop-zero-variance -o filtered.parquet

  grpo filter sample_data/rollouts.parquet --keep-if '0<mean<1' --overlong-buffer 16 --max-length 64 -o filtered.parquet
"""
keywords = o.into(config=FilterConfig, advantage_config=AdvantageConfig)


def render(figures: dict, console) -> None:
    """The `grpo filter` summary: kept, dropped, and what each rule did."""
    from ..report import roles, table

    f = figures
    t = table("grpo filter")
    t.add_row("kept", f"{f['kept']['rows']} of {f['rows']} rows, {f['kept']['groups']} of {f['groups']} groups")
    t.add_row("dropped", f"{f['dropped']['rows']} rows, {f['dropped']['groups']} groups")
    for name, label in (("zero_variance", "zero variance drops"), ("keep_if", f"keep-if {f['config']['keep_if']} drops")):
        if f[name] is not None:
            t.add_row(label, f"{f[name]['groups']} groups ({f[name]['rows']} rows)")
    if f["truncated"] is not None:
        t.add_row(f"truncated ({f['truncated']['action']})", f"{f['truncated']['rows']} rows")
    if f["overlong"] is not None:
        o = f["overlong"]
        t.add_row("overlong penalty", f"{o['rows']} rows  mean {o['penalty_mean']:.4g}  min {o['penalty_min']:.4g}")
    t.add_row("columns", roles(f["columns"]))
    if f["unused_columns"]:
        t.add_row("not used", ", ".join(f["unused_columns"]))
    console.print(t)


@dataclass(frozen=True)
class FilterPlan:
    """`grpo filter`: the groups and their ``rewards`` columns (read as ``reward_config``
    says: weights, nulls, clip), the ``truncated`` flag column, the token columns that give
    each row's length (``steps``, for the overlong penalty), and the ``mask`` column that
    masking truncated rows zeroes."""

    config: FilterConfig
    grouping: Grouping
    rewards: tuple[str, ...]
    reward_config: AdvantageConfig
    truncated: str | None
    steps: StepColumns | None
    mask: str | None
    output: Output
    unused: tuple[str, ...] = ()
    reward_mask: str | None = None  # the mask a list reward is summed over

    @property
    def roles(self) -> dict[str, str | list[str] | None]:
        return {
            "prompt": self.grouping.shown,
            "reward": self.reward if len(self.rewards) == 1 else list(self.rewards),
            "truncated": self.truncated,
            "tokens": self.steps.count if self.steps else None,
            "mask": self.mask,
        }

    @property
    def reward(self) -> str:
        """The reward column the overlong penalty rewrites (there is one when it applies)."""
        return self.rewards[0]

    def run(self, engine: Engine, source: Source) -> dict:
        """Write the rows kept on ``engine``; the figures of :func:`grpo_cli.filters.filter_figures`."""
        from ..filters import filter_figures, group_rules, overlong_penalty

        config, grouping = self.config, self.grouping
        spec = passes.rows_to_read(source, grouping, Inputs(self.rewards, reward_mask=self.reward_mask))
        label = row_labeller(source, grouping.prompt)
        table = labelled(label, engine.read_columns, source, list(dict.fromkeys([*spec.columns, *([self.truncated] if self.truncated else [])])))
        read = labelled(label, kernels.rows_read, table, 0, spec)
        index, _ = labelled(label, kernels.grouped, read, grouping, table.num_rows, source)
        found = labelled(label, row_inputs, read.rewards, list(self.rewards), self.reward_config)
        r = found.r
        if not found.scored.all():
            null = f"column {self.reward!r} is" if len(self.rewards) == 1 else f"every reward column ({', '.join(self.rewards)}) is"
            raise InputError(f"{label(int(np.flatnonzero(~found.scored)[0]))}: {null} null or NaN (`grpo filter` needs every reward)")
        groups = Groups(r, index)
        rules = group_rules(groups, config)
        keep = reduce(np.logical_and, (groups.per_row(kept) for kept in rules.values()), np.ones(len(r), dtype=bool))
        truncated = None
        if self.truncated is not None:
            truncated = labelled(label, kernels.truncation_flags, table.column(self.truncated), self.truncated)
            if config.truncated == "drop":
                keep &= ~truncated
        penalty = reward = None
        if self.steps is not None:
            from ..engines import token_kernels

            parts = passes.results(engine, source, token_kernels.row_steps, self.steps, None, columns=self.steps.names, prompt=grouping.prompt)
            penalty = overlong_penalty(passes.joined(parts, ("length",))["length"], config)
            reward = r + penalty
        figures = filter_figures(groups, rules, keep, truncated, penalty, config)
        if self.output.targets and not keep.any():  # an empty file the next command would refuse: said here, nothing written
            raise InputError(
                f"{source.name}: the rules drop every one of the {len(keep)} rows; nothing is written (run without `output` or `output_dir` to see why)"
            )
        if self.output.targets:
            mask = self.mask if config.truncated == "mask" else None  # the plan found it
            masked = truncated if mask is not None else None
            fields = [pa.field(self.reward, pa.float64())] if reward is not None else []
            fields += [source.output_schema.field(mask)] if mask is not None else []
            engine.write_pass(
                source,
                self.output,
                fields,
                filter_columns,
                self,
                keep,
                reward,
                masked,
                columns=[mask] if mask is not None else [],
                prompt=grouping.prompt,
                held=table,
            )
        return figures

    @property
    def figures(self) -> dict:
        return {"columns": self.roles, "unused_columns": list(self.unused)}


def plan_filter(
    source: Source,
    *,
    config: FilterConfig,
    advantage_config: AdvantageConfig | None = None,
    prompt_col: str | list[str] | None = None,
    reward_col: str | list[str] | None = None,
    num_generations: int | None = None,
    by: str | None = None,
    by_file: bool = False,
    truncated_col: str | None = None,
    mask_col: str | None = None,
    logprobs_col: str | None = None,
    output: str | None = None,
    output_dir: str | None = None,
    output_format: str | None = None,
    compression: str | None = None,
) -> FilterPlan:
    """The plan of `grpo filter` on ``source`` (see :func:`grpo_cli.filter_file`): the rewards
    are read as `grpo advantages` reads them, with the reward options of ``advantage_config``
    (several columns, ``reward_weights``, ...; it is given no other option); a row without any
    reward is refused."""
    s, name = source.schema, source.name
    grouped = config.drop_zero_variance or config.keep_if is not None
    grouping = resolve_grouping(source, prompt_col, num_generations, required=grouped, by=by, by_file=by_file)
    reward_config = advantage_config or AdvantageConfig()
    for option in sorted(reward_config.given - set(REWARD_OPTIONS)) + (["preset"] if reward_config.preset else []):
        raise UsageError(f"`grpo filter` reads the rewards, and `{option}` is no reward option; drop it")
    reward = resolve_rewards(source, reward_col, reward_config)
    if config.overlong_buffer is not None and len(reward) > 1:
        raise UsageError(f"the overlong penalty rewrites the reward column, and there are {len(reward)} ({', '.join(reward)}); pass one `reward_col`")
    if config.overlong_buffer is not None and reward[0] in s.names and schema.is_list(s.field(reward[0]).type):
        raise UsageError(
            f"the overlong penalty rewrites the reward, and {reward[0]!r} holds a list per row (summed); pass a `reward_col` of one number per row"
        )
    if config.overlong_buffer is not None and "." in reward[0] and reward[0] not in s.names:
        raise UsageError(f"the overlong penalty rewrites the reward, and {reward[0]!r} is a struct field; pass a top-level `reward_col`")
    counting, summed = config.overlong_buffer is not None, summed_rewards(source, reward)
    for option, value, read, reader in (
        ("truncated_col", truncated_col, config.truncated is not None, "`truncated`"),
        ("mask_col", mask_col, counting or config.truncated == "mask" or summed, "`truncated` 'mask', the overlong penalty or a list reward"),
        ("logprobs_col", logprobs_col, counting, "the overlong penalty"),
    ):
        if value is not None and not read:
            raise UsageError(f"`{option}` is read only by {reader}, and no such rule is given; drop it")
    truncated = schema.resolve_column(s, "truncated", truncated_col, required=config.truncated is not None, source=name)
    if truncated is not None and config.truncated is not None:
        field = s.field(truncated)
        if not (pa.types.is_boolean(field.type) or pa.types.is_integer(field.type)):
            raise UsageError(f"{name}: column {truncated!r} (truncation flag) must hold booleans or 0/1 (found {field.type})")
    mask = (
        schema.resolve_column(s, "mask", mask_col, required=config.truncated == "mask", source=name)
        if counting or config.truncated == "mask"
        else None
    )
    steps = None
    if config.overlong_buffer is not None:
        count = (
            mask
            or schema.resolve_column(s, "new", logprobs_col, required=False, source=name)
            or schema.resolve_column(s, "old", None, required=False, source=name)
        )
        if count is None:
            raise ColumnNotFoundError(f"{name}: the overlong penalty needs each row's length: no mask or log-probs column; pass `mask_col`")
        steps = StepColumns(count, mask)
    unused = (truncated,) if truncated is not None and config.truncated is None else ()
    return FilterPlan(
        config,
        grouping,
        reward,
        reward_config,
        truncated if config.truncated else None,
        steps,
        mask,
        resolve_output(source, output, output_dir, output_format, compression),
        unused,
        resolve_reward_mask(source, summed, mask_col),
    )


def filter_columns(
    batch: pa.RecordBatch, first_row: int, plan: FilterPlan, keep: np.ndarray, reward: np.ndarray | None, masked: np.ndarray | None
) -> Written:
    """Which rows of a batch `grpo filter` keeps, and its changed columns (all rows): the
    penalised ``reward``; the mask, 0 on every token of a ``masked`` row."""
    import pyarrow.compute as pc

    rows = slice(first_row, first_row + batch.num_rows)
    columns = {} if reward is None else {plan.reward: schema.arrow_array(reward[rows])}
    if masked is not None and plan.mask is not None:  # masked rows: the mask column is read
        mask = batch.column(plan.mask)
        lengths = pc.list_value_length(mask).to_numpy().astype(np.int64)
        flat = mask.flatten()
        values = np.where(np.repeat(masked[rows], lengths), 0, flat.to_numpy(zero_copy_only=False)).astype(flat.to_numpy(zero_copy_only=False).dtype)
        offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
        columns[plan.mask] = pa.ListArray.from_arrays(offsets, pa.array(values, type=flat.type))
    return Written(columns, keep=keep[rows])


plan = plan_filter

filter_file = file_function(sys.modules[__name__])
