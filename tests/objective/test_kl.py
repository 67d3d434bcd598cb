"""KL estimators against the reference policy: k1, k2, k3, abs."""

import math

import pytest

from grpo_cli import ObjectiveConfig, policy_objective
from grpo_cli.errors import UsageError


@pytest.mark.parametrize(
    "kl, d, expected",
    [
        ("k1", 0.5, 0.5),
        ("k2", 0.5, 0.125),
        ("k3", 0.5, math.exp(-0.5) + 0.5 - 1),
        ("k3", -0.5, math.exp(0.5) - 0.5 - 1),
        ("abs", -0.5, 0.5),
    ],
)
def test_each_kl_estimator(kl, d, expected):
    # A = 0, so the objective is -beta * KL; two tokens with the same d, seq-mean-token-sum
    new, old, ref = [[-1.0, -1.0]], [[-1.0, -1.0]], [[-1.0 - d, -1.0 - d]]
    out = policy_objective(new, old, advantage_values=[0.0], ref_log_probs=ref, beta=0.1, kl=kl, details=True)
    assert out["kl_ref"] == pytest.approx(2 * expected, rel=1e-14)
    assert out["objective"] == pytest.approx(-0.1 * 2 * expected, rel=1e-14)
    assert out["loss"] == -out["objective"]


def test_kl_clamp_as_verl_low_var_kl():
    # verl's low_var_kl clamps the k3 value to [-10, 10]: new -3.0, ref -0.3, d = -2.7:
    # k3 = e^2.7 - 2.7 - 1 = 11.18, clamped to 10; the other token, d = 0.5, is under the bound
    new, old, ref = [[-3.0, -1.0]], [[-3.0, -1.0]], [[-0.3, -1.5]]
    k3_far, k3_near = math.exp(2.7) - 2.7 - 1, math.exp(-0.5) + 0.5 - 1
    assert k3_far == pytest.approx(11.1797, abs=1e-4)
    out = policy_objective(new, old, advantage_values=[0.0], ref_log_probs=ref, beta=0.1, kl_clamp=10.0, details=True)
    assert out["kl_ref"] == pytest.approx(10.0 + k3_near, rel=1e-14)
    assert out["objective"] == pytest.approx(-0.1 * (10.0 + k3_near), rel=1e-14)
    assert policy_objective(new, old, advantage_values=[0.0], ref_log_probs=ref, beta=0.1) == pytest.approx(-0.1 * (k3_far + k3_near), rel=1e-14)


def test_kl_weight_ratio_as_trl_bias_correction():
    # TRL's use_bias_correction_kl: beta * rho * k3. rho = 2 on token 0, 1 on token 1; A = 0
    new, old, ref = [[-1.0, -1.0]], [[-1.0 - math.log(2.0), -1.0]], [[-1.5, -1.5]]
    k3 = math.exp(-0.5) + 0.5 - 1  # d = new - ref = 0.5 on both
    out = policy_objective(new, old, advantage_values=[0.0], ref_log_probs=ref, beta=0.1, kl_weight="ratio", details=True)
    assert out["objective"] == pytest.approx(-0.1 * (2.0 + 1.0) * k3, rel=1e-14)
    assert out["kl_ref"] == pytest.approx(2 * k3, rel=1e-14)  # the KL itself, unweighted
    assert out["config"]["kl_weight"] == "ratio"


def test_kl_weight_and_clamp_as_trl_numbers():
    # TRL 1.16 dapo, beta 0.04, k3 against the reference: use_bias_correction_kl True (1.16's
    # default) -0.27017320985828325, False (1.9's) -0.269898298154189 (ref-trl-1.16.0.json)
    from .trl_case import REF, trl_loss

    assert trl_loss("ppo", beta=0.04, ref_log_probs=REF, kl_weight="ratio") == pytest.approx(-0.27017320985828325, rel=1e-12)
    assert trl_loss("ppo", beta=0.04, ref_log_probs=REF) == pytest.approx(-0.269898298154189, rel=1e-12)


