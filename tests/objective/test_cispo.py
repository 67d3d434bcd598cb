"""CISPO: the clipped ratio, held constant, weights the log-prob; verl clips it on both sides,
Twinkle caps it at 1 + epsilon, TRL at epsilon_high itself."""

import math

import pytest

from grpo_cli import ObjectiveConfig, policy_objective
from grpo_cli.errors import UsageError

from .references import clip, ratios
from . import openrlhf_twinkle_case


def weight(r, config) -> float:
    if config.cispo_clip == "two-sided":
        return clip(r, config)
    return min(r, config.epsilon_high if config.cispo_clip == "epsilon-high" else 1 + config.epsilon_high)


# the slow reference (tests/objective/references.py)
def reference(new, old, adv, config) -> float:
    return sum(weight(r, config) * a * n for r, a, n in zip(ratios(new, old, config), adv, new))


REFERENCES = {"cispo": reference}

# rho = 0.5, 1.1 and 8 on tokens of log pi -1, A = 1
NEW, OLD = [[-1.0, -1.0, -1.0]], [[-1.0 - math.log(0.5), -1.0 - math.log(1.1), -1.0 - math.log(8.0)]]


def cispo(**options) -> float:
    return policy_objective(NEW, OLD, advantage_values=[1.0], loss="cispo", agg="token-sum", **options)


def test_the_three_weights():
    # verl: clip(rho, 0.8, 1.2) = 0.8, 1.1, 1.2; each times A log pi = -1
    assert cispo(epsilon=0.2) == pytest.approx(-(0.8 + 1.1 + 1.2), rel=1e-14)
    # Twinkle: min(rho, 1 + 0.2) = 0.5, 1.1, 1.2
    assert cispo(epsilon=0.2, cispo_clip="upper") == pytest.approx(-(0.5 + 1.1 + 1.2), rel=1e-14)
    # TRL's default epsilon_high = epsilon = 0.2 is the cap itself: min(rho, 0.2) = 0.2 each
    assert cispo(epsilon=0.2, cispo_clip="epsilon-high") == pytest.approx(-0.6, rel=1e-14)
    # TRL's suggested epsilon_high 5: 0.5, 1.1, 5; the same as verl's form with epsilon_low 1, epsilon_high 4
    assert cispo(epsilon_high=5.0, cispo_clip="epsilon-high") == pytest.approx(-(0.5 + 1.1 + 5.0), rel=1e-14)
    assert cispo(epsilon_low=1.0, epsilon_high=4.0) == pytest.approx(-(0.5 + 1.1 + 5.0), rel=1e-14)


def test_upper_caps_refuse_a_lower_side():
    with pytest.raises(UsageError, match="from above only; drop `epsilon_low`"):
        ObjectiveConfig(loss="cispo", cispo_clip="upper", epsilon_low=0.2)
    with pytest.raises(UsageError, match="takes no `cispo_clip`"):
        ObjectiveConfig(loss="ppo", cispo_clip="upper")
    with pytest.raises(UsageError, match="unknown `cispo_clip`"):
        ObjectiveConfig(loss="cispo", cispo_clip="lower")


def test_trl_numbers():
    # TRL 1.16's cispo: -min(rho, epsilon_high) A log pi, token-mean (ref-trl-1.16.0.json)
    from .trl_case import trl_loss

    assert trl_loss("cispo", cispo_clip="epsilon-high", epsilon_high=5.0) == pytest.approx(0.19441291313437267, rel=1e-12)
    assert trl_loss("cispo", cispo_clip="epsilon-high", epsilon=0.2) == pytest.approx(0.04551661631817753, rel=1e-12)  # default: cap 0.2


def test_twinkle_numbers():
    # Twinkle 0.5.1's CISPOLoss: -min(rho, 1 + epsilon) A log pi, token-mean; epsilon_high is
    # not read (ref-twinkle-0.5.1.json: epsilon 0.2 -0.33326101785379686, 0.1 -0.33285054912166345)
    mask, new, old = openrlhf_twinkle_case.MASK, openrlhf_twinkle_case.NEW, openrlhf_twinkle_case.OLD
    adv = [1.2, -0.8, 0.3, -1.1, 0.5, -0.4]
    for epsilon, loss in ((0.2, -0.33326101785379686), (0.1, -0.33285054912166345)):
        ours = policy_objective(new, old, advantage_values=adv, mask=mask, loss="cispo", cispo_clip="upper", epsilon=epsilon, agg="token-mean")
        assert -ours == pytest.approx(loss, rel=1e-12)
