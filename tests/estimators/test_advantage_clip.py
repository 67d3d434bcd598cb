"""--advantage-clip: (r - b) / s clipped after the baseline, before any whitening, as
OpenRLHF's reward clip (trainer/ppo_utils/experience_maker.py:268-290, models/utils.py:141-142
of 0.11.2: the baseline first, then compute_reward clamps the result to clip_range, default
[-10, 10]); --reward-clip clips before the baseline."""

import numpy as np
import pytest

from grpo_cli import AdvantageConfig, UsageError, advantages
from grpo_cli.estimators import row_inputs

from ..conftest import read_json, run_grpo

# the fixed case of /work/research/41/openrlhf_twinkle_case.py (2 prompts x 3 rows)
REWARDS = [1.0, 0.0, 0.5, 0.2, 0.9, 0.4]
GROUP_NORM = {"estimator": "grpo", "scale": "group", "std": "sample", "eps": 1e-9}  # OpenRLHF group_norm


def test_clip_after_the_group_norm_as_openrlhf():
    # group a (1, 0, 0.5): mean 0.5, sample std 0.5 -> z = (1, -1, 0) -> clipped (0.5, -0.5, 0)
    # group b (0.2, 0.9, 0.4): mean 0.5, centred (-0.3, 0.4, -0.1), sample var 0.26 / 2 = 0.13
    #   -> z = (-0.832, 1.109, -0.277) -> clipped (-0.5, 0.5, -0.1 / sqrt(0.13))
    # ref-openrlhf-0.11.2.json 'group_norm(reward clip -0.5,0.5)': 0.5, -0.5, 0, -0.5, (no token), -0.27735009734338373
    got = advantages(REWARDS, list("aaabbb"), AdvantageConfig(**GROUP_NORM, advantage_clip=(-0.5, 0.5)))
    np.testing.assert_allclose(got, [0.5, -0.5, 0.0, -0.5, 0.5, -0.1 / (np.sqrt(0.13) + 1e-9)], rtol=1e-14)
    assert abs(got[5] - -0.27735009734338373) <= 1e-12


def test_clip_before_or_after_the_baseline_differ():
    # [5, -20]: the reward clip [-10, 10] gives (5, -10) -> r - mean = (7.5, -7.5);
    # the advantage clip takes r - mean = (12.5, -12.5) -> (10, -10)
    config = {"estimator": "mean"}
    assert advantages([5.0, -20.0], "aa", AdvantageConfig(**config, reward_clip=(-10, 10))).tolist() == [7.5, -7.5]
    assert advantages([5.0, -20.0], "aa", AdvantageConfig(**config, advantage_clip=(-10, 10))).tolist() == [10.0, -10.0]


def test_unscorable_rows_keep_zero():
    # a lower bound above 0 lifts the scored rows alone
    got = advantages([np.nan, 1.0, 0.0], "abb", AdvantageConfig(estimator="mean", advantage_clip=(0.25, 2.0)))
    assert got.tolist() == [0.0, 0.5, 0.25]


def test_before_the_whitening():
    # rloo (1, 0 | 3, 0): (1, -1, 3, -3) clipped to [-2, 2]: (1, -1, 2, -2), then whitened (mean 0, sample std sqrt(10 / 3))
    config = AdvantageConfig(estimator="rloo", scale="none", advantage_clip=(-2, 2), whiten=True, whiten_eps=0.0)
    np.testing.assert_allclose(advantages([1.0, 0.0, 3.0, 0.0], "aabb", config), np.array([1, -1, 2, -2]) / np.sqrt(10 / 3), rtol=1e-14)


def test_token_level_estimators_clip_the_reward():
    # reinforce, gae: no baseline, so OpenRLHF's clip is of the score, before the per-token KL
    values = np.array([[20.0], [-3.0]])
    for estimator in ("reinforce", "gae"):
        assert row_inputs(values, ["r"], AdvantageConfig(estimator=estimator, advantage_clip=(-10, 10))).r.tolist() == [10.0, -3.0]
    assert row_inputs(values, ["r"], AdvantageConfig(advantage_clip=(-10, 10))).r.tolist() == [20.0, -3.0]  # row level: after the baseline


def test_bad_bounds():
    with pytest.raises(UsageError, match=r"`advantage_clip` must be LO < HI \(found 1.0, -1.0\)"):
        AdvantageConfig(advantage_clip=(1.0, -1.0))


def test_cli(sample_parquet, tmp_path):
    proc = run_grpo("advantages", str(sample_parquet), "--advantage-clip", "2", check=False)
    assert proc.returncode == 2 and proc.stderr.decode() == "Error: --advantage-clip takes LO,HI (two numbers; found '2')\n"
    run_grpo("advantages", str(sample_parquet), "--advantage-clip=-0.5,0.5", "--summary-json", str(tmp_path / "s.json"), "-q")
    summary = read_json(tmp_path / "s.json")
    assert summary["config"]["advantage_clip"] == [-0.5, 0.5] and -0.5 <= summary["advantage"]["min"] and summary["advantage"]["max"] <= 0.5
