"""What a rollout file holds: which column plays which role and why, layout, groups, tokens per row, rewards, advantages, nulls.

The advantages are the default estimator's (grpo, population std, eps 0), or the preset's; the rewards are read as `grpo advantages` reads them (several reward columns, their weights, nulls, clip).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .. import options as o
from .. import passes, schema
from ..config import AdvantageConfig
from ..engines import Engine, kernels
from ..engines.base import labelled, row_labeller
from ..errors import UsageError
from ..estimators import Groups
from ..files import file_function
from ..io import Source
from ..plan import Grouping, Inputs, resolve_batches, resolve_grouping, resolve_rewards, summed_rewards
from ..summaries import GroupSummary
from ..token_columns import StepColumns, list_lengths, read_steps

__all__ = ["EXAMPLES", "OPTIONS", "inspect_file", "keywords", "plan", "render"]  # what a command is (commands.base.Command)

OPTIONS = (
    o.PRESET,
    *o.INPUTS,
    *o.GROUPING,
    o.REWARD_COL,
    o.MASK_COL,
    o.NEW_COL,
    o.OLD_COL,
    o.REF_COL,
    o.ROLLOUT_COL,
    o.ENTROPY_COL,
    o.column_option("advantage", "Advantage column."),
    o.column_option("truncated", "Truncation flag: booleans or 0/1."),
    o.column_option("sum_pi_squared", "Per-token sum of pi^2 of the optimal token baselines; its role is shown when a column plays it."),
    o.column_option("is_weights", "Per-token rollout IS weights of the optimal token baselines; its role is shown when a column plays it."),
    *o.REWARD_OPTIONS,
    *o.RUN_AND_JSON,
)
EXAMPLES = """\
Examples:

  grpo inspect sample_data/rollouts.parquet

  grpo inspect sample_data/rollouts.jsonl --json > inspect.json
