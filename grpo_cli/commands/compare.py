"""`grpo compare`: several advantage estimators side by side."""

from typing import Annotated

import typer

from ..files import compare_file
from . import (
    BaselineColOpt, check_json, CompressionOpt, DebugOpt, emit, EngineName, EngineOpt, enum_value, ESTIMATOR, HiveOpt,
    InputArg, InputFormatOpt, JsonOpt, MaskColOpt, NumGenOpt, OUTPUT, OutputDirOpt, OutputFormatOpt, OutputOpt,
    progress_reporter, ProgressMode, ProgressOpt, PromptColOpt, QuietOpt, RayAddressOpt, registered, repeatable,
    reported_errors, RewardColOpt, SummaryJsonOpt, ThreadsOpt,
)

COMPARE_EXAMPLES = """\
Examples:

  grpo compare sample_data/rollouts.parquet --estimators grpo,rloo,mean

  grpo compare sample_data/rollouts.parquet --estimators grpo:std=sample,eps=1e-6,verl,trl --json > compare.json

  grpo compare sample_data/rollouts.parquet --estimators grpo,rloo -o compared.parquet -q
"""


@registered("compare", COMPARE_EXAMPLES)
def compare(
    ctx: typer.Context,
    input: InputArg,
    estimators: Annotated[str, typer.Option(help="Two or more, comma-separated: an estimator or a preset's name, each with options as "
                                                 "NAME:key=value,key=value (e.g. grpo:std=sample,eps=1e-6,rloo,verl).",
                                            rich_help_panel=ESTIMATOR, show_default=False)],
    input_format: InputFormatOpt = None,
    hive: HiveOpt = False,
    prompt_col: PromptColOpt = None,
    reward_col: RewardColOpt = None,
    num_generations: NumGenOpt = None,
    baseline_col: BaselineColOpt = None,
    mask_col: MaskColOpt = None,
    top: Annotated[int, typer.Option(min=0, help="List this many of the groups where the estimators differ most.", rich_help_panel=OUTPUT)] = 5,
    output: OutputOpt = None,
    output_dir: OutputDirOpt = None,
    output_format: OutputFormatOpt = None,
    compression: CompressionOpt = None,
    threads: ThreadsOpt = None,
    engine: EngineOpt = EngineName.local,
    ray_address: RayAddressOpt = None,
    quiet: QuietOpt = False,
    json_out: JsonOpt = False,
    summary_json: SummaryJsonOpt = None,
    progress: ProgressOpt = ProgressMode.auto,
    debug: DebugOpt = False,
) -> None:
    """-o writes one advantage_<estimator> column per estimator."""
    with reported_errors(ctx, debug):
        check_json(json_out, output, summary_json)
        with progress_reporter(progress.value, quiet or json_out) as progress:
            figures = compare_file(
                input, output, output_dir=output_dir, estimators=estimators, prompt_col=prompt_col, reward_col=repeatable(reward_col),
                num_generations=num_generations, baseline_col=baseline_col, mask_col=mask_col, top=top,
                input_format=enum_value(input_format), hive=hive, output_format=enum_value(output_format), compression=enum_value(compression), threads=threads, progress=progress, engine=engine.value, ray_address=ray_address,
                summary_json=summary_json,
            )
        emit(figures, "compare", quiet, json_out, written=(output, output_dir, summary_json))
