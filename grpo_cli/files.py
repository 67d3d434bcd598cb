"""The file API, what the two commands call: open the input, make the plan, run an engine."""

from __future__ import annotations

from .config import AdvantageConfig, ObjectiveConfig
from .engines import LocalEngine, Progress
from .io import open_source
from .plan import plan_advantages, plan_objective


def advantages_file(
    input: str | list[str],
    output: str | None = None,
    *,
    output_dir: str | None = None,
    config: AdvantageConfig | None = None,
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

    Returns the summary figures (see :func:`grpo_cli.summaries.advantage_figures`).
    The written file holds every input column unchanged plus ``advantage`` (float64),
    rounded to ``round_digits`` decimals if given.
    """
    with open_source(input, input_format) as source:
        plan = plan_advantages(
            source, config=config, prompt_col=prompt_col, reward_col=reward_col, num_generations=num_generations,
            round_digits=round_digits, output=output, output_dir=output_dir, output_format=output_format,
        )
        return LocalEngine(threads=threads, batch_rows=batch_rows, progress=progress).advantages(source, plan)


def objective_file(
    input: str | list[str],
    output: str | None = None,
    *,
    output_dir: str | None = None,
    config: ObjectiveConfig | None = None,
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
    """The policy objective of ``input``; per-row diagnostics written to ``output`` (or one
    file per input into ``output_dir``).

    Advantages come from ``advantage_col`` (or an ``advantage`` column; a list column gives
    one per token), else from the rewards with ``advantage_config`` (see
    :func:`grpo_cli.plan.plan_objective`). Returns the summary figures (see
    :meth:`grpo_cli.summaries.ObjectiveSummary.figures`): ``objective`` aggregated as
    ``config.agg`` says, and ``loss``, its negative.
    """
    with open_source(input, input_format) as source:
        plan = plan_objective(
            source, config=config, advantage_config=advantage_config, advantage_col=advantage_col, prompt_col=prompt_col,
            reward_col=reward_col, num_generations=num_generations, logprobs_col=logprobs_col,
            old_logprobs_col=old_logprobs_col, ref_logprobs_col=ref_logprobs_col, mask_col=mask_col,
            output=output, output_dir=output_dir, output_format=output_format,
        )
        return LocalEngine(threads=threads, batch_rows=batch_rows, progress=progress).objective(source, plan)
