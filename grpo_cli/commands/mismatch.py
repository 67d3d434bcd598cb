"""`grpo mismatch`: the train/inference mismatch of the rollout sampler's log-probs."""

from typing import Annotated, Optional

import typer

from ..config import value_range
from ..files import mismatch_file
from ..mismatch import MismatchConfig
from . import (
    check_json, column_option, CompressionOpt, config_option, DebugOpt, emit, EngineName, EngineOpt, enum_value, HiveOpt,
    InputArg, InputFormatOpt, JsonOpt, MaskColOpt, OldColOpt, OUTPUT, OutputDirOpt, OutputFormatOpt, OutputOpt,
    progress_reporter, ProgressMode, ProgressOpt, QuietOpt, RayAddressOpt, registered, reported_errors, ROLLOUT,
    RolloutColOpt, SummaryJsonOpt, ThreadsOpt,
)

MISMATCH_EXAMPLES = """\
Examples:

  grpo mismatch sample_data/rollouts_vllm.parquet

  grpo mismatch sample_data/rollouts_vllm.parquet --is-cap 3 --is-mask 0.5,2 --json > mismatch.json

  grpo mismatch sample_data/rollouts_vllm.parquet -o mismatch_rows.parquet -q
"""


@registered("mismatch", MISMATCH_EXAMPLES)
def mismatch(
    ctx: typer.Context,
    input: InputArg,
    input_format: InputFormatOpt = None,
    hive: HiveOpt = False,
    prompt_col: Annotated[Optional[str], column_option("prompt", "Prompt id column (names the worst rows).")] = None,
    old_logprobs_col: OldColOpt = None,
    rollout_logprobs_col: RolloutColOpt = None,
    mask_col: MaskColOpt = None,
    is_cap: Annotated[Optional[float], config_option(MismatchConfig, "is_cap", ROLLOUT, metavar="C")] = None,
    is_mask: Annotated[Optional[str], config_option(MismatchConfig, "is_mask", ROLLOUT, metavar="LO,HI")] = None,
    logratio_clamp: Annotated[Optional[float], config_option(MismatchConfig, "logratio_clamp", ROLLOUT)] = None,
    worst: Annotated[Optional[int], config_option(MismatchConfig, "worst", OUTPUT, metavar="N")] = None,
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
    """|old - rollout|, KL(rollout || old) as k1 and k3, perplexities, chi-square and effective sample size of the weights pi_old / pi_rollout, the share a cap or mask would touch, by token position and response length, and the worst rows. -o writes the per-row figures."""
    with reported_errors(ctx, debug):
        check_json(json_out, output, summary_json)
        config = MismatchConfig(is_cap=is_cap, is_mask=value_range(is_mask, "is_mask"), logratio_clamp=logratio_clamp, worst=worst)
        with progress_reporter(progress.value, quiet or json_out) as progress:
            figures = mismatch_file(
                input, output, output_dir=output_dir, config=config, prompt_col=prompt_col, old_logprobs_col=old_logprobs_col,
                rollout_logprobs_col=rollout_logprobs_col, mask_col=mask_col, input_format=enum_value(input_format), hive=hive,
                output_format=enum_value(output_format), compression=enum_value(compression), threads=threads, progress=progress, engine=engine.value, ray_address=ray_address,
                summary_json=summary_json,
            )
        emit(figures, "mismatch", quiet, json_out, written=(output, output_dir, summary_json))
