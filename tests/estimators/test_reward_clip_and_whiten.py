"""--reward-clip (before the baseline) and --whiten (after the estimator, over the input)."""

import numpy as np
import pytest

from grpo_cli import AdvantageConfig, UsageError, advantages

from ..conftest import run_grpo, write_jsonl_rows


def test_reward_clip_comes_before_the_baseline():
    # [5, -20] clipped to [5, -10]: mean -2.5, so r - mean = [7.5, -7.5]
    cfg = AdvantageConfig(estimator="mean", reward_clip=(-10, 10))
    assert advantages([5.0, -20.0, 1.0, 0.0], list("aabb"), cfg).tolist() == [7.5, -7.5, 0.5, -0.5]
    # clipping can remove a group's signal: [20, 30] -> [10, 10]
    assert advantages([20.0, 30.0], list("aa"), cfg).tolist() == [0.0, 0.0]


def test_whiten_as_trl_normalize_advantages():
    # TRL RLOO: A = r - mean of the others, then (A - mean(A)) / (nanstd(A) + 1e-4) over the batch
    r = [1.0, 0.0, 1.0, 0.0, 0.5, 0.25]
    a = np.array([1 - 0.5, 0 - 1.0, 1 - 0.5, 0 - 0.375, 0.5 - 0.125, 0.25 - 0.25])
    expected = (a - a.mean()) / (a.std(ddof=1) + 1e-4)
    cfg = AdvantageConfig(estimator="rloo", scale="none", whiten=True, whiten_eps=1e-4)
    np.testing.assert_allclose(advantages(r, list("aaabbb"), cfg), expected, rtol=1e-14)


def test_whiten_is_file_wide_in_the_engine(tmp_path):
    """Windows of groups are whitened together: the CLI gives what the API gives."""
    rng = np.random.default_rng(3)
    rewards = rng.random(200_000)
    ids = np.repeat(np.arange(25_000), 8)
    src = write_jsonl_rows(tmp_path / "r.jsonl", [{"prompt_id": int(i), "reward": float(r)} for i, r in zip(ids, rewards)])
    out = tmp_path / "a.parquet"
    run_grpo("advantages", str(src), "--whiten", "-o", str(out), "-q")
    import pyarrow.parquet as pq

    expected = advantages(rewards, ids, AdvantageConfig(whiten=True))
    assert pq.read_table(out)["advantage"].to_numpy().tolist() == expected.tolist()


@pytest.mark.parametrize(
    "options, message",
    [
        ({"reward_clip": (1.0, 1.0)}, "`reward_clip` must be LO < HI"),
        ({"whiten_eps": 1e-4}, "`whiten_eps` applies only with `whiten`"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(UsageError, match=message):
        AdvantageConfig(**options)


def test_cli_range_syntax(sample_parquet):
    proc = run_grpo("advantages", str(sample_parquet), "--reward-clip", "1", check=False)
    assert proc.returncode == 2 and proc.stderr.decode() == "Error: --reward-clip takes LO,HI (two numbers; found '1')\n"
