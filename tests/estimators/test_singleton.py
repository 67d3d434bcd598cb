"""Groups of one row: 0 (default, TRL), the reward (Twinkle), or mean 0 and std 1 (verl)."""

import numpy as np
import pytest

from grpo_cli import AdvantageConfig, UsageError, advantages

REWARDS, GROUPS = [2.0, 1.0, 0.0], ["alone", "pair", "pair"]


@pytest.mark.parametrize("singleton, expected", [("zero", 0.0), ("reward", 2.0), ("unit-std", 2.0 / (1 + 1e-6))])
def test_group_of_one(singleton, expected):
    adv = advantages(REWARDS, GROUPS, AdvantageConfig(std="sample", eps=1e-6, singleton=singleton))
    pair = 0.5 / (np.sqrt(0.5) + 1e-6)  # the pair is unaffected: (1 - 0.5) / (sample std + eps)
    assert adv[0] == expected and adv[1:].tolist() == [pair, -pair]


def test_unit_std_unscaled_is_the_reward():
    # verl with norm_adv_by_std_in_grpo=False (Dr.GRPO): mean 0, no division
    assert advantages(REWARDS, GROUPS, AdvantageConfig(estimator="mean", singleton="unit-std"))[0] == 2.0


def test_unit_std_refuses_the_batch_scale():
    with pytest.raises(UsageError, match="`singleton` 'unit-std' gives a group of one std 1, which `scale` 'batch' does not use"):
        AdvantageConfig(scale="batch", singleton="unit-std")
