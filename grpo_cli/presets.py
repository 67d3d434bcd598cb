"""Presets: the conventions of each framework's default GRPO run, as option values.

A preset fills the options the caller did not give (explicit options override it); what it
does not set keeps this tool's default. Each entry names the source it was read from. Where a
framework does something no option here models, ``differs`` says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .numerics import LOGRATIO_CLAMP_MAX


@dataclass(frozen=True)
class Preset:
    """``advantage``: :class:`~grpo_cli.config.AdvantageConfig` values (``estimator`` is also
    what `grpo objective` computes from rewards); ``objective``:
    :class:`~grpo_cli.objective.config.ObjectiveConfig` values; ``source``: where they were read."""

    name: str
    source: str
    advantage: dict = field(default_factory=dict)
    objective: dict = field(default_factory=dict)
    differs: str = ""


PRESETS = {
    p.name: p
    for p in (
        Preset(
            "verl",
            "verl 0.7.0 (b178a3cd): trainer/ppo/core_algos.py, examples/grpo_trainer",
            advantage={
                "estimator": "grpo",
                "scale": "group",
                "std": "sample",
                "eps": 1e-6,
                "singleton": "unit-std",
                "whiten_std": "sample",
                "whiten_eps_at": "var",
                "whiten_eps": 1e-8,
            },
            objective={"loss": "ppo", "epsilon": 0.2, "dual_clip": 3.0, "agg": "token-mean", "logratio_clamp": 20.0},
            differs="token-mean is per micro-batch in verl (one micro-batch here); the KL loss is logged apart (actor/kl_loss), so beta stays 0",
        ),
        Preset(
            "trl",
            "TRL 1.9.0 (f2cd5771): trainer/grpo_trainer.py, grpo_config.py",
            advantage={
                "estimator": "grpo",
                "scale": "group",
                "std": "sample",
                "eps": 1e-4,
                "singleton": "zero",
                "whiten_std": "sample",
                "whiten_eps_at": "std",
                "whiten_eps": 1e-4,
            },
            objective={"loss": "ppo", "epsilon": 0.2, "dual_clip": None, "agg": "token-mean", "logratio_clamp": LOGRATIO_CLAMP_MAX},
            differs="loss_type 'dapo' normalises by the generation batch's tokens (the whole file here); its CISPO caps the "
            "ratio at epsilon_high itself, from above only (pass --epsilon-low 1 --epsilon-high C-1); with vLLM its "
            "importance sampling is on by default (sequence_mask, clip_max 3): pass --is sequence_mask --is-mask 0,3",
        ),
        Preset(
            "openrlhf",
            "OpenRLHF 0.11.0 (3c3be623): trainer/ppo_utils/experience_maker.py, models/loss.py",
            advantage={
                "estimator": "grpo",
                "scale": "group",
                "std": "sample",
                "eps": 1e-9,
                "singleton": "zero",
                "whiten_std": "population",
                "whiten_eps_at": "var-floor",
                "whiten_eps": 1e-8,
            },
            objective={"loss": "ppo", "epsilon": 0.2, "dual_clip": None, "agg": "token-mean", "logratio_clamp": 20.0},
            differs="its reward clip to [-10, 10], applied after the baseline (group_norm), is not "
            "(|A| < 10 anyway in groups of fewer than 100 rows); nor its KL in the reward (init_kl_coef 0.01 by "
            "default, each token's KL clamped to +-10): pass --kl-in-reward to add one",
        ),
        Preset(
            "twinkle",
            "ModelScope Twinkle 0.1 (1a1d8845): advantage/grpo.py, loss/grpo.py",
            advantage={"estimator": "grpo", "scale": "group", "std": "sample", "eps": 1e-8, "singleton": "reward"},
            objective={"loss": "ppo", "epsilon": 0.2, "dual_clip": None, "agg": "seq-mean-token-mean", "logratio_clamp": 20.0, "tau_neg": 1.0},
            differs="its seq-mean-token-mean also counts rows without tokens (as 0); its CISPO caps the ratio at 1 + epsilon "
            "from above only (pass --epsilon-low 1)",
        ),
    )
}


def preset_values(name: str | None, part: str) -> dict:
    """The option values preset ``name`` sets for ``part`` ('advantage' or 'objective')."""
    return {} if name is None else getattr(PRESETS[name], part)
