"""`grpo objective`: the PPO-style clipped objective from new/old per-token log-probs."""

from typing import Annotated, Optional

import typer

from ..config import AdvantageConfig, value_range
from ..files import objective_file
from ..kl import KL_ESTIMATORS
from ..objective import AGGREGATIONS, ALIASES, LOSSES, RATIO_LEVELS
from ..objective.config import ObjectiveConfig
from ..objective.rollout import REJECT_LEVELS
from ..plan.objective import OBJECTIVE_ESTIMATOR, objective_estimator
from . import (
    BaselineColOpt, choices, CLIP, column_option, CompressionOpt, config_option, DebugOpt, emit, EngineName, EngineOpt,
    enum_value, EpsOpt, ESTIMATOR, Estimator, ESTIMATOR_LIST, estimator_options, HiveOpt, InputArg, InputFormatOpt, KL,
    KL_PANEL, listing, MaskColOpt, MultiRewardOpt, NewColOpt, NumGenOpt, OldColOpt, OnNullOpt, OutputDirOpt,
    OutputFormatOpt, OutputOpt, PresetOpt, progress_reporter, ProgressMode, ProgressOpt, PromptColOpt, QuietOpt,
    RayAddressOpt, RefColOpt, registered, repeatable, reported_errors, RewardClipOpt, RewardColOpt, RewardWeightsOpt,
    ROLLOUT, RolloutColOpt, ScaleOpt, SingletonOpt, StdOpt, SummaryJsonOpt, ThreadsOpt, WhitenEpsAtOpt, WhitenEpsOpt,
    WhitenOpt, WhitenStdOpt,
)

Loss = choices("Loss", LOSSES)
Aggregation = choices("Aggregation", {**AGGREGATIONS, **ALIASES})
RatioLevel = choices("RatioLevel", RATIO_LEVELS)
RejectLevel = choices("RejectLevel", REJECT_LEVELS)

OBJECTIVE_EXAMPLES = """\
Examples:

  grpo objective sample_data/rollouts.parquet --epsilon 0.2 -o objective.parquet

  grpo objective sample_data/rollouts.parquet --agg token-mean --epsilon-high 0.28 --dual-clip 3 --beta 0.04 -q --summary-json objective.json

  grpo advantages sample_data/rollouts.parquet -o - -q | grpo objective - --ratio-level sequence -q
"""


