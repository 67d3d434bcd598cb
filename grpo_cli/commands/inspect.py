"""`grpo inspect`: what a rollout file holds."""

from typing import Annotated, Optional

import typer

from ..files import inspect_file
from . import (
    check_json, column_option, DebugOpt, emit, EngineName, EngineOpt, enum_value, HiveOpt, InputArg, InputFormatOpt,
    JsonOpt, MaskColOpt, NewColOpt, NumGenOpt, OldColOpt, progress_reporter, ProgressMode, ProgressOpt, PromptColOpt,
    QuietOpt, RayAddressOpt, RefColOpt, registered, reported_errors, RolloutColOpt, SummaryJsonOpt, ThreadsOpt,
)

INSPECT_EXAMPLES = """\
Examples:

  grpo inspect sample_data/rollouts.parquet

  grpo inspect sample_data/rollouts.jsonl --json > inspect.json
"""


@registered("inspect", INSPECT_EXAMPLES)
def inspect(
    ctx: typer.Context,
    input: InputArg,
    input_format: InputFormatOpt = None,
    hive: HiveOpt = False,
    prompt_col: PromptColOpt = None,
    reward_col: Annotated[Optional[str], column_option("reward", "Reward column (or struct field column.field).")] = None,
    num_generations: NumGenOpt = None,
    mask_col: MaskColOpt = None,
    logprobs_col: NewColOpt = None,
    old_logprobs_col: OldColOpt = None,
    ref_logprobs_col: RefColOpt = None,
    rollout_logprobs_col: RolloutColOpt = None,
    advantage_col: Annotated[Optional[str], column_option("advantage", "Advantage column.")] = None,
    truncated_col: Annotated[Optional[str], column_option("truncated", "Truncation flag: booleans or 0/1.")] = None,
    threads: ThreadsOpt = None,
    engine: EngineOpt = EngineName.local,
    ray_address: RayAddressOpt = None,
    quiet: QuietOpt = False,
    json_out: JsonOpt = False,
    summary_json: SummaryJsonOpt = None,
    progress: ProgressOpt = ProgressMode.auto,
    debug: DebugOpt = False,
) -> None:
    """The advantages are the default estimator's (grpo, population std, eps 0)."""
    with reported_errors(ctx, debug):
        check_json(json_out, None, summary_json)
        with progress_reporter(progress.value, quiet or json_out) as progress:
            figures = inspect_file(
                input, prompt_col=prompt_col, reward_col=reward_col, num_generations=num_generations, mask_col=mask_col,
                logprobs_col=logprobs_col, old_logprobs_col=old_logprobs_col, ref_logprobs_col=ref_logprobs_col,
                rollout_logprobs_col=rollout_logprobs_col, advantage_col=advantage_col, truncated_col=truncated_col,
                input_format=enum_value(input_format), hive=hive, threads=threads, progress=progress, engine=engine.value, ray_address=ray_address,
                summary_json=summary_json,
            )
        emit(figures, "inspect", quiet, json_out, written=(summary_json,))
