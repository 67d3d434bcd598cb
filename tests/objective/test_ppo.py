"""PPO's clipped surrogate: clip-higher, dual clip, the clip bound, and sign flips."""

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grpo_cli import policy_objective

from ..conftest import examples
from ..strategies import logprob_rollout, rollout_tables, unpack
from .references import ppo_term, ratios


# the slow reference (tests/objective/references.py); GSPO is PPO's term on the sequence ratio,
# TRL's RLOO on the ratio of the row's probabilities
def reference(new, old, adv, config) -> float:
    return sum(ppo_term(r, a, config) for r, a in zip(ratios(new, old, config), adv))


REFERENCES = {"ppo": reference, "gspo": reference, "gspo-token": reference, "rloo": reference}

aggs = st.sampled_from(["seq-mean-token-sum", "seq-mean-token-mean", "token-mean", "token-sum"])


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


@given(logprob_rollout, aggs)
def test_sign_flip_is_exact_when_nothing_clips(rows, agg):
    # Unclipped, L = agg(rho * A) is linear in A, so flipping every A flips L.
    new, old, adv = unpack(rows)
    wide = 200.0  # 1 - eps_low must stay > 0, so widen only the high side and bound the low side
    kw = {"epsilon_low": 0.999999, "epsilon_high": wide, "agg": agg}
    ratios = [math.exp(a - b) for r_new, r_old in zip(new, old) for a, b in zip(r_new, r_old)]
    if any(r < 1e-6 for r in ratios):
        return
    assert policy_objective(new, old, advantage_values=-adv, **kw) == pytest.approx(
        -policy_objective(new, old, advantage_values=adv, **kw), rel=1e-12, abs=1e-12
    )


@settings(max_examples=examples(50))
@given(logprob_rollout)
def test_sign_flip_as_epsilon_goes_to_zero(rows):
    # With eps -> 0, L(A) = A * min(rho, 1) for A > 0 and L(-A) = -A * max(rho, 1), so
    # L(A) + L(-A) = -sum |A| * |rho - 1|: L flips exactly where rho = 1, and the gap is this.
    new, old, adv = unpack(rows)
    kw = {"epsilon": 1e-12, "agg": "token-sum"}
    gap = sum(abs(a) * abs(math.exp(x - y) - 1) for rn, ro, a in zip(new, old, adv) for x, y in zip(rn, ro))
    total = policy_objective(new, old, advantage_values=adv, **kw) + policy_objective(new, old, advantage_values=-adv, **kw)
    assert total == pytest.approx(-gap, rel=1e-9, abs=1e-9)
    assert policy_objective(new, new, advantage_values=-adv, **kw) == -policy_objective(new, new, advantage_values=adv, **kw)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rollout_tables(), st.floats(0.05, 0.5), st.floats(0.05, 0.5), st.one_of(st.none(), st.floats(1.5, 5.0)))
def test_token_terms_are_bounded_by_the_clip(table: pa.Table, eps_low, eps_high, dual):
    """L_it <= (1 + eps_high)|A| always; with dual clip C also |L_it| <= max(1 + eps_high, C)|A|
    (without it, A < 0 and a large ratio make L_it = rho A unbounded below: what C is for)."""
    adv = np.array(np.random.default_rng(0).normal(size=table.num_rows))
    out = policy_objective(
        table["logprobs"].to_pylist(),
        table["old_logprobs"].to_pylist(),
        advantage_values=adv,
        epsilon_low=eps_low,
        epsilon_high=eps_high,
        dual_clip=dual,
        details=True,
    )
    rows, n = out["rows"]["objective_sum"], out["rows"]["n_tokens"]
    slack = 1e-12 * (1 + np.abs(adv) * n)
    assert np.all(rows <= (1 + eps_high) * np.abs(adv) * n + slack)
    if dual is not None:
        assert np.all(np.abs(rows) <= max(1 + eps_high, dual) * np.abs(adv) * n + slack)


def test_trl_rloo_clips_the_ratio_of_the_rows_probabilities():
    """TRL 1.16 RLOOTrainer._compute_loss (rloo_trainer.py:1822-1833): rho_i = exp(sum_t m (new -
    old)), L_i = -min(rho_i A_i, clip(rho_i, 0.8, 1.2) A_i), loss = mean over every row.
    Row 0 (A 1): sum d = 0.1 + 0.05, rho = e^0.15 = 1.1618 < 1.2, term e^0.15;
    row 1 (A -0.5): d = 0.3, rho = e^0.3 = 1.3499, A < 0: -0.5 max(rho, 0.8) = -0.5 e^0.3;
    row 2 (A 0.4) has no counted token: rho = e^0 = 1, term 0.4.
    Objective (e^0.15 - 0.5 e^0.3 + 0.4) / 3; ``empty_rows`` skip: the two rows with tokens."""
    new, old, mask, adv = [[-1.0, -1.0], [-0.7], [-1.0]], [[-1.1, -1.05], [-1.0], [-1.0]], [[1, 1], [1], [0]], [1.0, -0.5, 0.4]
    got = policy_objective(new, old, advantage_values=adv, mask=mask, preset="trl", loss="rloo", details=True)
    assert got["objective"] == pytest.approx((math.exp(0.15) - 0.5 * math.exp(0.3) + 0.4) / 3, rel=1e-14)
    assert got["config"]["ratio_level"] == "sequence-sum" and got["config"]["agg"] == "seq-mean-token-mean"
    skip = policy_objective(new, old, advantage_values=adv, mask=mask, preset="trl", loss="rloo", empty_rows="skip")
    assert skip == pytest.approx((math.exp(0.15) - 0.5 * math.exp(0.3)) / 2, rel=1e-14)


def test_trl_rloo_numbers():
    # ref-trl-1.16.0.json, RLOOTrainer's loss on its advantages (beta 0.05 in the reward):
    # 0.061918936059987384, with epsilon_high 0.28 0.05831893605998737
    from .trl_case import MASK, NEW, OLD

    adv = [0.7287499999999999, -1.105, 0.3762500000000001, -0.27, 0.0, 0.27]
    for options, loss in (({}, 0.061918936059987384), ({"epsilon_high": 0.28}, 0.05831893605998737)):
        assert -policy_objective(NEW, OLD, advantage_values=adv, mask=MASK, preset="trl", loss="rloo", **options) == pytest.approx(loss, rel=1e-12)
