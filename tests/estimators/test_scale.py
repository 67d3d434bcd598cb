"""Scales: the group's std, the std of every reward, or 1; std with ddof 0 or 1, plus eps."""

import numpy as np

from grpo_cli import AdvantageConfig, advantages


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


def test_eps_is_added_to_the_std():
    # group [0, 2]: population std 1, so A = -+1 / (1 + 0.5)
    cfg = AdvantageConfig(eps=0.5)
    assert advantages([0.0, 2.0], [0, 0], cfg).tolist() == [-1 / 1.5, 1 / 1.5]
