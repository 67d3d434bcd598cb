"""`grpo filter`: write the rows to keep."""

from typing import Annotated, Optional

import typer

from ..files import filter_file
from ..filters import TRUNCATED, FilterConfig
from . import (
    choices, column_option, CompressionOpt, config_help, config_option, DebugOpt, emit, EngineName, EngineOpt, enum_value,
    HiveOpt, InputArg, InputFormatOpt, MaskColOpt, NewColOpt, NumGenOpt, OutputDirOpt, OutputFormatOpt, OutputOpt,
    progress_reporter, ProgressMode, ProgressOpt, PromptColOpt, QuietOpt, RayAddressOpt, registered, reported_errors,
    SummaryJsonOpt, ThreadsOpt,
)

Truncated = choices("Truncated", TRUNCATED)
FILTER_EXAMPLES = """\
Examples:

  grpo filter sample_data/rollouts.parquet --drop-zero-variance -o filtered.parquet

  grpo filter sample_data/rollouts.parquet --keep-if '0<mean<1' --overlong-buffer 16 --max-length 64 -o filtered.parquet
"""
RULES = "Rules"


@registered("filter", FILTER_EXAMPLES)
def filter_rows(
    ctx: typer.Context,
    input: InputArg,
    input_format: InputFormatOpt = None,
    hive: HiveOpt = False,
    prompt_col: PromptColOpt = None,
    reward_col: Annotated[Optional[str], column_option("reward", "Reward column (or struct field column.field).")] = None,
    num_generations: NumGenOpt = None,
    truncated_col: Annotated[Optional[str], column_option("truncated", "Truncation flag: booleans or 0/1, read by --truncated.")] = None,
    mask_col: MaskColOpt = None,
    logprobs_col: NewColOpt = None,
    drop_zero_variance: Annotated[bool, typer.Option("--drop-zero-variance", help=config_help(FilterConfig, "drop_zero_variance"), rich_help_panel=RULES)] = False,
    keep_if: Annotated[Optional[str], config_option(FilterConfig, "keep_if", RULES, metavar="RULE")] = None,
    truncated: Annotated[Optional[Truncated], config_option(FilterConfig, "truncated", RULES)] = None,
    overlong_buffer: Annotated[Optional[int], config_option(FilterConfig, "overlong_buffer", RULES, metavar="B")] = None,
    max_length: Annotated[Optional[int], config_option(FilterConfig, "max_length", RULES)] = None,
    overlong_factor: Annotated[Optional[float], config_option(FilterConfig, "overlong_factor", RULES)] = None,
    output: OutputOpt = None,
    output_dir: OutputDirOpt = None,
    output_format: OutputFormatOpt = None,
    compression: CompressionOpt = None,
    threads: ThreadsOpt = None,
    engine: EngineOpt = EngineName.local,
    ray_address: RayAddressOpt = None,
    quiet: QuietOpt = False,
    summary_json: SummaryJsonOpt = None,
    progress: ProgressOpt = ProgressMode.auto,
    debug: DebugOpt = False,
) -> None:
    """Without -o (or --output-dir), only reports what would be kept and why the rest would not."""
    with reported_errors(ctx, debug):
        config = FilterConfig(drop_zero_variance=drop_zero_variance or None, keep_if=keep_if, truncated=enum_value(truncated),
                              overlong_buffer=overlong_buffer, max_length=max_length, overlong_factor=overlong_factor)
        with progress_reporter(progress.value, quiet) as progress:
            figures = filter_file(
                input, output, output_dir=output_dir, config=config, prompt_col=prompt_col, reward_col=reward_col,
                num_generations=num_generations, truncated_col=truncated_col, mask_col=mask_col, logprobs_col=logprobs_col,
                input_format=enum_value(input_format), hive=hive, output_format=enum_value(output_format), compression=enum_value(compression), threads=threads, progress=progress, engine=engine.value, ray_address=ray_address,
                summary_json=summary_json,
            )
        emit(figures, "filter", quiet, written=(output, output_dir, summary_json))