@registered("objective", OBJECTIVE_EXAMPLES)
def objective(
    ctx: typer.Context,
    input: InputArg,
    preset: PresetOpt = None,
    input_format: InputFormatOpt = None,
    hive: HiveOpt = False,
    prompt_col: PromptColOpt = None,
    reward_col: RewardColOpt = None,
    num_generations: NumGenOpt = None,
    baseline_col: BaselineColOpt = None,
    logprobs_col: NewColOpt = None,
    old_logprobs_col: OldColOpt = None,
    ref_logprobs_col: RefColOpt = None,
    rollout_logprobs_col: RolloutColOpt = None,
    mask_col: MaskColOpt = None,
    advantage_col: Annotated[Optional[str], column_option("advantage", "Advantages: a number per row, or a list per row (one per token).")] = None,
    estimator: Annotated[Optional[Estimator], config_option(
        AdvantageConfig, "estimator", ESTIMATOR, f"Computes the advantages from the rewards: {ESTIMATOR_LIST}",
        default=f"the advantage column if there is one, else {OBJECTIVE_ESTIMATOR}")] = None,
    scale: ScaleOpt = None,
    std: StdOpt = None,
    eps: EpsOpt = None,
    singleton: SingletonOpt = None,
    reward_weights: RewardWeightsOpt = None,
    multi_reward: MultiRewardOpt = None,
    on_null: OnNullOpt = None,
    reward_clip: RewardClipOpt = None,
    kl_in_reward: Annotated[Optional[float], config_option(AdvantageConfig, "kl_in_reward", ESTIMATOR, "Its KL estimator is --kl.", metavar="BETA")] = None,
    whiten: WhitenOpt = False,
    whiten_std: WhitenStdOpt = None,
    whiten_eps_at: WhitenEpsAtOpt = None,
    whiten_eps: WhitenEpsOpt = None,
    loss: Annotated[Optional[Loss], config_option(ObjectiveConfig, "loss", CLIP, listing({n: l.help for n, l in LOSSES.items()}))] = None,
    epsilon: Annotated[Optional[float], config_option(ObjectiveConfig, "epsilon", CLIP)] = None,
    epsilon_low: Annotated[Optional[float], config_option(ObjectiveConfig, "epsilon_low", CLIP, default="--epsilon")] = None,
    epsilon_high: Annotated[Optional[float], config_option(ObjectiveConfig, "epsilon_high", CLIP, default="--epsilon")] = None,
    dual_clip: Annotated[Optional[float], config_option(ObjectiveConfig, "dual_clip", CLIP)] = None,
    delta: Annotated[Optional[float], config_option(ObjectiveConfig, "delta", CLIP)] = None,
    tau_pos: Annotated[Optional[float], config_option(ObjectiveConfig, "tau_pos", CLIP)] = None,
    tau_neg: Annotated[Optional[float], config_option(ObjectiveConfig, "tau_neg", CLIP)] = None,
    ratio_level: Annotated[Optional[RatioLevel], config_option(ObjectiveConfig, "ratio_level", CLIP)] = None,
    agg: Annotated[Optional[Aggregation], config_option(ObjectiveConfig, "agg", CLIP, listing({n: a.help for n, a in AGGREGATIONS.items()}))] = None,
    max_length: Annotated[Optional[int], config_option(ObjectiveConfig, "max_length", CLIP)] = None,
    logratio_clamp: Annotated[Optional[float], config_option(ObjectiveConfig, "logratio_clamp", CLIP)] = None,
    is_level: Annotated[Optional[str], config_option(ObjectiveConfig, "is_level", ROLLOUT, "", None, "--is", metavar="LEVEL")] = None,
    is_cap: Annotated[Optional[float], config_option(ObjectiveConfig, "is_cap", ROLLOUT, metavar="C")] = None,
    is_mask: Annotated[Optional[str], config_option(ObjectiveConfig, "is_mask", ROLLOUT, metavar="LO,HI")] = None,
    reject: Annotated[Optional[str], config_option(ObjectiveConfig, "reject", ROLLOUT, metavar="KL")] = None,
    reject_level: Annotated[Optional[RejectLevel], config_option(ObjectiveConfig, "reject_level", ROLLOUT)] = None,
    reject_threshold: Annotated[Optional[str], config_option(ObjectiveConfig, "reject_threshold", ROLLOUT, metavar="BOUNDS")] = None,
    beta: Annotated[Optional[float], config_option(ObjectiveConfig, "beta", KL_PANEL)] = None,
    kl: Annotated[Optional[KL], config_option(ObjectiveConfig, "kl", KL_PANEL, listing({n: (f.__doc__ or "").strip() for n, f in KL_ESTIMATORS.items()}))] = None,
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
    """Advantages come from an advantage column, else from the rewards (mean baseline per prompt; the whole file is one group without ids or --num-generations). The objective is maximised; the loss is its negative."""
    with reported_errors(ctx, debug):
        config = ObjectiveConfig(
            preset=enum_value(preset), loss=enum_value(loss), epsilon=epsilon, epsilon_low=epsilon_low, epsilon_high=epsilon_high, dual_clip=dual_clip,
            delta=delta, tau_pos=tau_pos, tau_neg=tau_neg, is_level=is_level, is_cap=is_cap,
            is_mask=value_range(is_mask, "is_mask"), reject=reject, reject_level=enum_value(reject_level), reject_threshold=reject_threshold,
            ratio_level=enum_value(ratio_level), agg=enum_value(agg), max_length=max_length, beta=beta, kl=enum_value(kl),
            logratio_clamp=logratio_clamp,
        )
        advantage_config = objective_estimator(enum_value(estimator), enum_value(preset), **estimator_options(
            scale=scale, std=std, eps=eps, singleton=singleton, reward_weights=reward_weights, multi_reward=multi_reward,
            on_null=on_null, reward_clip=reward_clip, kl_in_reward=kl_in_reward, kl=kl if kl_in_reward is not None else None,
            whiten=whiten, whiten_std=whiten_std, whiten_eps_at=whiten_eps_at, whiten_eps=whiten_eps))
        with progress_reporter(progress.value, quiet) as progress:
            figures = objective_file(
                input, output, output_dir=output_dir, config=config, advantage_config=advantage_config,
                advantage_col=advantage_col, prompt_col=prompt_col, reward_col=repeatable(reward_col), baseline_col=baseline_col,
                num_generations=num_generations, logprobs_col=logprobs_col, old_logprobs_col=old_logprobs_col,
                ref_logprobs_col=ref_logprobs_col, rollout_logprobs_col=rollout_logprobs_col, mask_col=mask_col,
                input_format=enum_value(input_format), hive=hive,
                output_format=enum_value(output_format), compression=enum_value(compression), threads=threads, progress=progress, engine=engine.value, ray_address=ray_address,
                summary_json=summary_json,
            )
        emit(figures, "objective", quiet, written=(output, output_dir, summary_json))