"""

keywords = o.into(config=AdvantageConfig)


def render(figures: dict, console) -> None:
    """The `grpo inspect` report: roles and why, then the figures and three histograms."""
    from rich.table import Table

    from ..report import lines, render_histogram, stats_row, table

    f = figures
    roles = Table(title="grpo inspect: columns", title_justify="left")
    for column in ("role", "column", "why", "option"):
        roles.add_column(column)
    for role, r in f["columns"].items():
        roles.add_row(role, r["column"] or "-", r["why"], "--" + r["option"].replace("_", "-"))
    console.print(roles)
    cfg = f.get("advantage_config") or {"estimator": "grpo", "preset": None}
    estimator = cfg["estimator"] + (f", preset {cfg['preset']}" if cfg["preset"] else "")
    t = table("figures")
    t.add_row("rows", str(f["rows"]))
    t.add_row("layout", f["layout"])
    if f["reward"] is not None:
        t.add_row("groups", f"{f['groups']} ({f['grouped_by']})")
        t.add_row("group sizes", lines(f"{size}: {count}" for size, count in f["group_sizes"].items()))
        stats_row(t, "reward", f["reward"])
        t.add_row("zero-variance groups", f"{f['zero_variance_groups']['count']} ({f['zero_variance_groups']['share']:.2%})")
        t.add_row("unscorable rows", str(f["unscorable_rows"]))
        stats_row(t, f"advantage ({estimator})", f["advantage"])
    if f["tokens"] is not None:
        k = f["tokens"]
        t.add_row("tokens per row", f"min {k['min']}  median {k['median']}  p99 {k['p99']}  max {k['max']}")
        t.add_row("tokens", f"{k['total']}  ({k['rows_at_max']} rows at the max)")
    if f["truncated_rows"] is not None:
        t.add_row("truncated rows", str(f["truncated_rows"]))
    nulls = [f"{name} {n}" for name, n in f["nulls"].items() if n]
    t.add_row("nulls", lines(nulls) if nulls else "none")
    console.print(t)
    for key, title in (("reward_histogram", "rewards"), ("length_histogram", "tokens per row"), ("advantage_histogram", f"advantages ({estimator})")):
        if f[key] is not None:
            console.print(title)
            console.print(render_histogram(f[key]), markup=False, highlight=False)


@dataclass(frozen=True)
class InspectPlan:
    """`grpo inspect`: each role's column and why (``roles``), the groups, the reward, the token
    columns that give each row's length (``steps``), a truncation column, every column
    (``columns``, whose nulls are counted), and the ``estimator`` of the advantages shown.
    A null id or a null list is counted among the nulls, never refused; with a null id no
    groups are formed (nor rewards and advantages shown)."""

    roles: dict
    grouping: Grouping
    inputs: Inputs | None
    steps: StepColumns | None
    truncated: str | None
    columns: tuple[str, ...]
    estimator: AdvantageConfig

    def run(self, engine: Engine, source: Source) -> dict:
        """Describe the input on ``engine``; the figures of :func:`grpo_cli.inspection.inspect_figures`."""
        parts = passes.results(engine, source, inspect_batch, self, columns=list(self.columns), prompt=self.grouping.prompt)
        return self.described(engine, source, parts)

    def described(self, engine: Engine, source: Source, parts: list[dict]) -> dict:
        """The figures from every batch's :func:`inspect_batch` (``parts``, in row order) and pass 1."""
        from ..inspection import inspect_figures

        nulls = dict(zip(self.columns, np.sum([p["nulls"] for p in parts], axis=0).tolist()))
        lengths = entries = None
        if self.steps is not None:
            lengths = np.concatenate([p["length"] for p in parts])
            counts = np.concatenate([p["entries"] for p in parts])
            entries = (int(counts.min()), int(counts.max())) if len(counts) else None
        truncated = None
        if self.truncated is not None:
            label = row_labeller(source, self.grouping.prompt)
            truncated = labelled(
                label, kernels.truncation_flags, engine.read_columns(source, [self.truncated]).column(self.truncated), self.truncated
            )
        estimator, groups, rewards, adv = self.estimator, None, None, None
        if self.inputs is not None and not any(nulls[c] for c in self.grouping.columns):  # a null id is in no group: counted, no groups shown
            index, inputs, _, ahead = passes.first_pass(engine, source, self.grouping, self.inputs, estimator)
            adv, _ = passes.advantages(engine, source, self.grouping, index, inputs, estimator, ahead)
            groups, rewards = GroupSummary.of(Groups(inputs.r, index).subset(inputs.scored)), passes.scored(inputs)
        return inspect_figures(
            rows=int(source.row_counts.sum()),
            roles=self.roles,
            nulls=nulls,
            lengths=lengths,
            entries=entries,
            mask=self.steps.mask if self.steps else None,
            groups=groups,
            grouped_by=self.grouping.described,
            rewards=rewards,
            advantages=adv,
            truncated=truncated,
            estimator=estimator,
        )

    @property
    def figures(self) -> dict:
        return {}


