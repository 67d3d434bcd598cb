"""Presets: a framework at one release, every estimator and loss of it, as option values.

A preset fills the options the caller did not give. For :class:`~grpo_cli.config.AdvantageConfig`
it takes, in order, its values for the estimator in use (``estimators``), then its base
values (``advantage``); for :class:`~grpo_cli.objective.config.ObjectiveConfig` its values for
the loss in use (``losses``), then the loss's own definition (GSPO's sequence ratio), then its
base values (``objective``). What none of them sets keeps this tool's default; an option a
given estimator or loss does not take is never set by a preset.

Each preset names the release it was read from (``package``, ``commit``, ``files``), what
the framework ships and the preset form that reproduces it (``ships``), and what it ships
that no option reproduces yet, with the reason (``missing``). ``verl`` is the newest verl;
``verl@0.7`` is verl 0.7.0's own conventions; ``verl@0.9`` names the newest too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .numerics import LOGRATIO_CLAMP_MAX


@dataclass(frozen=True)
class Preset:
    """``advantage`` and ``objective``: the base option values; ``estimators`` and ``losses``:
    the values for one estimator or loss (by this tool's name), over the base; ``ships``:
    ``"kind name"`` of what the framework ships -> the options (with ``--preset name``) that
    reproduce it; ``missing``: ``"kind name"`` -> why no option reproduces it yet; ``aliases``:
    the framework's aggregation names that mean another aggregation at this release (over
    :data:`grpo_cli.objective.ALIASES`)."""

    name: str
    framework: str
    version: str
    package: str
    commit: str
    files: str
    advantage: dict = field(default_factory=dict)
    objective: dict = field(default_factory=dict)
    estimators: dict[str, dict] = field(default_factory=dict)
    losses: dict[str, dict] = field(default_factory=dict)
    ships: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    kl_clamped: tuple[str, ...] | None = None  # the KL estimators the objective's `kl_clamp` applies to (None: every one)
    aliases: dict[str, str] = field(default_factory=dict)

    @property
    def source(self) -> str:
        """Where the values were read: the package, its commit, the files."""
        return f"{self.package} ({self.commit}): {self.files}"

    def values(self, part: str, name: str) -> tuple[dict, dict]:
        """The values for estimator (``part`` 'advantage') or loss ('objective') ``name``, and the base values."""
        specific = self.estimators if part == "advantage" else self.losses
        return specific.get(name, {}), getattr(self, part)


# verl ------------------------------------------------------------------------------------

VERL_ADVANTAGE = {
    "estimator": "grpo",
    "scale": "group",
    "std": "sample",
    "eps": 1e-6,
    "singleton": "unit-std",
    "whiten_std": "sample",
    "whiten_eps_at": "var",
    "whiten_eps": 1e-8,
}
VERL_ESTIMATORS = {
    "rloo": {"scale": "none", "singleton": "reward"},  # compute_rloo_outcome_advantage: never scaled, a lone row keeps r
    "opo": {"singleton": "reward"},
    "reinforce-baseline": {"singleton": "reward"},  # mean 0 for a lone row: r, then whitened
    "passk": {"singleton": "error"},  # compute_grpo_passk_outcome_advantage refuses a group of one (ValueError)
    # compute_remax_outcome_advantage: the reward-to-go of score - beta * kld (apply_kl_penalty), minus b
    "remax": {"kl_at": "after-baseline"},
}
# kl_clamp: the KL loss's low_var_kl (k3, its default kl_loss_type) is clamped to [-10, 10]
VERL_OBJECTIVE = {
    "loss": "ppo",
    "epsilon": 0.2,
    "dual_clip": 3.0,
    "agg": "token-mean",
    "logratio_clamp": 20.0,
    "kl": "k3",
    "kl_clamp": 10.0,
    "empty_rows": "count",
    "micro_batch_rule": "global",
}
VERL_SHIPS = {
    "estimator grpo": "--estimator grpo",
    "estimator grpo (norm_adv_by_std_in_grpo false)": "--estimator grpo --scale none",
    "estimator rloo": "--estimator rloo",
    "estimator rloo_vectorized": "--estimator rloo --singleton zero",
    "estimator opo": "--estimator opo",
    "estimator gpg": "--estimator gpg (a group of one row: alpha * r, --singleton unit-std)",
    "estimator grpo_passk": "--estimator passk",
    "estimator reinforce_plus_plus_baseline": "--estimator reinforce-baseline",
    "estimator reinforce_plus_plus": "--estimator reinforce --gamma G",
    "estimator remax": "--estimator remax",
    "estimator remax with kl in reward (a per-token reward-to-go)": "--estimator remax --kl-in-reward BETA",
    "estimator gae": "--estimator gae --gamma G --lam L",
    "kl in reward (kl_penalty kl)": "--kl-in-reward BETA --kl k1",
    "loss vanilla": "--loss ppo",
    "loss gspo": "--loss gspo",
    "loss sapo": "--loss sapo",
    "loss gpg": "--loss gpg",
    "loss cispo": "--loss cispo",
    "loss geo_mean": "--loss gmpo",
    "aggregation token-mean": "--agg token-mean",
    "aggregation seq-mean-token-sum": "--agg seq-mean-token-sum",
    "aggregation seq-mean-token-mean": "--agg seq-mean-token-mean",
    "kl loss (use_kl_loss, low_var_kl)": "--beta 0.001 --kl k3",
    "loss clip_cov": "--loss clip_cov --seed S (its draw is numpy's, not torch's)",
    "loss kl_cov": "--loss kl_cov",
    "rollout_is token": "--is token --is-cap 2",
    "rollout_is sequence": "--is sequence --is-cap 2",
    "rollout_is_batch_normalize": "--is-normalize",
    "bypass_mode (ppo_clip, reinforce)": "--bypass ppo_clip|reinforce",
    "kl loss low_var_kl (clamped to [-10, 10]), kl, abs, mse (not clamped)": "--beta B --kl k3|k1|abs|k2",
}

VERL = Preset(
    "verl",
    "verl",
    "0.9.1",
    "verl==0.9.1",
    "PyPI wheel; no release tag",
    "trainer/ppo/core_algos.py, trainer/ppo/rollout_corr_helper.py, workers/utils/losses.py, trainer/config/actor/actor.yaml",
    VERL_ADVANTAGE,
    VERL_OBJECTIVE,
    VERL_ESTIMATORS,
    losses={
        "gspo": {"agg": "token-mean"},  # 0.9.1 uses the configured loss_agg_mode (core_algos.py:1604-1607)
        "gspo-token": {"agg": "token-mean"},
        "gmpo": {"logratio_clamp": LOGRATIO_CLAMP_MAX},  # geo_mean takes exp of the raw log-ratios
    },
    ships={
        **VERL_SHIPS,
        "aggregation token-sum": "--agg token-sum",
        "aggregation seq-mean-token-sum-norm": "--agg seq-mean-token-sum-norm --max-length LOSS_SCALE_FACTOR",
        "micro-batches (ppo_micro_batch_size_per_gpu; the mini-batch's tokens and rows in each)": "--micro-batch-size N (the preset sets --micro-batch-rule global)",
        "seq-mean-token-sum-norm, loss_scale_factor null (L: the micro-batch's longest response)": "--agg seq-mean-token-sum-norm --micro-batch-size N",
        "rollout_is token, 'L_U' threshold (IcePop)": "--is token --is-mask L,U",
        "rollout_is sequence, 'L_U' threshold (IcePop)": "--is sequence --is-mask L,U",
        "rollout_rs token_k1, seq_sum_k1, seq_mean_k1 ('L_U' or 'U')": "--reject token_k1 --reject-threshold L,U",
        "rollout_rs token_k2/k3, seq_sum_k2/k3, seq_mean_k2/k3": "--reject seq_mean_k3 --reject-threshold U",
        "rollout_rs seq_max_k2, seq_max_k3": "--reject seq_max_k3 --reject-threshold U",
        "rollout_rs several options (comma list)": "--reject token_k1,seq_max_k3 --reject-threshold L_U,U",
        "bypass_mode with rollout_rs (rejected tokens stay in the token count)": "--bypass ppo_clip --reject ... --reject-counted",
        "estimator gdpo": "--multi-reward normalize-then-sum-tokens (one --reward-col per reward)",
        "loss dppo_tv": "--loss dppo_tv",
        "loss dppo_kl": "--loss dppo_kl",
        "loss dro": "--loss dro --dro-beta B (verl has no default)",
        "estimator optimal_token_baseline": "--estimator optimal-token-baseline (reads old_log_probs and sum_pi_squared)",
        "estimator tir_optimal_token_baseline": "--estimator tir-optimal-token-baseline (reads old_log_probs and sum_pi_squared)",
        "estimator (tir_)optimal_token_baseline with rollout correction (W weighted by the IS weights squared)": (
            "the same, reading the batch's rollout_is_weights (--is-weights-col)"
        ),
        "estimator grpo_vectorized (float32 group mean and std, two-pass variance)": "--estimator grpo --group-stats float32",
    },
    kl_clamped=("k3",),  # kl_penalty clamps low_var_kl alone to [-10, 10]
)

VERL_07 = Preset(
    "verl@0.7",
    "verl",
    "0.7.0",
    "verl==0.7.0",
    "tag v0.7.0, f9c855f7",
    "trainer/ppo/core_algos.py, trainer/ppo/rollout_corr_helper.py, workers/actor/dp_actor.py, trainer/config/actor/actor.yaml",
    VERL_ADVANTAGE,
    {**VERL_OBJECTIVE, "empty_rows": "skip", "micro_batch_rule": "row-weighted"},  # per micro-batch, rows without tokens left out
    {**VERL_ESTIMATORS, "reinforce": {"masked_steps": "restart"}},  # the return restarts after a masked token (core_algos.py:608-611)
    losses={
        "gspo": {"agg": "seq-mean-token-mean"},  # forced (core_algos.py:1060)
        "gspo-token": {"agg": "seq-mean-token-mean"},
        "gmpo": {"logratio_clamp": LOGRATIO_CLAMP_MAX},
    },
    ships={
        **VERL_SHIPS,
        "rollout_rs token": "--reject k1 --reject-threshold U",
        "rollout_rs sequence": "--reject k1 --reject-level sequence-sum --reject-threshold U",
        "rollout_rs geometric": "--reject k1 --reject-level sequence-mean --reject-threshold U",
        "rollout_token_veto_threshold": "--reject-veto V",
        "aggregation seq-mean-token-sum-norm": "--agg token-sum-norm --max-length LOSS_SCALE_FACTOR",
        "micro-batches (ppo_micro_batch_size_per_gpu; agg_loss on each, times its rows / the mini-batch's)": "--micro-batch-size N (the preset sets --micro-batch-rule row-weighted)",
        "estimator reinforce_plus_plus, masks with gaps (the return restarts after a masked token)": "--estimator reinforce (the preset sets --masked-steps restart)",
        # utils/groupwise.py:54-74: with no device given, .to(device=<the torch.cuda module>) raises
        "estimator grpo_vectorized (float32, one-pass variance floored at 1e-6; a trainer run fails with a TypeError, "
        "its numbers are those of VERL_FORCE_DEVICE set or pytest)": "--estimator grpo --group-stats float32-one-pass",
    },
    kl_clamped=("k3",),  # kl_penalty clamps low_var_kl alone to [-10, 10]
)

# TRL -------------------------------------------------------------------------------------

TRL_ADVANTAGE = {
    "estimator": "grpo",
    "scale": "group",
    "std": "sample",
    "eps": 1e-4,
    "singleton": "zero",
    "whiten_std": "sample",
    "whiten_eps_at": "std",
    "whiten_eps": 1e-4,
}
TRL_ESTIMATORS = {"rloo": {"scale": "none", "kl_in_reward": 0.05, "kl": "k1"}}  # RLOOTrainer: never scaled, beta 0.05 in the reward
# 1.9.0's; kl_weight 'none' (use_bias_correction_kl False) is this tool's default
TRL_OBJECTIVE = {
    "loss": "ppo",
    "epsilon": 0.2,
    "dual_clip": None,
    "agg": "token-mean",
    "logratio_clamp": LOGRATIO_CLAMP_MAX,
    "max_length": 256,
    "empty_rows": "count",
}
TRL_LOSSES: dict[str, dict] = {
    "gspo": {"agg": "token-mean", "logratio_clamp": LOGRATIO_CLAMP_MAX},  # importance_sampling_level sequence, loss_type dapo
    "gspo-token": {"agg": "token-mean", "logratio_clamp": LOGRATIO_CLAMP_MAX},
    "cispo": {"cispo_clip": "epsilon-high"},  # min(rho, epsilon_high), epsilon_high = epsilon unless given
    # experimental GMPOTrainer: an empty row's weight is exp(0); its KL is a plain k3 (no use_bias_correction_kl)
    "gmpo": {"epsilon": 0.4, "gmpo_empty": "advantage", "kl_weight": "none"},
}
TRL_SHIPS = {
    "estimator GRPOTrainer (scale_rewards group, batch, none)": "--estimator grpo --scale group|batch|none",
    "estimator multi_objective_aggregation normalize_then_sum": "--multi-reward normalize-then-sum",
    "estimator RLOOTrainer": "--estimator rloo",
    "estimator RLOOTrainer normalize_advantages": "--estimator rloo --whiten",
    "estimator experimental AsyncGRPO": "--estimator grpo --std population --eps 1e-8",
    "loss_type dapo": "--loss ppo",
    "loss_type bnpo": "--agg bnpo",
    "loss_type grpo": "--agg grpo",
    "loss_type dr_grpo": "--agg dr_grpo",
    "loss_type sapo": "--loss sapo",
    "loss_type cispo": "--loss cispo (--epsilon-high 5, as TRL recommends)",
    "loss_type vespo": "--loss vespo",
    "loss_type luspo (importance_sampling_level sequence)": "--loss gspo --agg seq-mean-token-sum",
    "importance_sampling_level sequence (GSPO)": "--loss gspo",
    "delta": "--delta DELTA",
    "loss experimental GMPO (a row without tokens adds its A)": "--loss gmpo",
    "loss RLOOTrainer (the ratio of the row's probabilities)": "--loss rloo",
    # TRL corrects only with use_vllm=True (its default: False), as --preset trl does not without --is
    "vllm_importance_sampling_mode sequence_mask (on with use_vllm)": "--is sequence_mask --is-mask 0,3",
    "vllm_importance_sampling_mode token_mask": "--is token_mask --is-mask 0,3",
    "vllm_importance_sampling_mode token_truncate": "--is token_truncate --is-cap 3",
    "vllm_importance_sampling_mode sequence_truncate": "--is sequence_truncate --is-cap 3",
    "vllm_importance_sampling_clip_min (truncate)": "--is-floor C_MIN",
    "off_policy_mask_threshold (OPSM)": "--off-policy-mask DELTA",
    "top_entropy_quantile (the high-entropy token mask)": "--top-entropy-quantile RHO (the entropies in --entropy-col)",
}

TRL = Preset(
    "trl",
    "TRL",
    "1.16.0",
    "trl==1.16.0",
    "PyPI wheel; no release tag",
    "trainer/grpo_trainer.py, trainer/grpo_config.py, trainer/rloo_trainer.py, trainer/rloo_config.py",
    TRL_ADVANTAGE,
    {**TRL_OBJECTIVE, "max_length": 512, "kl_weight": "ratio"},  # max_completion_length, use_bias_correction_kl: changed in 1.16
    TRL_ESTIMATORS,
    TRL_LOSSES,
    ships={**TRL_SHIPS, "loss_type luspo (token level)": "--agg luspo", "beta (KL loss, k3, times the ratio)": "--beta BETA"},
)

TRL_19 = Preset(
    "trl@1.9",
    "TRL",
    "1.9.0",
    "trl==1.9.0",
    "tag v1.9.0, 35def3ee",
    "trainer/grpo_trainer.py, trainer/grpo_config.py, trainer/rloo_trainer.py, experimental/ppo/ppo_trainer.py",
    TRL_ADVANTAGE,
    TRL_OBJECTIVE,
    {
        **TRL_ESTIMATORS,
        # experimental PPOTrainer: GAE lambda 0.95, KL 0.05 per token in the reward, verl-like whitening
        "gae": {"lam": 0.95, "kl_in_reward": 0.05, "kl": "k1", "whiten_std": "sample", "whiten_eps_at": "var", "whiten_eps": 1e-8},
    },
    TRL_LOSSES,
    ships={
        **TRL_SHIPS,
        "loss_type luspo (token level: the rows x padded width mean, the padding at ratio 1)": "--agg luspo",
        "beta (KL loss, k3)": "--beta BETA",
        "estimator experimental PPOTrainer (GAE), a row that fills the generation width": "--estimator gae",
    },
    missing={
        "estimator experimental PPOTrainer, a row shorter than the width": "its score sits one position past the last token, on a pad "
        "token, where the value model's V_L is kept: the score counts as gamma (lambda score + (1 - lambda) V_L), and a file of the "
        "row's tokens holds no V_L (run with TRL's code)",
    },
    aliases={"luspo": "luspo-padded"},  # grpo_trainer.py:3143-3146: the per-token loss times n_i, its mean over rows x padded width
)

# OpenRLHF --------------------------------------------------------------------------------

OPENRLHF = Preset(
    "openrlhf",
    "OpenRLHF",
    "0.11.2",
    "openrlhf==0.11.2",
    "PyPI wheel; no release tag",
    "trainer/ppo_utils/experience_maker.py, models/loss.py, models/utils.py, cli/train_ppo_ray.py",
    {
        "estimator": "grpo",
        "scale": "group",
        "std": "sample",
        "eps": 1e-9,
        "singleton": "zero",
        "whiten_std": "population",
        "whiten_eps_at": "var-floor",
        "whiten_eps": 1e-8,
        "advantage_clip": (-10.0, 10.0),  # reward clip_range, applied after the baseline
    },
    # the KL loss (kl.use_loss): estimator k1 by default, each token's value clamped to [-10, 10]
    # (models/utils.py:95-113), a token mean whatever the policy loss's aggregation (ppo_actor.py:318-338)
    {
        "loss": "ppo",
        "epsilon": 0.2,
        "dual_clip": None,
        "agg": "token-mean",
        "logratio_clamp": 20.0,
        "empty_rows": "skip",
        "kl": "k1",
        "kl_clamp": 10.0,
        "kl_agg": "token-mean",
    },
    {
        "rloo": {"scale": "none"},
        # the KL is in the reward by default (init_coef 0.01, k1), per token for these
        # a masked position inside a row is a step of reward and value 0 (experience_maker.py: rewards and values x action_mask)
        "reinforce": {"kl_in_reward": 0.01, "kl": "k1", "kl_reward_clamp": 10.0, "masked_steps": "count"},
        "gae": {"kl_in_reward": 0.01, "kl": "k1", "kl_reward_clamp": 10.0, "masked_steps": "count"},
    },
    {"gspo": {"agg": "seq-mean-token-mean", "logratio_clamp": LOGRATIO_CLAMP_MAX}},  # forced, and no clamp
    ships={
        "estimator group_norm": "--estimator grpo",
        "estimator rloo": "--estimator rloo",
        "estimator dr_grpo": "--estimator drgrpo",
        "estimator reinforce_baseline": "--estimator reinforce-baseline",
        "estimator reinforce": "--estimator reinforce --gamma G",
        "estimator gae": "--estimator gae --gamma G --lam L",
        "policy_loss_type ppo": "--loss ppo",
        "dual_clip": "--dual-clip C",
        "policy_loss_type gspo": "--loss gspo",
        "loss_agg_mode seq-mean-token-mean": "--agg seq-mean-token-mean",
        "kl use_loss (init_coef, estimator k1; clamped to [-10, 10], a token mean)": "--beta BETA --kl k1|k2|k3",
        "is_correction token, mask, ratio (IcePop)": "--is token --is-mask 0.5,5",
        "is_correction token, clip, ratio (TIS)": "--is token --is-cap 5 --is-floor 0.5",
        # k1 here is rollout - old, so OpenRLHF's bounds [L, U] on exp(mean(old - rollout)) invert
        "is_correction seq, mask, ratio": "--is token --reject k1 --reject-level sequence-mean --reject-threshold 1/U,1/L --reject-counted",
        "estimator flash_reinforce": "--estimator flash-reinforce",
        "is_correction token, mask, binary_kl or tv [0, DELTA]": "--is token --reject binary_kl|tv --reject-threshold DELTA --reject-counted",
        "is_correction seq, mask, binary_kl or tv [0, DELTA] (FlashREINFORCE)": "--is token --reject binary_kl|tv --reject-level sequence-mean "
        "--reject-threshold DELTA --reject-counted",
        "policy_loss_type gspo with is_correction (the ratio new / rollout)": "--loss gspo --old-logprobs-col ROLLOUT_COLUMN",
        "estimator gae and reinforce, masks with gaps (a masked position is a step of reward and value 0)": "--estimator gae|reinforce (the preset sets --masked-steps count)",
        "kl in reward for group_norm, rloo, dr_grpo, reinforce_baseline (init_kl_coef 0.01)": "--kl-in-reward 0.01 --kl k1 --kl-at after-baseline "
        "--kl-reward-clamp 10 "
        "(not set by the preset: it makes the advantages per token, which `grpo objective` does not take)",
    },
    missing={},
)

# Twinkle ---------------------------------------------------------------------------------

# num_generations 1 (every group one row): the batch is the baseline (advantage/grpo.py:48-55)
TWINKLE_ADVANTAGE = {"estimator": "grpo", "scale": "group", "std": "sample", "eps": 1e-8, "singleton": "batch"}
TWINKLE_ESTIMATORS: dict[str, dict] = {"rloo": {"singleton": "error"}}  # RLOOAdvantage refuses num_generations <= 1 (rloo.py:45-48)
TWINKLE_OBJECTIVE = {
    "loss": "ppo",
    "epsilon": 0.2,
    "dual_clip": None,
    "agg": "seq-mean-token-mean",
    "logratio_clamp": 20.0,
    "tau_neg": 1.0,
    "max_length": 1024,
    "empty_rows": "count",
    "micro_batch_rule": "mean",
}
TWINKLE_LOSSES: dict[str, dict] = {
    "gspo": {"logratio_clamp": 20.0},
    "gspo-token": {"logratio_clamp": 20.0},
    "cispo": {"cispo_clip": "upper", "agg": "token-mean"},  # min(rho, 1 + epsilon): from above only; token mean
}
TWINKLE_SHIPS = {
    "estimator GRPOAdvantage (scale group, batch, none)": "--estimator grpo --scale group|batch|none",
    "estimator RLOOAdvantage (scale group, batch, none)": "--estimator rloo --scale group|batch|none",
    "estimator GRPOAdvantage num_generations 1 (group: r; batch, none: the batch mean as baseline)": "--estimator grpo --scale group|batch|none",
    "loss grpo": "--loss ppo",
    "loss gspo": "--loss gspo",
    "loss sapo": "--loss sapo",
    "loss cispo": "--loss cispo",
    "loss bnpo": "--agg token-mean",
    "loss dr_grpo": "--agg seq-mean-token-sum-norm",
    "beta (KL, k3)": "--beta BETA",
    "micro-batches (gradient accumulation: the step averages the micro-batches' losses)": "--micro-batch-size N (the preset sets --micro-batch-rule mean)",
}

TWINKLE = Preset(
    "twinkle",
    "Twinkle",
    "0.5.1",
    "twinkle-kit==0.5.1",
    "PyPI wheel; no release tag",
    "advantage/grpo.py, advantage/rloo.py, advantage/gae.py, loss/grpo.py",
    TWINKLE_ADVANTAGE,
    TWINKLE_OBJECTIVE,
    {**TWINKLE_ESTIMATORS, "gae": {"lam": 0.95, "whiten_std": "population", "whiten_eps_at": "std", "whiten_eps": 1e-8}},
    TWINKLE_LOSSES,
    ships={
        **TWINKLE_SHIPS,
        "estimator GAEAdvantage": "--estimator gae",
        "estimator GAEAdvantage kl_coef": "--estimator gae --kl-in-reward BETA --kl k1",
        "loss ppo": "--agg token-mean",
        "loss ppo_value (values, old_values, returns; value_clip)": "--loss ppo_value --value-clip C "
        "(returns: GAEAdvantage's, `grpo advantages --estimator gae`'s token_return)",
    },
)

TWINKLE_01 = Preset(
    "twinkle@0.1",
    "Twinkle",
    "0.1",
    "twinkle-kit==0.1",
    "tag v0.1, 4e3a6dba",
    "advantage/grpo.py, advantage/rloo.py, loss/grpo.py",
    TWINKLE_ADVANTAGE,
    # a row without tokens and a per-row advantage: loss/grpo.py:146-149 raises (RuntimeError)
    {**TWINKLE_OBJECTIVE, "empty_rows": "refuse"},
    TWINKLE_ESTIMATORS,
    TWINKLE_LOSSES,
    ships={
        **TWINKLE_SHIPS,
        "a row without tokens, advantages per row (refused, as Twinkle 0.1 fails: RuntimeError); per-token advantages count it as 0": (
            "--empty-rows refuse (the preset sets it)"
        ),
    },
)

PRESETS = {p.name: p for p in (VERL, VERL_07, TRL, TRL_19, OPENRLHF, TWINKLE, TWINKLE_01)}
ALIASES = {"verl@0.9": "verl", "trl@1.16": "trl", "openrlhf@0.11": "openrlhf", "twinkle@0.5": "twinkle"}  # the newest release, by its version
NAMES = (*PRESETS, *ALIASES)

# What changed between the releases a framework's presets are read from: (item, older, newer)
CHANGES = {
    ("verl@0.7", "verl"): (
        ("GSPO's aggregation", "seq-mean-token-mean, forced", "loss_agg_mode (token-mean)"),
        ("seq-mean-token-sum-norm", "sum / constant", "sum / (rows x constant)"),
        ("rows without tokens in seq-mean-*", "left out (per micro-batch)", "counted (the whole mini-batch)"),
        ("micro-batches", "each aggregated alone, weighted by its rows", "the mini-batch's tokens and rows in each"),
        ("aggregation token-sum", "absent", "new"),
        ("REINFORCE++ return at a masked token", "restarts", "carried through"),
        ("estimators gdpo, optimal_token_baseline, tir_optimal_token_baseline", "absent", "new"),
        ("losses dppo_tv, dppo_kl, dro", "absent", "new"),
        ("rollout rejection", "token, sequence, geometric on pi_old / pi_rollout, veto", "token/seq_sum/seq_mean/seq_max k1-k3"),
        ("IcePop thresholds 'L_U'", "absent", "new"),
        ("grpo_vectorized's float32 variance", "one-pass, floored at 1e-6 (fails in a trainer run)", "two-pass, no floor"),
    ),
    ("trl@1.9", "trl"): (
        ("max_completion_length (dr_grpo's constant)", "256", "512"),
        ("use_bias_correction_kl", "False", "True"),
        ("luspo's aggregation (token level)", "luspo-padded: mean over rows x padded width", "seq-mean-token-sum: mean of the row sums"),
        ("experimental PPOTrainer", "shipped", "removed"),
    ),
    ("twinkle@0.1", "twinkle"): (
        ("GAEAdvantage", "absent", "lambda 0.95, whitened (population std + 1e-8)"),
        ("loss ppo (token mean)", "absent", "new"),
        ("loss ppo_value (clipped value loss)", "absent", "new"),
        ("a row without tokens, advantages per row", "RuntimeError", "counted as 0"),
    ),
}


def lookup(name: str) -> Preset:
    """Preset ``name`` (or the newest release named by its version, ``verl@0.9``)."""
    return PRESETS[ALIASES.get(name, name)]


def preset_values(name: str | None, part: str, chosen: str) -> tuple[dict, dict]:
    """Preset ``name``'s values for estimator or loss ``chosen`` (``part``: 'advantage' or
    'objective') and its base values; ``({}, {})`` without a preset."""
    return ({}, {}) if name is None else lookup(name).values(part, chosen)
