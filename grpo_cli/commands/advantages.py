"""`grpo advantages`: one advantage per row from the rewards of its group."""

from typing import Annotated, Optional

import typer

from ..config import AdvantageConfig
from ..files import advantages_file
from ..kl import KL_ESTIMATORS
from ..numerics import ROUND_DIGITS_MAX
from . import (
    BaselineColOpt, column_option, CompressionOpt, config_option, DebugOpt, emit, EngineName, EngineOpt, enum_value, EpsOpt,
    ESTIMATOR, Estimator, ESTIMATOR_LIST, estimator_options, GammaOpt, HiveOpt, InputArg, InputFormatOpt, KL, KlInRewardOpt,
    LamOpt, listing, MaskColOpt, MultiRewardOpt, NewColOpt, NumGenOpt, OldColOpt, OnNullOpt, OUTPUT, OutputDirOpt,
    OutputFormatOpt, OutputOpt, PresetOpt, progress_reporter, ProgressMode, ProgressOpt, PromptColOpt, QuietOpt,
    RayAddressOpt, RefColOpt, registered, repeatable, reported_errors, RewardClipOpt, RewardColOpt, RewardWeightsOpt,
    ScaleOpt, SingletonOpt, StdOpt, SummaryJsonOpt, ThreadsOpt, WhitenEpsAtOpt, WhitenEpsOpt, WhitenOpt, WhitenStdOpt,
)

ADVANTAGES_EXAMPLES = """\
Examples:

  grpo advantages sample_data/rollouts.parquet -o advantages.parquet

  grpo advantages sample_data/rollouts.jsonl --estimator rloo --std sample --eps 1e-8 -o rloo.jsonl

  cat sample_data/rollouts.jsonl | grpo advantages - -o - --round 4 -q > annotated.jsonl
"""


@registered("advantages", ADVANTAGES_EXAMPLES)
def advantages(
    ctx: typer.Context,
    input: InputArg,
    preset: PresetOpt = None,
    input_format: InputFormatOpt = None,
    hive: HiveOpt = False,
    prompt_col: PromptColOpt = None,
    reward_col: RewardColOpt = None,
    num_generations: NumGenOpt = None,
    baseline_col: BaselineColOpt = None,
    mask_col: MaskColOpt = None,
    logprobs_col: NewColOpt = None,
    old_logprobs_col: OldColOpt = None,
    ref_logprobs_col: RefColOpt = None,
    values_col: Annotated[Optional[str], column_option("values", "Per-token critic values (a list per row), read by --estimator gae.")] = None,
    estimator: Annotated[Optional[Estimator], config_option(AdvantageConfig, "estimator", ESTIMATOR, ESTIMATOR_LIST)] = None,
    scale: ScaleOpt = None,
    std: StdOpt = None,
    eps: EpsOpt = None,
    singleton: SingletonOpt = None,
    gamma: GammaOpt = None,
    lam: LamOpt = None,
    reward_weights: RewardWeightsOpt = None,
    multi_reward: MultiRewardOpt = None,
    on_null: OnNullOpt = None,
    reward_clip: RewardClipOpt = None,
    kl_in_reward: KlInRewardOpt = None,
    kl: Annotated[Optional[KL], config_option(AdvantageConfig, "kl", ESTIMATOR, listing({n: (f.__doc__ or "").strip() for n, f in KL_ESTIMATORS.items()}))] = None,
    whiten: WhitenOpt = False,
    whiten_std: WhitenStdOpt = None,
    whiten_eps_at: WhitenEpsAtOpt = None,
    whiten_eps: WhitenEpsOpt = None,
    output: OutputOpt = None,
    output_dir: OutputDirOpt = None,
    round_digits: Annotated[Optional[int], typer.Option("--round", help=f"Round the written advantages to N decimals, 0 to {ROUND_DIGITS_MAX} (the summary is never rounded).", rich_help_panel=OUTPUT)] = None,
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
    """A group of one row, or of equal rewards, gets advantage 0 (never NaN)."""
    with reported_errors(ctx, debug):
        config = AdvantageConfig(preset=enum_value(preset), estimator=enum_value(estimator), **estimator_options(
            scale=scale, std=std, eps=eps, singleton=singleton, gamma=gamma, lam=lam, reward_weights=reward_weights,
            multi_reward=multi_reward, on_null=on_null, reward_clip=reward_clip, kl_in_reward=kl_in_reward, kl=kl,
            whiten=whiten, whiten_std=whiten_std, whiten_eps_at=whiten_eps_at, whiten_eps=whiten_eps))
        with progress_reporter(progress.value, quiet) as progress:
            figures = advantages_file(
                input, output, output_dir=output_dir, config=config, prompt_col=prompt_col, reward_col=repeatable(reward_col),
                baseline_col=baseline_col, num_generations=num_generations, mask_col=mask_col, logprobs_col=logprobs_col,
                old_logprobs_col=old_logprobs_col, ref_logprobs_col=ref_logprobs_col, values_col=values_col, round_digits=round_digits,
                input_format=enum_value(input_format), hive=hive, output_format=enum_value(output_format), compression=enum_value(compression),
                threads=threads, progress=progress, engine=engine.value, ray_address=ray_address,
                summary_json=summary_json,
            )
        emit(figures, "advantages", quiet, written=(output, output_dir, summary_json))
