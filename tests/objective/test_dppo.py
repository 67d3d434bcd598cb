"""DPPO (verl 0.9.1's dppo_tv, dppo_kl): REINFORCE weighted by the truncated ratio, on the
tokens whose probability moved less than a threshold."""

import math

import pytest

from grpo_cli import policy_objective

from .references import ratios
from .verl_case import TOKENS, counted, verl_loss


def valid_tv(n, o, a, config) -> bool:
    change = math.exp(n) - math.exp(o)
    return change <= config.epsilon_high if a > 0 else change >= -config.epsilon_low


def valid_kl(n, o, a, config) -> bool:
    p, q = math.exp(n), math.exp(o)
    kl = q * (o - n) + (1 - q) * math.log((1 - q + 1e-8) / (1 - p + 1e-8))
    return (kl <= config.epsilon_high or p <= q) if a > 0 else (kl <= config.epsilon_low or p >= q)


def reference_of(valid):
    def reference(new, old, adv, config) -> float:
        cap = math.inf if config.dual_clip is None else config.dual_clip
        return sum(a * min(r, cap) * n for r, n, o, a in zip(ratios(new, old, config), new, old, adv) if valid(n, o, a, config))

    return reference


# the slow references (tests/objective/references.py)
REFERENCES = {"dppo_tv": reference_of(valid_tv), "dppo_kl": reference_of(valid_kl)}


def test_by_hand():
    # A = +1: p 0.5 -> 0.8 moves 0.3 > eps_high 0.2 (left out); p 0.5 -> 0.6 stays: rho 1.2,
    # term 1.2 log 0.6. A = -1: rho = 4 truncated at C = 3: -3 log 0.4
    new, old = [[math.log(0.8), math.log(0.6)], [math.log(0.4)]], [[math.log(0.5), math.log(0.5)], [math.log(0.1)]]
    out = policy_objective(new, old, advantage_values=[1.0, -1.0], loss="dppo_tv", dual_clip=3.0, agg="token-sum", details=True)
    assert out["objective"] == pytest.approx(1.2 * math.log(0.6) - 3.0 * math.log(0.4), rel=1e-14)
    assert out["clip_frac"] == {"low": 0.0, "high": 1 / 3, "truncated": 1 / 3}


def test_verl_numbers():
    # p - p_old on the case (verl: valid if <= 0.2 where A > 0, >= -0.2 where A < 0): row 0
    # token 0 moves 0.9048 - 0.6703 = 0.2345 and row 2 token 1 moves 0.9048 - 0.7047 = 0.2001,
    # both A > 0: left out (verl's pg_clipfrac 2/14). Where A < 0 no token falls 0.2. rho > 3 at
    # (1, 0) (3.67) and (3, 1) (4.06): truncated to 3. L = -sum A min(rho, 3) log pi / 14.
    left_out = {(0, 0), (2, 1)}
    expected = -sum(a * min(math.exp(n - o), 3.0) * n for i, t, n, o, a in counted() if (i, t) not in left_out) / TOKENS
    assert verl_loss("dppo_tv", dual_clip=3.0) == pytest.approx(expected, rel=1e-14)
    assert verl_loss("dppo_tv", dual_clip=3.0) == pytest.approx(-0.11747066665308077, rel=1e-12)  # verl's
    assert verl_loss("dppo_tv", dual_clip=20.0) == pytest.approx(-0.16799102267959626, rel=1e-12)
    assert verl_loss("dppo_tv", dual_clip=3.0, epsilon=0.05) == pytest.approx(-0.040055736280028266, rel=1e-12)
    assert verl_loss("dppo_tv", "seq-mean-token-sum", dual_clip=3.0) == pytest.approx(-0.27409822219052177, rel=1e-12)  # engine
    # binary KL: p_old ln(p_old / p) + (1 - p_old) ln((1 - p_old) / (1 - p)); at (0, 0) it is
    # 0.6703 (-0.3) + 0.3297 ln(0.3297 / 0.0952) = 0.2085 > 0.2 with p > p_old: left out; at
    # (2, 1) 0.7047 (-0.25) + 0.2953 ln(0.2953 / 0.0952) = 0.1583: kept
    assert verl_loss("dppo_kl", dual_clip=3.0) == pytest.approx(-0.11013337855772222, rel=1e-12)
    assert verl_loss("dppo_kl", dual_clip=3.0, epsilon=0.05) == pytest.approx(-0.11747066665308077, rel=1e-12)
    assert verl_loss("dppo_kl", "seq-mean-token-sum", dual_clip=3.0) == pytest.approx(-0.2569778833013518, rel=1e-12)
