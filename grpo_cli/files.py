"""The file API, what the commands call: open the input, make the plan, run an engine.

The options are the keywords of each command's ``plan_<command>`` (:mod:`grpo_cli.plan`,
imported by the function that runs the command), declared there once; these functions add how to read the input and how to run: ``threads``,
``batch_rows``, ``progress``, and ``engine`` (``local``, or ``ray`` with ``ray_address``); and
``summary_json``, a path (``-``: stdout) for the returned figures as JSON, written with the
other outputs (see :func:`run`).
"""

from __future__ import annotations

import inspect
import json
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, ContextManager

from .engines import Engine, Progress, make_engine
from .errors import check_keywords
from .io import Source, Staged, Writes, open_source
from .plan import AdvantagesPlan, plan_advantages

if TYPE_CHECKING:
    from .plan.compare import ComparePlan
    from .plan.filter import FilterPlan
    from .plan.inspect import InspectPlan
    from .plan.mismatch import MismatchPlan
    from .plan.objective import ObjectivePlan


def json_text(figures: dict) -> str:
    """The figures as indented JSON, ending in a newline (``summary_json``, and ``--json``)."""
    return json.dumps(figures, indent=2) + "\n"


def _check(options: dict[str, Any], plan: Callable, name: str) -> None:
    """Refuse a keyword that is no option of ``plan``."""
    check_keywords(options, [p for p in inspect.signature(plan).parameters if p not in ("source", "output")], f"{name}()")


def _with_plan(figures: dict, plan: AdvantagesPlan | ObjectivePlan | MismatchPlan | FilterPlan | ComparePlan | InspectPlan) -> dict:
    """The engine's figures and the plan's (which column plays which role...); ``config`` merged."""
    extra = plan.figures
    if not extra:
        return figures
    return {**figures, **extra, "config": {**figures.get("config", {}), **extra.get("config", {})}}


def run(command: str, make_plan: Callable, open_input: Callable[..., ContextManager[Source]], output: str | None, engine: Engine,
        options: dict[str, Any], summary_json: str | None = None) -> dict:
    """Open the input with ``open_input`` (given the paths the run writes), make the plan of
    ``command`` with ``make_plan``, run it on ``engine``, and write the figures as JSON to
    ``summary_json`` (``-``: stdout) if given.

    Every path written is checked as soon as the input files are listed, before any of them is
    read (none is an input or another output; see :meth:`~grpo_cli.io.Writes.check`). Every
    output, the summary JSON included, is staged as a temporary file and all are committed
    together once the run has succeeded (see :class:`~grpo_cli.io.Outputs`): a failure or an
    interrupt leaves every target as it was.
    """
    _check(options, make_plan, f"{command}_file")
    writes = Writes(output, options.get("output_dir"), options.get("output_format"), summary_json)
    with engine.outputs as outputs, open_input(writes=writes) as source:
        plan = make_plan(source, output=output, **options)
        summary = Staged(summary_json, outputs) if summary_json is not None else None
        figures = _with_plan(getattr(engine, command)(source, plan), plan)
        if summary is not None:
            summary.write_text(json_text(figures))
        outputs.commit()
        return figures


def advantages_file(
    input: str | list[str],
    output: str | None = None,
    *,
    input_format: str | None = None,
    hive: bool = False,
    batch_rows: int | None = None,
    threads: int | None = None,
    progress: Progress | None = None,
    engine: str = "local",
    ray_address: str | None = None,
    summary_json: str | None = None,
    **options: Any,
) -> dict:
    """Compute advantages for every row of ``input`` (files, folders or globs read as one
    dataset; with ``hive``, ``key=value`` folders are columns too); write them to ``output``,
    or one file per input into ``output_dir``.

    ``options``: ``config`` (an :class:`~grpo_cli.AdvantageConfig`), ``prompt_col``,
    ``reward_col``, ``num_generations``, ``round_digits``, ``output_dir``, ``output_format``, ``compression``
    (see :func:`grpo_cli.plan.plan_advantages`). Returns the summary figures (see
    :func:`grpo_cli.summaries.advantage_figures`) and ``columns``, which column played which
    role. The written file holds every input column
    unchanged plus ``advantage`` (float64), rounded to ``round_digits`` decimals if given.
    """
    return run("advantages", plan_advantages, partial(open_source, input, input_format, hive=hive), output,
               make_engine(engine, ray_address, threads=threads, batch_rows=batch_rows, progress=progress),
               options, summary_json)


def objective_file(
    input: str | list[str],
    output: str | None = None,
    *,
    input_format: str | None = None,
    hive: bool = False,
    batch_rows: int | None = None,
    threads: int | None = None,
    progress: Progress | None = None,
    engine: str = "local",
    ray_address: str | None = None,
    summary_json: str | None = None,
    **options: Any,
) -> dict:
    """The policy objective of ``input`` (read as :func:`advantages_file` reads it); per-row
    diagnostics written to ``output`` (or one file per input into ``output_dir``).

    ``options``: ``config`` (an :class:`~grpo_cli.ObjectiveConfig`), ``advantage_config``,
    ``advantage_col``, ``prompt_col``, ``reward_col``, ``num_generations``, the token columns
    ``logprobs_col``, ``old_logprobs_col``, ``ref_logprobs_col``, ``rollout_logprobs_col``, ``mask_col``, and
    ``output_dir``, ``output_format``, ``compression`` (see :func:`grpo_cli.plan.objective.plan_objective`, which also
    says where advantages come from). Returns the summary figures (see
    :meth:`grpo_cli.objective.summary.ObjectiveSummary.figures`): ``objective`` aggregated as
    ``config.agg`` says, and ``loss``, its negative; ``columns``, which column played which
    role; ``unused_columns``, list columns that look like a mask or reference but played
    none; ``config.advantages``, where the advantages came from.
    """
    from .plan.objective import plan_objective

    return run("objective", plan_objective, partial(open_source, input, input_format, hive=hive), output,
               make_engine(engine, ray_address, threads=threads, batch_rows=batch_rows, progress=progress),
               options, summary_json)


