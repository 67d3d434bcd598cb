"""Every registered estimator against its slow reference, and the invariants all of them keep
(hypothesis): groups without signal give 0, advantages sum to zero per group, row order does
not matter, and GRPO's group scale ignores affine maps of the rewards."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_cli import AdvantageConfig, advantages
from grpo_cli.errors import InputError
from grpo_cli.estimators import ESTIMATORS, lookup

from ..conftest import examples
from ..strategies import REWARD_ONLY, advantage_configs, grouped_rewards, split
from .references import reference_advantages, references


@pytest.mark.parametrize("name", REWARD_ONLY)
def test_every_estimator_has_a_slow_reference(name):
    module = lookup(name).compute.__module__.rpartition(".")[2]
    assert name in references(), f"estimator {name!r} has no slow reference (REFERENCES in tests/estimators/test_{module}.py)"


@pytest.mark.parametrize("name", REWARD_ONLY)
@settings(max_examples=examples(60))
@given(rows=grouped_rewards, data=st.data())
def test_matches_slow_reference(name, rows, data):
    config = data.draw(advantage_configs(estimators=(name,)))
    groups, rewards = split(rows)
    expected = reference_advantages(rewards, groups, estimator=config.estimator, scale=config.scale, ddof=config.ddof, eps=config.eps)
    np.testing.assert_allclose(advantages(rewards, groups, config), expected, rtol=1e-12, atol=1e-12)


@given(grouped_rewards, advantage_configs())
def test_advantages_sum_to_zero_within_each_group(rows, config):
    """Every estimator with a baseline (passk credits the best row alone)."""
    if config.estimator == "passk":
        return
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


@settings(max_examples=examples(200))
@given(grouped_rewards, st.sampled_from([0.5, 2.0, 3.0, 10.0]), st.integers(-20, 20))
def test_grpo_group_scale_is_invariant_to_affine_rewards(rows, a, b):
    groups, rewards = split(rows)
    config = AdvantageConfig(estimator="grpo", scale="group")
    np.testing.assert_allclose(advantages(a * rewards + b, groups, config), advantages(rewards, groups, config), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("estimator", [n for n, e in ESTIMATORS.items() if e.grouped and not e.whitens and e.level == "row"])
def test_single_row_and_zero_variance_groups_give_zero(estimator):
    cfg = AdvantageConfig(estimator=estimator)
    lengths = {"lengths": [3, 1, 2, 5]} if "length" in ESTIMATORS[estimator].needs else {}
    # 0.1 * 3 equal floats: their mean is not exactly 0.1, yet the advantage must be exactly 0
    adv = advantages([5.0, 0.1, 0.1, 0.1], ["solo", "g", "g", "g"], cfg, **lengths)
    assert adv.tolist() == [0.0, 0.0, 0.0, 0.0]


@settings(max_examples=examples(100))
@given(grouped_rewards, advantage_configs(), st.sampled_from([2.0**-1060, 2.0**-700, 2.0**700, 2.0**1000]))
def test_rewards_near_the_ends_of_float64_give_the_same_advantages(rows, config, c):
    """Scaling every reward by a power of two far from 1 (where squares and sums overflow or
    underflow) changes nothing, once eps is scaled too; unscaled advantages scale with it."""
    groups, rewards = split(rows)
    r = np.array(rewards)
    assume_exact = np.all(r * c / c == r) and np.all(np.abs(r[r != 0] * c) >= 2.0**-1022)
    if not assume_exact:  # the scaled rewards themselves lost bits (subnormal): nothing to compare
        return
    scaled = AdvantageConfig(
        estimator=config.estimator, scale=config.scale, **({} if config.scale == "none" else {"std": config.std, "eps": config.eps * c})
    )
    expected = advantages(rewards, groups, config) * (c if config.scale == "none" else 1.0)
    np.testing.assert_allclose(advantages(r * c, groups, scaled), expected, rtol=1e-12, atol=1e-12 * (c if config.scale == "none" else 1.0))


def test_overflowing_rewards_hand_computed():
    """{1e308, -1e308, 1e308}: mean 1e308/3, centered (2, -4, 2) * 1e308/3, population std
    sqrt(8/3) * 1e308/3: A = (1, -2, 1) / sqrt(2). A group of ordinary rewards beside it is
    computed in its own unit."""
    rewards, groups = [1e308, -1e308, 1e308, 1.0, 0.0], [0, 0, 0, 1, 1]
    expected = [2**-0.5, -(2**0.5), 2**-0.5, 1.0, -1.0]
    np.testing.assert_allclose(advantages(rewards, groups, AdvantageConfig()), expected, rtol=1e-15)
    np.testing.assert_allclose(
        advantages(rewards, groups, AdvantageConfig(estimator="rloo")), np.multiply(expected, [1.5, 1.5, 1.5, 2.0, 2.0]), rtol=1e-15
    )  # G / (G - 1)
    np.testing.assert_allclose(
        advantages(rewards, groups, AdvantageConfig(estimator="mean")), [1e308 / 3 * 2, -1e308 / 3 * 4, 1e308 / 3 * 2, 0.5, -0.5], rtol=1e-15
    )
    with pytest.raises(InputError, match=r"reward 1: the advantage is beyond float64 \(rewards up to 1e\+308\)"):
        advantages(rewards, groups, AdvantageConfig(estimator="rloo", scale="none"))  # -1e308 - 1e308
