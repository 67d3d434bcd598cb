"""Several advantage estimators side by side: their spread, rank correlations, sign flips, the groups where they differ most.

-o writes one advantage_<estimator> column per estimator. The grouping and reward options apply to every estimator; --preset sets the conventions of every estimator for the options it is not given (a preset's name in --estimators stands for its own).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .. import options as o
from .. import passes, schema
from ..compare import column_name, compare_figures, held_column, parse_estimators
from ..config import AdvantageConfig
from ..engines import Engine, kernels
from ..engines.base import labelled, row_labeller
from ..errors import UsageError, shortened
from ..estimators import GroupIndex, lookup
from ..files import file_function
from ..io import Source
from ..plan import Grouping, Inputs, Output, reads_tokens, resolve_grouping, resolve_inputs, resolve_output, resolve_steps

__all__ = ["EXAMPLES", "OPTIONS", "compare_file", "keywords", "plan", "render"]  # what a command is (commands.base.Command)

OPTIONS = (
    o.option(
        "estimators",
        str,
        "Two or more, comma-separated: an estimator or a preset's name, each with options as "
        "NAME:key=value,key=value (e.g. grpo:std=sample,eps=1e-6,rloo,verl; several numbers separated by spaces: "
        "'trl:reward_clip=-1 1,rloo'); column:NAME is a column of advantages the input holds (a trainer's own).",
        o.ESTIMATOR,
        default=...,
    ),
    o.PRESET,
    *o.INPUTS,
    *o.GROUPING,
    o.REWARD_COL,
    o.BASELINE_COL,
    o.MASK_COL,
    *o.REWARD_OPTIONS,
    o.option("top", int, "List this many of the groups where the estimators differ most.", o.OUTPUT, default=5, min=0, show_default=True),
    *o.WRITES,
    *o.RUN_AND_JSON,
)
EXAMPLES = """\
Examples:

  grpo compare sample_data/rollouts.parquet --estimators grpo,rloo,mean

  grpo compare sample_data/rollouts.parquet --estimators grpo:std=sample,eps=1e-6,verl,trl --json > compare.json

  grpo compare sample_data/rollouts.parquet --estimators grpo,rloo -o compared.parquet -q
"""

keywords = o.into(config=AdvantageConfig)


def render(figures: dict, console) -> None:
    """The `grpo compare` figures: each estimator's spread, then each pair's agreement."""
    from rich.table import Table

    f = figures
    t = Table(title=f"grpo compare: {f['rows']} rows, {f['groups']} groups", title_justify="left")
    for column in ("estimator", "mean", "std", "min", "max"):
        t.add_column(column, justify="left" if column == "estimator" else "right")
    for label, d in f["estimators"].items():
        t.add_row(label, *(f"{d[k]:.6g}" for k in ("mean", "std", "min", "max")))
    console.print(t)
    p = Table(title="pairs", title_justify="left")
    for column in ("pair", "rank correlation", "sign flips"):
        p.add_column(column, justify="left" if column == "pair" else "right")
    for pair, rho in f["rank_correlation"].items():
        p.add_row(pair, "-" if rho is None else f"{rho:.6f}", f"{f['sign_flips'][pair]:.4%}")
    console.print(p)
    if f["most_affected_groups"]:
        g = Table(title="most affected groups (largest difference between two estimators)", title_justify="left")
        for column in ("group", "rows", "max |difference|"):
            g.add_column(column, justify="left" if column == "group" else "right")
        for e in f["most_affected_groups"]:
            g.add_row(str(shortened(e["group"])), str(e["rows"]), f"{e['max_abs_difference']:.6g}")
        console.print(g)


@dataclass(frozen=True)
class ComparePlan:
    """`grpo compare`: the groups, and each estimator (its label, what it reads, its options);
    ``top``: how many of the most affected groups to list."""

    grouping: Grouping
    estimators: tuple[tuple[str, Inputs | None, AdvantageConfig | None], ...]  # (label, None, None): a column the input holds
    output: Output
    top: int = 5

    @property
    def roles(self) -> dict:
        inputs = next((inputs for _, inputs, _ in self.estimators if inputs is not None), None)
        return {"prompt": self.grouping.shown, **(inputs.roles if inputs is not None else {})}

    def run(self, engine: Engine, source: Source) -> dict:
        """Compute the estimators side by side on ``engine`` and write one column each; the
        figures of :func:`grpo_cli.compare.compare_figures`."""
        index, held, columns = self.advantages(engine, source)
        figures = self.summarized(source, index, columns)
        if self.output.targets:
            engine.write_pass(
                source,
                self.output,
                [pa.field(name, pa.float64()) for name in columns],
                kernels.row_columns,
                columns,
                columns=[],
                prompt=self.grouping.prompt,
                held=held,
            )
        return figures

    def advantages(self, engine: Engine, source: Source) -> tuple[GroupIndex, pa.Table | None, dict[str, np.ndarray]]:
        """The groups, the columns pass 1 held (to write), and each estimator's advantages by
        its written column's name (:func:`~grpo_cli.compare.column_name`)."""
        computed, hold = {}, bool(self.output.targets)
        for label, inputs, config in self.estimators:
            if inputs is not None and config is not None:
                index, rows, held, ahead = passes.first_pass(engine, source, self.grouping, inputs, config, hold=hold)
                computed[label] = passes.advantages(engine, source, self.grouping, index, rows, config, ahead)[0]
        if not computed:  # only columns: the groups alone
            index, _, held, _ = passes.first_pass(engine, source, self.grouping, None, None, hold=hold)
        held_columns = [held_column(label) for label, inputs, _ in self.estimators if inputs is None]
        table = source.read_columns(held_columns) if held_columns else None
        columns = {
            column_name(label): computed[label] if inputs is not None else _held(table, held_column(label), source)
            for label, inputs, _ in self.estimators
        }
        return index, held, columns

    def summarized(self, source: Source, index: GroupIndex, columns: dict[str, np.ndarray]) -> dict:
        """The figures of the estimators' advantages (``columns``, in the estimators' order)."""
        prompt = self.grouping.prompt

        def names(groups: np.ndarray) -> list:
            if prompt is None:
                return groups.tolist()
            return source.read_columns([prompt]).column(prompt).take(index.first[groups]).to_pylist()

        return compare_figures([label for label, _, _ in self.estimators], np.column_stack(list(columns.values())), index, names, self.top)

    @property
    def figures(self) -> dict:
        return {
            "columns": self.roles,
            "config": {label: config.figures if config else {"column": held_column(label)} for label, _, config in self.estimators},
        }


