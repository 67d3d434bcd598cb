"""VESPO (TRL 1.16): REINFORCE weighted by a gamma function of the row's ratio product."""

import math

import pytest

from grpo_cli import ObjectiveConfig, policy_objective
from grpo_cli.errors import UsageError

from .references import ratios


def phi(log_w: float, k: float, lam: float) -> float:
    log_w = min(max(log_w, math.log(1e-8)), 20.0)
    lam = max(lam, 1e-4)
    return math.exp(lam + k * log_w - lam * math.exp(log_w))


# the slow reference (tests/objective/references.py)
def reference(new, old, adv, config) -> float:
    log_w = sum(math.log(r) for r in ratios(new, old, config))
    pos, neg = phi(log_w, config.vespo_k_pos, config.vespo_lambda_pos), phi(log_w, config.vespo_k_neg, config.vespo_lambda_neg)
    return sum((pos if a >= 0 else neg) * a * n for a, n in zip(adv, new))


REFERENCES = {"vespo": reference}


def test_by_hand():
    # on-policy, w = 1: phi(1) = e^(lambda + 0 - lambda) = 1, the plain A log pi
    assert policy_objective([[-0.5, -1.0]], [[-0.5, -1.0]], advantage_values=[2.0], loss="vespo") == pytest.approx(-3.0, rel=1e-14)
    # the row's log-ratios sum to log 2 (w = 2): A > 0, phi = e^3 2^2 e^-6 = 4 e^-3;
    # A < 0, phi = e^2 2^3 e^-4 = 8 e^-2
    new, old = [[-0.5, -1.0]], [[-0.5 - math.log(2.0) / 2, -1.0 - math.log(2.0) / 2]]
    assert policy_objective(new, old, advantage_values=[1.0], loss="vespo") == pytest.approx(4 * math.exp(-3) * -1.5, rel=1e-13)
    assert policy_objective(new, old, advantage_values=[-1.0], loss="vespo") == pytest.approx(8 * math.exp(-2) * 1.5, rel=1e-13)


def test_trl_numbers():
    # TRL 1.16's vespo on its case (ref-trl-1.16.0.json), token-mean over the batch: 0.2015192474823882
    from .trl_case import trl_loss

    assert trl_loss("vespo", logratio_clamp=20.0) == pytest.approx(0.2015192474823882, rel=1e-12)


def test_refuses_importance_weights():
    with pytest.raises(UsageError, match="loss 'vespo' folds the weights"):
        ObjectiveConfig(loss="vespo", is_level="token", is_cap=3.0)
    assert ObjectiveConfig(loss="vespo").logratio_clamp == 20.0
