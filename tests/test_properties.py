"""Invariants of the estimators, checked with hypothesis against random groups."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_cli import AdvantageConfig, advantages

from .conftest import reference_advantages

# Rewards on a 0.01 grid in [-10, 10]: realistic, and distinct values stay distinct under
# the affine maps below.
reward = st.integers(-1000, 1000).map(lambda k: k / 100)
rollouts = st.lists(st.tuples(st.integers(0, 5), reward), min_size=1, max_size=60)
configs = st.builds(
    AdvantageConfig,
    estimator=st.sampled_from(["grpo", "rloo"]),
    scale=st.sampled_from(["group", "batch", "none"]),
    std=st.sampled_from(["population", "sample"]),
    eps=st.sampled_from([0.0, 1e-8, 1e-6]),
) | st.just(AdvantageConfig(estimator="mean"))


def split(rows):
    return [g for g, _ in rows], np.array([r for _, r in rows])


@given(rollouts, configs)
def test_matches_slow_reference(rows, config):
    groups, rewards = split(rows)
    expected = reference_advantages(rewards, groups, estimator=config.estimator, scale=config.scale, ddof=config.ddof, eps=config.eps)
    np.testing.assert_allclose(advantages(rewards, groups, config), expected, rtol=1e-12, atol=1e-12)


@given(rollouts, configs)
def test_advantages_sum_to_zero_within_each_group(rows, config):
    groups, rewards = split(rows)
    adv = advantages(rewards, groups, config)
    assert np.isfinite(adv).all()
    for key in set(groups):
        mask = np.array(groups) == key
        assert abs(adv[mask].sum()) <= 1e-9 * max(1.0, np.abs(adv[mask]).max())


@given(rollouts, configs, st.randoms(use_true_random=False))
def test_invariant_to_row_order(rows, config, rnd):
    groups, rewards = split(rows)
    order = list(range(len(rows)))
    rnd.shuffle(order)
    adv = advantages(rewards, groups, config)
    shuffled = advantages(rewards[order], [groups[i] for i in order], config)
    np.testing.assert_allclose(shuffled, adv[order], rtol=1e-12, atol=1e-12)


@settings(max_examples=200)
@given(rollouts, st.sampled_from([0.5, 2.0, 3.0, 10.0]), st.integers(-20, 20))
def test_grpo_group_scale_is_invariant_to_affine_rewards(rows, a, b):
    groups, rewards = split(rows)
    config = AdvantageConfig(estimator="grpo", scale="group")
    np.testing.assert_allclose(
        advantages(a * rewards + b, groups, config), advantages(rewards, groups, config), rtol=1e-9, atol=1e-9
    )
