"""Every registered estimator against its slow reference, and the invariants all of them keep
(hypothesis): groups without signal give 0, advantages sum to zero per group, row order does
not matter, and GRPO's group scale ignores affine maps of the rewards."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_cli import AdvantageConfig, advantages
from grpo_cli.estimators import ESTIMATORS

from ..strategies import advantage_configs, grouped_rewards, split
from .references import REFERENCES, reference_advantages


@pytest.mark.parametrize("name", ESTIMATORS)
def test_every_estimator_has_a_slow_reference(name):
    assert name in REFERENCES, f"estimator {name!r} has no slow reference in tests/estimators/references.py"


@pytest.mark.parametrize("name", ESTIMATORS)
@settings(max_examples=60)
@given(rows=grouped_rewards, data=st.data())
def test_matches_slow_reference(name, rows, data):
    config = data.draw(advantage_configs(estimators=(name,)))
    groups, rewards = split(rows)
    expected = reference_advantages(rewards, groups, estimator=config.estimator, scale=config.scale, ddof=config.ddof, eps=config.eps)
    np.testing.assert_allclose(advantages(rewards, groups, config), expected, rtol=1e-12, atol=1e-12)


@given(grouped_rewards, advantage_configs())
def test_advantages_sum_to_zero_within_each_group(rows, config):
    groups, rewards = split(rows)
    adv = advantages(rewards, groups, config)
    assert np.isfinite(adv).all()
    for key in set(groups):
        mask = np.array(groups) == key
        assert abs(adv[mask].sum()) <= 1e-9 * max(1.0, np.abs(adv[mask]).max())


@given(grouped_rewards, advantage_configs(), st.randoms(use_true_random=False))
def test_invariant_to_row_order(rows, config, rnd):
    groups, rewards = split(rows)
    order = list(range(len(rows)))
    rnd.shuffle(order)
    adv = advantages(rewards, groups, config)
    shuffled = advantages(rewards[order], [groups[i] for i in order], config)
    np.testing.assert_allclose(shuffled, adv[order], rtol=1e-12, atol=1e-12)


@settings(max_examples=200)
@given(grouped_rewards, st.sampled_from([0.5, 2.0, 3.0, 10.0]), st.integers(-20, 20))
def test_grpo_group_scale_is_invariant_to_affine_rewards(rows, a, b):
    groups, rewards = split(rows)
    config = AdvantageConfig(estimator="grpo", scale="group")
    np.testing.assert_allclose(
        advantages(a * rewards + b, groups, config), advantages(rewards, groups, config), rtol=1e-9, atol=1e-9
    )


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_single_row_and_zero_variance_groups_give_zero(estimator):
    cfg = AdvantageConfig(estimator=estimator)
    # 0.1 * 3 equal floats: their mean is not exactly 0.1, yet the advantage must be exactly 0
    adv = advantages([5.0, 0.1, 0.1, 0.1], ["solo", "g", "g", "g"], cfg)
    assert adv.tolist() == [0.0, 0.0, 0.0, 0.0]