@pytest.mark.parametrize("option", [{"kl_weight": "ratio"}, {"kl_clamp": 10.0}])
def test_kl_options_need_the_penalty(option):
    with pytest.raises(UsageError, match="applies to the KL penalty"):
        ObjectiveConfig(**option)
    with pytest.raises(UsageError):
        ObjectiveConfig(beta=0.1, **({"kl_weight": "both"} if "kl_weight" in option else {"kl_clamp": 0.0}))


def test_kl_agg_aggregates_the_penalty_on_its_own_as_openrlhf():
    """OpenRLHF 0.11.2 (trainer/ray/ppo_actor.py:318-338): loss = policy loss + beta *
    aggregate_loss(kl, mask), token_level_loss True by default (models/loss.py:11-39), so the
    KL loss is a token mean whatever the policy loss's aggregation; each token's kl is
    clamp(k(new - ref), -10, 10), k1 by default (models/utils.py:95-113).

    new = old (rho 1, so the PPO term is A on every token), A = (1, 0.5); d = new - ref:
    row 0 [0.5], row 1 [0, 12, -0.3]. k1 clamped: [0.5], [0, 10, -0.3].
    policy, seq-mean-token-mean: (1 + 0.5) / 2 = 0.75;
    KL token mean: (0.5 + 0 + 10 - 0.3) / 4 = 2.55; objective 0.75 - 0.1 * 2.55 = 0.495.
    As one term per token (no kl_agg): 0.75 - 0.1 * (0.5 + 9.7 / 3) / 2."""
    new = [[-1.0], [-1.0, -1.0, -1.0]]
    ref = [[-1.5], [-1.0, -13.0, -0.7]]
    adv = [1.0, 0.5]
    out = policy_objective(new, new, advantage_values=adv, ref_log_probs=ref, preset="openrlhf", agg="seq-mean-token-mean", beta=0.1, details=True)
    assert out["objective"] == pytest.approx(0.495, rel=1e-14)
    assert out["kl_ref"] == pytest.approx(2.55, rel=1e-14)
    assert out["config"]["kl_agg"] == "token-mean" and out["config"]["kl_clamp"] == 10.0
    plain = policy_objective(new, new, advantage_values=adv, ref_log_probs=ref, agg="seq-mean-token-mean", beta=0.1, kl="k1", kl_clamp=10.0)
    assert plain == pytest.approx(0.75 - 0.1 * (0.5 + 9.7 / 3) / 2, rel=1e-14)
    given = policy_objective(
        new, new, advantage_values=adv, ref_log_probs=ref, agg="seq-mean-token-mean", beta=0.1, kl="k1", kl_clamp=10.0, kl_agg="token-mean"
    )
    assert given == out["objective"]


@pytest.mark.parametrize("kl, kl_loss", [("k1", -0.003125001909211278), ("k3", 0.02251630905084312)])
def test_kl_agg_as_openrlhf_numbers(kl, kl_loss):
    # ref-openrlhf-0.11.2.json: PolicyLoss seq-mean-token-mean 0.16501004950549064, plus beta 0.1
    # times its KL loss, a token mean of clamp(k(new - ref), +-10) computed in float32 (.float())
    from .openrlhf_twinkle_case import ADV, MASK, NEW, OLD, REF

    got = policy_objective(
        NEW, OLD, advantage_values=ADV, mask=MASK, ref_log_probs=REF, preset="openrlhf", agg="seq-mean-token-mean", beta=0.1, kl=kl
    )
    assert -got == pytest.approx(0.16501004950549064 + 0.1 * kl_loss, rel=1e-7)


def test_kl_agg_needs_the_penalty():
    with pytest.raises(UsageError, match="`kl_agg` applies to the KL penalty"):
        ObjectiveConfig(kl_agg="token-mean")
    assert ObjectiveConfig(beta=0.1, kl_agg="token-mean", agg="token-mean").kl_agg is None  # the loss's own
