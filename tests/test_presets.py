"""Presets reproduce each framework's default GRPO numbers. Each expected value is derived in
the test from the framework's published formula (see the README's presets section)."""

import math

import numpy as np
import pytest

from grpo_cli import AdvantageConfig, ObjectiveConfig, advantages, policy_objective
from grpo_cli.presets import PRESETS

from .conftest import run_grpo, write_jsonl_rows

# One group of four, one of two and one of one row.
REWARDS = np.array([1.0, 0.0, 0.0, 1.0, 0.5, 0.0, 0.7])
GROUPS = ["a", "a", "a", "a", "b", "b", "c"]


def framework_grpo(eps: float, singleton) -> np.ndarray:
    """(r - mean_g) / (torch.std(r_g) + eps), torch.std being the sample std (ddof 1);
    ``singleton(r)`` for a group of one row."""
    out = np.empty_like(REWARDS)
    for key in dict.fromkeys(GROUPS):
        rows = [i for i, g in enumerate(GROUPS) if g == key]
        r = REWARDS[rows]
        out[rows] = singleton(r) if len(r) == 1 else (r - r.mean()) / (r.std(ddof=1) + eps)
    return out


@pytest.mark.parametrize(
    "preset, eps, singleton",
    [
        # verl compute_grpo_outcome_advantage: epsilon 1e-6; a group of one has mean 0, std 1
        ("verl", 1e-6, lambda r: r / (1 + 1e-6)),
        # TRL: (r - mean) / (nanstd + 1e-4); nanstd of one value is NaN, and nan_to_num makes it 0
        ("trl", 1e-4, lambda r: 0.0 * r),
        # OpenRLHF group_norm: / (std + 1e-9); it asserts groups of more than one (0 here)
        ("openrlhf", 1e-9, lambda r: 0.0 * r),
        # Twinkle GRPOAdvantage 'group': / (std + 1e-8); num_generations 1 returns the rewards
        ("twinkle", 1e-8, lambda r: r),
    ],
)
def test_preset_advantages(preset, eps, singleton):
    got = advantages(REWARDS, GROUPS, AdvantageConfig(preset=preset))
    np.testing.assert_allclose(got, framework_grpo(eps, singleton), rtol=1e-14, atol=0)


def test_worked_numbers():
    # group a [1, 0, 0, 1]: mean 0.5, sample std sqrt(1/3) = 0.5773503; 0.5 / (0.5773503 + 1e-6) = 0.8660239
    a = advantages(REWARDS, GROUPS, AdvantageConfig(preset="verl"))
    assert round(a[0], 7) == 0.8660239 and round(a[6], 7) == 0.6999993


def test_explicit_options_override_a_preset():
    c = AdvantageConfig(preset="verl", eps=0.0, std="population")
    assert (c.estimator, c.std, c.eps, c.singleton) == ("grpo", "population", 0.0, "unit-std")
    assert c.given == {"eps", "std"}
    # a preset's scale options do not bind an estimator that is never scaled
    assert AdvantageConfig(preset="verl", estimator="mean").scale == "none"
    o = ObjectiveConfig(preset="verl", dual_clip=None, agg="seq-mean-token-sum")
    assert (o.dual_clip, o.agg, o.logratio_clamp) == (3.0, "seq-mean-token-sum", 20.0)  # None: not given
    assert ObjectiveConfig(preset="trl", epsilon_high=0.28).epsilon_low == 0.2


def verl_objective(new, old, adv, eps=0.2, c=3.0):
    """verl compute_policy_loss_vanilla + agg_loss('token-mean'): the per-token loss
    max(-A rho, -A clip(rho, 1 - eps, 1 + eps)), and for A < 0 min(that, -A c), averaged over
    every token; rho = exp(clamp(new - old, -20, 20)). The objective is minus the loss."""
    losses = []
    for n_row, o_row, a in zip(new, old, adv):
        for n, o in zip(n_row, o_row):
            rho = math.exp(max(-20.0, min(20.0, n - o)))
            lc = max(-a * rho, -a * min(max(rho, 1 - eps), 1 + eps))
            losses.append(min(lc, -a * c) if a < 0 else lc)
    return -sum(losses) / len(losses)


def test_verl_objective_from_rewards(tmp_path):
    new = [[-0.1, -2.0, -0.3], [-0.5], [-1.0, -0.2], [-0.05, -0.05], [-3.0], [-0.4, -0.1]]
    old = [[-0.3, -0.2, -0.3], [-0.1], [-1.5, -0.2], [-0.9, -0.05], [-0.1], [-0.4, -0.4]]
    rewards = [1.0, 0.0, 0.0, 1.0, 0.2, 0.9]
    ids = ["p", "p", "p", "p", "q", "q"]
    adv = advantages(rewards, ids, AdvantageConfig(std="sample", eps=1e-6))
    expected = verl_objective(new, old, adv)
    rows = [{"uid": i, "score": r, "log_probs": n, "old_log_probs": o} for i, r, n, o in zip(ids, rewards, new, old)]
    src = write_jsonl_rows(tmp_path / "verl.jsonl", rows)
    figures = run_grpo("objective", str(src), "--preset", "verl", "-q", "--summary-json", "-").stdout
    import json

    got = json.loads(figures)
    assert abs(got["objective"] - expected) < 1e-12 and got["config"]["preset"] == "verl"
    assert got["config"]["advantages"]["estimator"] == "grpo"
    assert policy_objective(new, old, rewards, groups=ids, preset="verl") == pytest.approx(expected, abs=1e-12)


def test_presets_command_lists_every_preset_and_value():
    shown = run_grpo("presets").stdout.decode()
    for preset in PRESETS.values():
        assert preset.name in shown and preset.source.split(":")[0] in shown.replace("\n", " ")
        for value in preset.advantage.values():
            assert (f"{value:g}" if isinstance(value, float) else str(value)) in shown


@pytest.mark.parametrize("preset, ddof, form, eps", [("verl", 1, "var", 1e-8), ("openrlhf", 0, "var-floor", 1e-8), ("trl", 1, "std", 1e-4)])
def test_presets_whiten_as_their_framework(preset, ddof, form, eps):
    """verl masked_whiten: (x - mu) * rsqrt(var_unbiased + 1e-8); OpenRLHF: (x - mu) *
    rsqrt(clamp(var_biased, min=1e-8)); TRL: (x - mu) / (std_unbiased + 1e-4). Over tokens for
    REINFORCE++-baseline: r - group mean = (0.5, -0.5, 0.25, -0.25) on (2, 1, 1, 3) tokens."""
    centered = np.array([0.5, -0.5, 0.25, -0.25])
    tokens = np.repeat(centered, [2, 1, 1, 3])
    var = tokens.var(ddof=ddof)
    s = {"var": np.sqrt(var + eps), "var-floor": np.sqrt(max(var, eps)), "std": np.sqrt(var) + eps}[form]
    config = AdvantageConfig(preset=preset, estimator="reinforce-baseline")
    got = advantages([1.0, 0.0, 0.5, 0.0], list("aabb"), config, lengths=[2, 1, 1, 3])
    np.testing.assert_allclose(got, (centered - tokens.mean()) / s, rtol=1e-14)
