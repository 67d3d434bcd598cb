"""OPO: the group's length-weighted mean reward as baseline (verl compute_opo_outcome_advantage)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_cli import AdvantageConfig, UsageError, advantages

from ..conftest import examples


def test_hand_derived():
    # group a: r = (1, 0, 0), L = (2, 6, 2): b = (2*1 + 0 + 0) / 10 = 0.2 -> A = (0.8, -0.2, -0.2)
    # group b: r = (1, 1, 0), L = (1, 1, 2): b = 2 / 4 = 0.5 -> A = (0.5, 0.5, -0.5)
    adv = advantages([1.0, 0.0, 0.0, 1.0, 1.0, 0.0], list("aaabbb"), AdvantageConfig(estimator="opo"), lengths=[2, 6, 2, 1, 1, 2])
    np.testing.assert_allclose(adv, [0.8, -0.2, -0.2, 0.5, 0.5, -0.5], rtol=1e-15)


@settings(max_examples=examples(50))
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(-5, 5), st.integers(1, 50)), min_size=1, max_size=30))
def test_matches_a_loop_over_groups(rows):
    keys, r, lengths = (np.array(x) for x in zip(*rows))
    expected = np.zeros(len(r))
    for k in set(keys.tolist()):
        i = keys == k
        if i.sum() > 1 and r[i].max() != r[i].min():
            expected[i] = r[i] - np.sum(lengths[i] * r[i]) / np.sum(lengths[i])
    np.testing.assert_allclose(advantages(r, keys, AdvantageConfig(estimator="opo"), lengths=lengths), expected, rtol=1e-12, atol=1e-12)


def test_needs_lengths_and_is_never_scaled():
    with pytest.raises(UsageError, match="estimator 'opo' needs `lengths`"):
        advantages([1.0, 0.0], "aa", AdvantageConfig(estimator="opo"))
    with pytest.raises(UsageError, match="estimator 'opo' takes no `scale`; it is never scaled"):
        AdvantageConfig(estimator="opo", scale="group")
