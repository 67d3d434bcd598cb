"""DRO (verl 0.9.1): the policy gradient minus a quadratic penalty on the log-ratio."""

import math

import pytest

from grpo_cli import ObjectiveConfig, policy_objective
from grpo_cli.errors import UsageError

from .verl_case import TOKENS, counted, verl_loss


# the slow reference (tests/objective/references.py)
def reference(new, old, adv, config) -> float:
    c = config.logratio_clamp
    return sum(a * n - 0.5 * config.dro_beta * max(-c, min(c, n - o)) ** 2 for n, o, a in zip(new, old, adv))


REFERENCES = {"dro": reference}


def test_by_hand():
    # beta 0.5; row 0 (A = 2): 2(-0.5) - 0.25 (0.2)^2 = -1.01 and 2(-1.0) - 0 = -2;
    # row 1 (A = 0): the penalty alone, -0.25 (0.2)^2 = -0.01
    out = policy_objective([[-0.5, -1.0], [-0.5]], [[-0.7, -1.0], [-0.7]], advantage_values=[2.0, 0.0], loss="dro", dro_beta=0.5, agg="token-sum")
    assert out == pytest.approx(-1.01 - 2.0 - 0.01, rel=1e-14)


def test_verl_numbers():
    # verl: L = -(log pi A - beta/2 d^2), token-mean over the 14 counted tokens. On the case
    # sum_t A log pi = -1.12 and sum_t d^2 = 4.4129, so (1.12 + 0.25 * 4.4129) / 14 = 0.158801785714...
    assert sum(a * n for _, _, n, _, a in counted()) == pytest.approx(-1.12, rel=1e-14)
    assert sum((n - o) ** 2 for _, _, n, o, _ in counted()) == pytest.approx(4.4129, rel=1e-14)
    assert verl_loss("dro", dro_beta=0.5) == pytest.approx((1.12 + 0.25 * 4.4129) / TOKENS, rel=1e-14)
    assert verl_loss("dro", dro_beta=0.5) == pytest.approx(0.15880178571428574, rel=1e-12)  # verl's
    assert verl_loss("dro", "seq-mean-token-sum", dro_beta=0.5) == pytest.approx(0.3705375, rel=1e-12)  # verl's engine (6 rows)


def test_needs_a_positive_beta_and_is_not_clamped():
    with pytest.raises(UsageError, match="dro_beta"):
        ObjectiveConfig(loss="dro")
    with pytest.raises(UsageError, match="dro_beta"):
        ObjectiveConfig(loss="dro", dro_beta=0.0)
    with pytest.raises(UsageError, match="takes no `dro_beta`"):
        ObjectiveConfig(loss="ppo", dro_beta=0.5)
    # d = 30 is past verl's usual clamp of 20; DRO has none: -0.5 * 0.1 * 900 = -45
    assert policy_objective([[-1.0]], [[-31.0]], advantage_values=[0.0], loss="dro", dro_beta=0.1) == pytest.approx(-45.0)
    assert math.isclose(
        policy_objective([[-1.0]], [[-31.0]], advantage_values=[0.0], loss="dro", dro_beta=0.1, logratio_clamp=20.0), -20.0, rel_tol=1e-14
    )


def test_importance_weights_scale_the_penalty_too():
    # verl multiplies the whole per-token loss by the rollout weight: w = exp(old - rollout) = 2,
    # A = 0: 2 * -0.25 (0.2)^2 = -0.02
    out = policy_objective(
        [[-0.5]], [[-0.7]], advantage_values=[0.0], rollout_log_probs=[[-0.7 - math.log(2.0)]], is_level="token", loss="dro", dro_beta=0.5
    )
    assert out == pytest.approx(-0.02, rel=1e-13)
