"""The clipped objective: seed 002, hand-derived cases for every option, and invariants."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_cli import ObjectiveConfig, UsageError, policy_objective

from .conftest import reference_row_objective

SEED_NEW = [[-0.2, -0.3], [-0.1, -0.4]]
SEED_OLD = [[-0.5, -0.6], [-0.4, -0.7]]


def test_seed_002_example_1():
    # The seed states 0.0. Its own steps give L1 = 0.6 + 0.6 = 1.2 (ratio e^0.3 clipped to
    # 1.2, times A = 0.5) and L2 = -1.35 (ratio rounded to 1.35, times A = -0.5, unclipped
    # because min picks the lower value), so L = (1.2 - 1.35) / 2 = -0.075; the seed then
    # divides by 2 a second time (-0.0375) and rounds to 0.0. With the exact ratio e^0.3 the
    # formula gives L = (1.2 - e^0.3) / 2.
    result = policy_objective(SEED_NEW, SEED_OLD, [1.0, 0.0], 0.2)
    assert result == pytest.approx((1.2 - math.exp(0.3)) / 2, rel=1e-14)
    assert round(result, 7) == -0.0749294


def test_seed_002_example_2_equal_rewards_give_zero():
    assert policy_objective([[-0.5, -0.5], [-0.5, -0.5]], [[-0.5, -0.5], [-0.5, -0.5]], [1.0, 1.0], 0.2) == 0.0


def test_seed_002_example_3_single_response_gives_zero():
    assert policy_objective([[-0.3, -0.4, -0.5]], [[-0.5, -0.6, -0.7]], [2.0], 0.1) == 0.0


# rho = 1 everywhere: row 0 has 3 tokens with A = 1, row 1 has 1 token with A = -2.
AGG_NEW = [[-1.0, -1.0, -1.0], [-1.0]]


@pytest.mark.parametrize(
    "agg, expected",
    [
        ("seq-mean-token-sum", (3 - 2) / 2),
        ("seq-mean-token-mean", (1 - 2) / 2),
        ("token-mean", (3 - 2) / 4),
        ("token-sum", 3 - 2),
        ("seq-mean-token-sum-norm", (3 - 2) / (2 * 4)),
    ],
)
def test_each_aggregation_hand_derived(agg, expected):
    kw = {"max_length": 4} if agg.endswith("norm") else {}
    assert policy_objective(AGG_NEW, AGG_NEW, advantage_values=[1.0, -2.0], agg=agg, **kw) == expected


def test_norm_aggregation_needs_max_length():
    with pytest.raises(UsageError, match="needs `max_length`"):
        ObjectiveConfig(agg="seq-mean-token-sum-norm")


def test_dual_clip():
    # A = -1, rho = 5: surr1 = -5, surr2 = -1.2, min = -5; dual clip C = 3 gives max(-5, -3) = -3
    new, old = [[math.log(5.0) - 3.0]], [[-3.0]]
    assert policy_objective(new, old, advantage_values=[-1.0]) == pytest.approx(-5.0, rel=1e-14)
    out = policy_objective(new, old, advantage_values=[-1.0], dual_clip=3.0, details=True)
    assert out["objective"] == -3.0 and out["clip_frac"]["dual"] == 1.0
    # positive advantages are untouched by the dual clip: min(5, 1.2) = 1.2
    assert policy_objective(new, old, advantage_values=[1.0], dual_clip=3.0) == pytest.approx(1.2)


def test_clip_higher_and_both_sides_clipping():
    # row 0 (A = +1): rho 1.5 -> clipped to 1.28; rho 1.25 -> unclipped with eps_high 0.28
    # row 1 (A = -1): rho 0.5 -> clipped to 0.8 (term -0.8); rho 0.9 -> unclipped (-0.9)
    new = [[math.log(1.5) - 1, math.log(1.25) - 1], [math.log(0.5) - 1, math.log(0.9) - 1]]
    old = [[-1.0, -1.0], [-1.0, -1.0]]
    out = policy_objective(new, old, advantage_values=[1.0, -1.0], epsilon=0.2, epsilon_high=0.28, agg="token-sum", details=True)
    assert out["objective"] == pytest.approx(1.28 + 1.25 - 0.8 - 0.9, rel=1e-14)
    assert out["clip_frac"] == {"low": 0.25, "high": 0.25, "dual": 0.0}
    symmetric = policy_objective(new, old, advantage_values=[1.0, -1.0], epsilon=0.2, agg="token-sum", details=True)
    assert symmetric["objective"] == pytest.approx(1.2 + 1.2 - 0.8 - 0.9, rel=1e-14)
    assert symmetric["clip_frac"]["high"] == 0.5


def test_sequence_level_ratio_gspo():
    # log-ratios 0.1 and 0.3: sequence rho = e^0.2 = 1.2214 for both tokens, clipped to 1.2
    new, old = [[-0.9, -0.7]], [[-1.0, -1.0]]
    assert policy_objective(new, old, advantage_values=[1.0], ratio_level="sequence") == pytest.approx(2.4, rel=1e-14)
    token_level = math.exp(0.1) + 1.2
    assert policy_objective(new, old, advantage_values=[1.0]) == pytest.approx(token_level, rel=1e-14)


def test_masked_tokens_count_nowhere():
    # the masked middle token has rho = e^3 (would clip) and must not count in sums or counts
    new = [[-1.0, -1.0, -1.0]]
    old = [[-1.0, -4.0, -1.0]]
    out = policy_objective(new, old, advantage_values=[2.0], mask=[[1, 0, 1]], agg="token-mean", details=True)
    assert out["objective"] == 2.0 and out["tokens"] == 2
    assert out["clip_frac"]["high"] == 0.0 and out["ratio"]["max"] == 1.0
    assert policy_objective(new, old, advantage_values=[2.0], mask=[[True, False, True]]) == 4.0


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


def test_beta_without_reference_is_an_error():
    with pytest.raises(UsageError, match="needs `ref_log_probs`"):
        policy_objective(SEED_NEW, SEED_OLD, [1.0, 0.0], beta=0.1)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"epsilon": 0.0}, r"require `epsilon` > 0 \(found 0.0\)"),
        ({"epsilon": -0.1}, r"require `epsilon` > 0"),
        ({"dual_clip": 1.0}, r"require `dual_clip` > 1 \(found 1.0\)"),
        ({"agg": "mean"}, r"unknown `agg` 'mean' \(valid: seq-mean-token-sum, "),
    ],
)
def test_option_errors(options, message):
    with pytest.raises(UsageError, match=message):
        ObjectiveConfig(**options)


def test_huge_log_ratio_is_clamped_and_counted():
    out = policy_objective([[-0.0]], [[-1000.0]], advantage_values=[-1.0], details=True)
    assert out["clamped_tokens"] == 1
    assert out["objective"] == -math.exp(20.0)
    assert np.isfinite(out["ratio"]["max"])


# --- properties -----------------------------------------------------------------------
logprob = st.floats(-5.0, 0.0, allow_nan=False)
row = st.integers(0, 6).flatmap(lambda n: st.tuples(st.lists(logprob, min_size=n, max_size=n), st.lists(logprob, min_size=n, max_size=n)))
rollout = st.lists(st.tuples(row, st.floats(-3.0, 3.0)), min_size=1, max_size=12)
aggs = st.sampled_from(["seq-mean-token-sum", "seq-mean-token-mean", "token-mean", "token-sum"])


def unpack(rows):
    return [r[0][0] for r in rows], [r[0][1] for r in rows], np.array([r[1] for r in rows])


@given(rollout, st.sampled_from([0.1, 0.2, 0.28]), st.sampled_from([None, 2.0, 3.0]))
def test_matches_slow_reference(rows, eps, dual):
    new, old, adv = unpack(rows)
    out = policy_objective(new, old, advantage_values=adv, epsilon=eps, dual_clip=dual, agg="token-sum", details=True)
    expected = [reference_row_objective(n, o, a, eps, eps, dual) for n, o, a in zip(new, old, adv)]
    np.testing.assert_allclose(out["rows"]["objective_sum"], expected, rtol=1e-12, atol=1e-12)


@given(rollout, aggs)
def test_unit_ratio_gives_aggregated_advantage(rows, agg):
    new, _, adv = unpack(rows)
    n = np.array([len(r) for r in new])
    out = policy_objective(new, new, advantage_values=adv, agg=agg)
    per_row = {"seq-mean-token-sum": (adv * n).mean(), "token-sum": (adv * n).sum(),
               "token-mean": (adv * n).sum() / n.sum() if n.sum() else 0.0,
               "seq-mean-token-mean": adv[n > 0].mean() if (n > 0).any() else 0.0}[agg]
    assert out == pytest.approx(per_row, rel=1e-12, abs=1e-12)


@given(rollout, aggs)
def test_sign_flip_is_exact_when_nothing_clips(rows, agg):
    # Unclipped, L = agg(rho * A) is linear in A, so flipping every A flips L.
    new, old, adv = unpack(rows)
    wide = 200.0  # 1 - eps_low must stay > 0, so widen only the high side and bound the low side
    kw = {"epsilon_low": 0.999999, "epsilon_high": wide, "agg": agg}
    ratios = [math.exp(a - b) for r_new, r_old in zip(new, old) for a, b in zip(r_new, r_old)]
    if any(r < 1e-6 for r in ratios):
        return
    assert policy_objective(new, old, advantage_values=-adv, **kw) == pytest.approx(-policy_objective(new, old, advantage_values=adv, **kw), rel=1e-12, abs=1e-12)


@settings(max_examples=50)
@given(rollout)
def test_sign_flip_as_epsilon_goes_to_zero(rows):
    # With eps -> 0, L(A) = A * min(rho, 1) for A > 0 and L(-A) = -A * max(rho, 1), so
    # L(A) + L(-A) = -sum |A| * |rho - 1|: L flips exactly where rho = 1, and the gap is this.
    new, old, adv = unpack(rows)
    kw = {"epsilon": 1e-12, "agg": "token-sum"}
    gap = sum(abs(a) * abs(math.exp(x - y) - 1) for rn, ro, a in zip(new, old, adv) for x, y in zip(rn, ro))
    total = policy_objective(new, old, advantage_values=adv, **kw) + policy_objective(new, old, advantage_values=-adv, **kw)
    assert total == pytest.approx(-gap, rel=1e-9, abs=1e-9)
    assert policy_objective(new, new, advantage_values=-adv, **kw) == -policy_objective(new, new, advantage_values=adv, **kw)
