"""ReMax: r minus the greedy response's reward (verl compute_remax_outcome_advantage)."""

import numpy as np
import pytest

from grpo_cli import AdvantageConfig, UsageError, advantages


def test_hand_derived_and_no_group_statistic():
    # A = r - b, row by row: a group of equal rewards still has signal against its baselines
    adv = advantages([1.0, 1.0, 0.25, 0.0], list("aabb"), AdvantageConfig(estimator="remax"), baseline=[0.5, 1.0, 0.0, 0.75])
    assert adv.tolist() == [0.5, 0.0, 0.25, -0.75]


def test_needs_a_baseline():
    with pytest.raises(UsageError, match="estimator 'remax' needs `baseline`"):
        advantages([1.0, 0.0], "aa", AdvantageConfig(estimator="remax"))
    with pytest.raises(UsageError, match="estimator 'grpo' takes no `baseline`"):
        advantages([1.0, 0.0], "aa", AdvantageConfig(), baseline=[0.0, 0.0])


def test_huge_rewards_keep_their_baseline_in_the_same_unit():
    adv = advantages([1e308, -1e308], "ab", AdvantageConfig(estimator="remax"), baseline=[5e307, -5e307])
    np.testing.assert_allclose(adv, [5e307, -5e307], rtol=1e-15)
