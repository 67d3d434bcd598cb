"""Aggregations: each hand-derived, and the unit-ratio property."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grpo_cli import policy_objective
from grpo_cli.objective import AGGREGATIONS

from ..strategies import logprob_rollout, unpack

# rho = 1 everywhere: row 0 has 3 tokens with A = 1, row 1 has 1 token with A = -2.
AGG_NEW = [[-1.0, -1.0, -1.0], [-1.0]]
HAND_DERIVED = {
    "seq-mean-token-sum": (3 - 2) / 2,
    "seq-mean-token-mean": (1 - 2) / 2,
    "token-mean": (3 - 2) / 4,
    "token-sum": 3 - 2,
    "seq-mean-token-sum-norm": (3 - 2) / (2 * 4),
}


@pytest.mark.parametrize("agg", AGGREGATIONS)
def test_each_aggregation_hand_derived(agg):
    kw = {"max_length": 4} if AGGREGATIONS[agg].needs_max_length else {}
    assert policy_objective(AGG_NEW, AGG_NEW, advantage_values=[1.0, -2.0], agg=agg, **kw) == HAND_DERIVED[agg]


@given(logprob_rollout, st.sampled_from(["seq-mean-token-sum", "seq-mean-token-mean", "token-mean", "token-sum"]))
def test_unit_ratio_gives_aggregated_advantage(rows, agg):
    new, _, adv = unpack(rows)
    n = np.array([len(r) for r in new])
    out = policy_objective(new, new, advantage_values=adv, agg=agg)
    per_row = {
        "seq-mean-token-sum": (adv * n).mean(),
        "token-sum": (adv * n).sum(),
        "token-mean": (adv * n).sum() / n.sum() if n.sum() else 0.0,
        "seq-mean-token-mean": adv[n > 0].mean() if (n > 0).any() else 0.0,
    }[agg]
    assert out == pytest.approx(per_row, rel=1e-12, abs=1e-12)