def _held(table: pa.Table | None, name: str, source: Source) -> np.ndarray:
    """Column ``name`` of advantages the input holds, float64 (a null, NaN or infinite value is
    refused, naming its row); a list per row is the row's one advantage on each token
    (:func:`~grpo_cli.engines.kernels.row_values`)."""
    assert table is not None  # read with the other held columns
    column = table.column(name)
    read = kernels.row_values if schema.is_list(column.type) else kernels.scalars
    return labelled(row_labeller(source, None), read, column, name)


def plan_compare(
    source: Source,
    *,
    estimators: str,
    config: AdvantageConfig | None = None,
    prompt_col: str | list[str] | None = None,
    reward_col: str | list[str] | None = None,
    num_generations: int | None = None,
    by: str | None = None,
    by_file: bool = False,
    baseline_col: str | None = None,
    mask_col: str | None = None,
    top: int = 5,
    output: str | None = None,
    output_dir: str | None = None,
    output_format: str | None = None,
    compression: str | None = None,
) -> ComparePlan:
    """The plan of `grpo compare` on ``source`` (see :func:`grpo_cli.compare_file`): the
    column options apply to the estimators that read those columns; the options given in
    ``config`` (its ``preset``, its reward options...) to every estimator, for the options it
    is not given (a preset's name in ``estimators`` stands for its own)."""
    config = config or AdvantageConfig()
    if "estimator" in config.given:
        raise UsageError("`estimators` names the estimators to compare; drop `estimator`")
    specs = parse_estimators(estimators, preset=config.preset, **{name: getattr(config, name) for name in config.given})
    if top < 0:
        raise UsageError(f"`top` must be >= 0 (found {top!r})")
    grouped = any(c is None or lookup(c.estimator).grouped for _, c in specs)
    grouping = resolve_grouping(
        source, prompt_col, num_generations, required=grouped, batched=any(c is not None for _, c in specs), by=by, by_file=by_file
    )
    resolved: list[tuple[str, Inputs | None, AdvantageConfig | None]] = []
    for label, config in specs:
        if config is None:
            held = held_column(label)
            schema.resolve_column(source.schema, "advantage", held, source=source.name)  # there, or the closest names
            schema.check_numeric(source.schema.field(held), source.name, "advantage")
            resolved.append((label, None, None))
            continue
        needs = lookup(config.estimator).needs
        steps = resolve_steps(
            source,
            config,
            mask_col=mask_col if reads_tokens(config) else None,
            logprobs_col=None,
            old_logprobs_col=None,
            ref_logprobs_col=None,
            values_col=None,
        )
        inputs = resolve_inputs(source, config, reward_col, baseline_col if "baseline" in needs else None, steps, mask_col=mask_col)
        resolved.append((label, inputs, config))
    computed = [config for _, config in specs if config is not None]
    for option, value, read, reader in (
        (
            "mask_col",
            mask_col,
            any(reads_tokens(c) for c in computed) or any(i.summed for _, i, _ in resolved if i),
            "an estimator that reads tokens (opo, reinforce-baseline, ...) or a list reward",
        ),
        ("baseline_col", baseline_col, any("baseline" in lookup(c.estimator).needs for c in computed), "estimator 'remax'"),
    ):
        if value is not None and not read:
            raise UsageError(f"`{option}` is read only by {reader}, and none of `estimators` is one; drop it")
    return ComparePlan(grouping, tuple(resolved), resolve_output(source, output, output_dir, output_format, compression), top)


plan = plan_compare

compare_file = file_function(sys.modules[__name__])
