"""Worked examples from the seeds and hand-derived cases for every estimator and scale."""

import numpy as np
import pytest

from grpo_cli import AdvantageConfig, GRPOAdvantage, RLOOAdvantage, UsageError, advantages, normalize_group

SEED_004_REWARDS = [0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]


# Seed 000: population std, rounded to 4 decimals.
@pytest.mark.parametrize(
    "rewards, expected",
    [
        ([0.0, 1.0, 0.0, 1.0], [-1.0, 1.0, -1.0, 1.0]),
        ([0.2, 0.5, 0.8, 0.3, 0.7], [-1.3156, 0.0, 1.3156, -0.8771, 0.8771]),
        ([-0.5, 0.0, 0.5, 1.0], [-1.3416, -0.4472, 0.4472, 1.3416]),
    ],
)
def test_seed_000_normalize_group(rewards, expected):
    assert normalize_group(rewards) == expected


def test_seed_004_listed_numbers_are_scale_none():
    adv = GRPOAdvantage()(SEED_004_REWARDS, num_generations=4, scale="none")
    assert adv.tolist() == [-0.5, 0.5, -0.5, 0.5, 0.75, -0.25, -0.25, -0.25]


def test_seed_004_group_scale_uses_sample_std_like_twinkle():
    adv = GRPOAdvantage()(SEED_004_REWARDS, num_generations=4, scale="group")
    # group 1: 0.5 / (sqrt(1/3) + 1e-8); group 2: 0.75 / (0.5 + 1e-8), -0.25 / (0.5 + 1e-8)
    s1, s2 = np.sqrt(1 / 3) + 1e-8, 0.5 + 1e-8
    np.testing.assert_allclose(adv, [-0.5 / s1, 0.5 / s1, -0.5 / s1, 0.5 / s1, 0.75 / s2, -0.25 / s2, -0.25 / s2, -0.25 / s2], rtol=1e-15)
    assert adv[1] == pytest.approx(0.866025, abs=1e-6)
    assert adv[4] == pytest.approx(1.5, abs=1e-6)


def test_seed_004_group_scale_population_std():
    adv = GRPOAdvantage()(SEED_004_REWARDS, num_generations=4, scale="group", std="population", eps=0.0)
    np.testing.assert_allclose(adv[:4], [-1.0, 1.0, -1.0, 1.0])


def test_rloo_hand_checked():
    # one group [1, 2, 3]: leave-one-out baselines [2.5, 2.0, 1.5]
    cfg = AdvantageConfig(estimator="rloo", scale="none")
    assert advantages([1.0, 2.0, 3.0], [0, 0, 0], cfg).tolist() == [-1.5, 0.0, 1.5]
    cfg = AdvantageConfig(estimator="rloo", scale="group")  # population std sqrt(2/3)
    np.testing.assert_allclose(advantages([1.0, 2.0, 3.0], [0, 0, 0], cfg), [-1.8371173, 0.0, 1.8371173], rtol=1e-7)


def test_rloo_seed_001_interface():
    adv = RLOOAdvantage()(SEED_004_REWARDS, num_generations=4, scale="none")
    np.testing.assert_allclose(adv[:4], [-2 / 3, 2 / 3, -2 / 3, 2 / 3])
    np.testing.assert_allclose(adv[4:], [1.0, -1 / 3, -1 / 3, -1 / 3])


def test_batch_scale_hand_checked():
    # rewards [0, 1 | 2, 6]: population std of all = sqrt(20.75 / 4) = 2.2776083
    cfg = AdvantageConfig(scale="batch")
    np.testing.assert_allclose(
        advantages([0.0, 1.0, 2.0, 6.0], ["a", "a", "b", "b"], cfg),
        [-0.21952851, 0.21952851, -0.87811403, 0.87811403],
        rtol=1e-7,
    )


def test_sample_std_hand_checked():
    cfg = AdvantageConfig(std="sample")
    np.testing.assert_allclose(advantages([0.0, 1.0, 0.0, 1.0], [7] * 4, cfg), [-0.8660254, 0.8660254] * 2, rtol=1e-7)


def test_grouping_by_id_with_shuffled_rows():
    groups = ["b", "a", "b", "a", "a", "b"]
    rewards = [6.0, 0.0, 2.0, 1.0, 2.0, 4.0]
    # a: [0, 1, 2] -> mean 1, pop std sqrt(2/3); b: [6, 2, 4] -> mean 4, pop std sqrt(8/3)
    sa, sb = np.sqrt(2 / 3), np.sqrt(8 / 3)
    expected = [2 / sb, -1 / sa, -2 / sb, 0.0, 1 / sa, 0.0]
    np.testing.assert_allclose(advantages(rewards, groups, AdvantageConfig()), expected, rtol=1e-12)


@pytest.mark.parametrize("estimator", ["grpo", "rloo", "mean"])
def test_single_row_and_zero_variance_groups_give_zero(estimator):
    cfg = AdvantageConfig(estimator=estimator)
    # 0.1 * 3 equal floats: their mean is not exactly 0.1, yet the advantage must be exactly 0
    adv = advantages([5.0, 0.1, 0.1, 0.1], ["solo", "g", "g", "g"], cfg)
    assert adv.tolist() == [0.0, 0.0, 0.0, 0.0]


def test_mean_aliases_are_unscaled():
    for name in ("mean", "drgrpo", "unbiased"):
        cfg = AdvantageConfig(estimator=name)
        assert cfg.estimator == "mean" and cfg.scale == "none"
        assert advantages([1.0, 0.0], [0, 0], cfg).tolist() == [0.5, -0.5]


def test_mean_with_explicit_scale_is_an_error():
    with pytest.raises(UsageError, match="never scaled"):
        AdvantageConfig(estimator="mean", scale="group")


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown `scale` 'gdpo' \(valid: group, batch, none\)"):
        GRPOAdvantage()([0.0, 1.0], num_generations=2, scale="gdpo")
    with pytest.raises(UsageError, match="unknown `estimator` 'ppo'"):
        AdvantageConfig(estimator="ppo")


def test_num_generations_edge_cases():
    # num_generations=1: every group has one row -> all zeros (Twinkle would return raw rewards)
    assert GRPOAdvantage()([0.3, 0.9], num_generations=1).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="do not split into groups"):
        GRPOAdvantage()([0.0, 1.0, 0.0], num_generations=2)


def test_two_dimensional_rewards_are_summed_like_twinkle():
    adv = GRPOAdvantage()([[0.0, 0.0], [1.0, 0.0], [0.5, 0.5], [0.0, 0.0]], num_generations=2, scale="none")
    assert adv.tolist() == [-0.5, 0.5, 0.5, -0.5]


def test_torch_tensor_in_gives_tensor_of_same_dtype_out():
    torch = pytest.importorskip("torch")
    rewards = torch.tensor(SEED_004_REWARDS, dtype=torch.float32)
    adv = GRPOAdvantage()(rewards, num_generations=4, scale="none")
    assert isinstance(adv, torch.Tensor) and adv.dtype == torch.float32
    assert adv.tolist() == [-0.5, 0.5, -0.5, 0.5, 0.75, -0.25, -0.25, -0.25]


def test_numpy_in_gives_float64_numpy_out():
    adv = GRPOAdvantage()(np.array(SEED_004_REWARDS, dtype=np.float32), num_generations=4, scale="none")
    assert isinstance(adv, np.ndarray) and adv.dtype == np.float64