def mismatch_file(
    input: str | list[str],
    output: str | None = None,
    *,
    input_format: str | None = None,
    hive: bool = False,
    batch_rows: int | None = None,
    threads: int | None = None,
    progress: Progress | None = None,
    engine: str = "local",
    ray_address: str | None = None,
    summary_json: str | None = None,
    **options: Any,
) -> dict:
    """The train/rollout mismatch report of ``input`` (read as :func:`advantages_file` reads
    it); the per-row figures written to ``output`` (or one file per input into ``output_dir``).

    ``options``: ``config`` (a :class:`~grpo_cli.MismatchConfig`), ``prompt_col`` (names the
    worst rows), ``old_logprobs_col``, ``rollout_logprobs_col``, ``mask_col``, ``output_dir``,
    ``output_format``, ``compression`` (see :func:`grpo_cli.plan.mismatch.plan_mismatch`). Returns the figures of
    :meth:`grpo_cli.mismatch.MismatchSummary.figures` and ``columns``.
    """
    from .plan.mismatch import plan_mismatch

    return run("mismatch", plan_mismatch, partial(open_source, input, input_format, hive=hive), output,
               make_engine(engine, ray_address, threads=threads, batch_rows=batch_rows, progress=progress),
               options, summary_json)


def filter_file(
    input: str | list[str],
    output: str | None = None,
    *,
    input_format: str | None = None,
    hive: bool = False,
    batch_rows: int | None = None,
    threads: int | None = None,
    progress: Progress | None = None,
    engine: str = "local",
    ray_address: str | None = None,
    summary_json: str | None = None,
    **options: Any,
) -> dict:
    """Write the rows of ``input`` that the rules keep to ``output`` (or one file per input
    into ``output_dir``; without either, only report).

    ``options``: ``config`` (a :class:`~grpo_cli.FilterConfig`), ``prompt_col``,
    ``reward_col``, ``num_generations``, ``truncated_col``, ``mask_col``, ``logprobs_col``,
    ``output_dir``, ``output_format``, ``compression`` (see :func:`grpo_cli.plan.filter.plan_filter`). Returns the
    figures of :func:`grpo_cli.filters.filter_figures` and ``columns``.
    """
    from .plan.filter import plan_filter

    return run("filter", plan_filter, partial(open_source, input, input_format, hive=hive), output,
               make_engine(engine, ray_address, threads=threads, batch_rows=batch_rows, progress=progress),
               options, summary_json)


def compare_file(
    input: str | list[str],
    output: str | None = None,
    *,
    input_format: str | None = None,
    hive: bool = False,
    batch_rows: int | None = None,
    threads: int | None = None,
    progress: Progress | None = None,
    engine: str = "local",
    ray_address: str | None = None,
    summary_json: str | None = None,
    **options: Any,
) -> dict:
    """Several estimators on ``input`` side by side; one ``advantage_<label>`` column each
    written to ``output`` (or one file per input into ``output_dir``).

    ``options``: ``estimators`` (e.g. ``"grpo:std=sample,eps=1e-6,rloo,verl"``), ``prompt_col``,
    ``reward_col``, ``num_generations``, ``baseline_col``, ``mask_col``, ``top``, ``output_dir``,
    ``output_format``, ``compression`` (see :func:`grpo_cli.plan.compare.plan_compare`). Returns the figures of
    :func:`grpo_cli.compare.compare_figures`, ``columns`` and each estimator's ``config``.
    """
    from .plan.compare import plan_compare

    return run("compare", plan_compare, partial(open_source, input, input_format, hive=hive), output,
               make_engine(engine, ray_address, threads=threads, batch_rows=batch_rows, progress=progress),
               options, summary_json)


def inspect_file(
    input: str | list[str],
    *,
    input_format: str | None = None,
    hive: bool = False,
    batch_rows: int | None = None,
    threads: int | None = None,
    progress: Progress | None = None,
    engine: str = "local",
    ray_address: str | None = None,
    summary_json: str | None = None,
    **options: Any,
) -> dict:
    """What ``input`` holds: which column plays which role and why, its layout, rows, groups,
    tokens per row, rewards, advantages under the default estimator, nulls per column.

    ``options``: the column options ``prompt_col``, ``reward_col``, ``num_generations``,
    ``mask_col``, ``logprobs_col``, ``old_logprobs_col``, ``ref_logprobs_col``,
    ``rollout_logprobs_col``, ``advantage_col``, ``truncated_col`` (see
    :func:`grpo_cli.plan.inspect.plan_inspect`). Returns the figures of
    :func:`grpo_cli.inspection.inspect_figures`.
    """
    from .plan.inspect import plan_inspect

    return run("inspect", plan_inspect, partial(open_source, input, input_format, hive=hive), None,
               make_engine(engine, ray_address, threads=threads, batch_rows=batch_rows, progress=progress),
               options, summary_json)
