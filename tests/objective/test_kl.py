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
