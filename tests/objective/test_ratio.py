"""Ratios: token level (PPO), sequence level (GSPO), and the clamp before exp."""

import math

import numpy as np
import pytest

from grpo_cli import policy_objective


def test_sequence_level_ratio_gspo():
    # log-ratios 0.1 and 0.3: sequence rho = e^0.2 = 1.2214 for both tokens, clipped to 1.2
    new, old = [[-0.9, -0.7]], [[-1.0, -1.0]]
    assert policy_objective(new, old, advantage_values=[1.0], ratio_level="sequence") == pytest.approx(2.4, rel=1e-14)
    token_level = math.exp(0.1) + 1.2
    assert policy_objective(new, old, advantage_values=[1.0]) == pytest.approx(token_level, rel=1e-14)


def test_huge_log_ratio_is_clamped_and_counted():
    out = policy_objective([[-0.0]], [[-1000.0]], advantage_values=[-1.0], details=True)
    assert out["clamped_tokens"] == 1
    assert out["objective"] == -math.exp(20.0)
    assert np.isfinite(out["ratio"]["max"])
