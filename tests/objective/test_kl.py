"""KL estimators against the reference policy: k1, k2, k3, abs."""

import math

import pytest

from grpo_cli import policy_objective


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