def plan_inspect(
    source: Source,
    *,
    config: AdvantageConfig | None = None,
    prompt_col: str | list[str] | None = None,
    reward_col: str | list[str] | None = None,
    num_generations: int | None = None,
    by: str | None = None,
    by_file: bool = False,
    mask_col: str | None = None,
    logprobs_col: str | None = None,
    old_logprobs_col: str | None = None,
    ref_logprobs_col: str | None = None,
    rollout_logprobs_col: str | None = None,
    entropy_col: str | None = None,
    advantage_col: str | None = None,
    truncated_col: str | None = None,
    sum_pi_squared_col: str | None = None,
    is_weights_col: str | None = None,
    output: None = None,
) -> InspectPlan:
    """The plan of `grpo inspect` on ``source`` (see :func:`grpo_cli.inspect_file`): it never
    stops on a role it cannot resolve; it says why. It writes no rows (``output`` is refused).
    The rewards are read and the advantages shown as `grpo advantages` computes them with
    ``config`` (its reward options, ``preset``...; default: the default estimator's)."""
    if output is not None:
        raise UsageError("`grpo inspect` writes no rows; drop `output`")
    s, name = source.schema, source.name
    config = config or AdvantageConfig()
    several = reward_col is not None and not isinstance(reward_col, str)
    composite = prompt_col is not None and not isinstance(prompt_col, str) and len(prompt_col) > 1
    given: dict[str, str | None] = {
        "prompt": None if composite or prompt_col is None else (prompt_col if isinstance(prompt_col, str) else prompt_col[0]),
        "reward": None if several or reward_col is None else str(reward_col),
        "new": logprobs_col,
        "old": old_logprobs_col,
        "ref": ref_logprobs_col,
        "rollout": rollout_logprobs_col,
        "entropy": entropy_col,
        "mask": mask_col,
        "advantage": advantage_col,
        "truncated": truncated_col,
        "sum_pi_squared": sum_pi_squared_col,
        "is_weights": is_weights_col,
        "batch": None if by_file else by,
    }
    named = schema.given_columns(given)
    roles = {role: schema.explain_role(s, role, given[role], name, named) for role in given}
    # the optimal token baselines' roles: shown where a column plays them (older summaries have no key)
    for optional in ("sum_pi_squared", "is_weights"):
        if roles[optional]["column"] is None:
            del roles[optional]
    if roles["entropy"]["column"] is None and entropy_col is None:
        del roles["entropy"]  # an optional role of `grpo objective --top-entropy-quantile` alone: shown when a column plays it
    schema.positive_int(num_generations, "num_generations")
    grouping = Grouping(roles["prompt"]["column"], num_generations)
    if composite:
        grouping = resolve_grouping(source, prompt_col, num_generations, required=False)
        roles["prompt"] = {"column": ", ".join(grouping.columns), "why": "given (a composite key)", "option": "prompt_col"}
    grouping = resolve_batches(source, grouping, by, by_file)
    if by_file:
        roles["batch"] = {"column": None, "why": "each input file is a batch", "option": "by_file"}
    elif roles["batch"]["column"] is None:
        roles["batch"]["why"] += ": the input is one batch"
    if several:
        roles["reward"] = {"column": None, "why": "given", "option": "reward_col"}
    reward = reward_col if several else roles["reward"]["column"]
    rewards = resolve_rewards(source, reward, config) if reward is not None else None
    if several and rewards is not None:
        roles["reward"]["column"] = ", ".join(rewards)
    count = roles["mask"]["column"] or roles["new"]["column"] or roles["old"]["column"]
    steps = StepColumns(count, roles["mask"]["column"]) if count is not None else None
    inputs = None
    if rewards is not None:
        summed = summed_rewards(source, rewards)
        inputs = Inputs(rewards, summed=summed, reward_mask=roles["mask"]["column"] if summed else None)
    return InspectPlan(roles, grouping, inputs, steps, roles["truncated"]["column"], tuple(s.names), config)


def inspect_batch(batch: pa.RecordBatch, first_row: int, plan: InspectPlan) -> dict:
    """A batch's null count per column (a null list counts one) and, with token columns,
    each row's entries and valid tokens (a null list: none; counted among the nulls, not
    refused as a run that reads it would)."""
    out = {"nulls": np.array([batch.column(name).null_count for name in plan.columns], dtype=np.int64)}
    if plan.steps is not None:
        import pyarrow.compute as pc

        names = {plan.steps.count, plan.steps.mask} - {None}
        nulls = {n: batch.column(n) for n in names if batch.column(n).null_count}  # read as empty lists (a copy: only where there are any)
        columns = {n: pc.if_else(c.is_null(), pa.scalar([], c.type), c) for n, c in nulls.items()}
        if columns:
            batch = pa.RecordBatch.from_arrays([columns.get(n, batch.column(n)) for n in batch.schema.names], schema=batch.schema)
        if plan.steps.mask is None:  # every entry is a valid token
            entries = list_lengths(batch, plan.steps.count)
            out.update(length=entries.astype(np.int32), entries=entries)
        else:
            data = read_steps(batch, plan.steps)
            out.update(length=data.valid_lengths.astype(np.int32), entries=data.lengths)
    return out


plan = plan_inspect

inspect_file = file_function(sys.modules[__name__])
