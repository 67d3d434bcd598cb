"""Groups of one row: 0 (default, TRL), the reward (Twinkle), mean 0 and std 1 (verl), or refused
(verl's grpo_passk)."""

import json

import numpy as np
import pytest

from grpo_cli import AdvantageConfig, InputError, UsageError, advantages

from ..conftest import run_grpo

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


# verl 0.9.1's estimators each treat a group of one row their own way (core_algos.py; case B of
# /work/research/41/ref-verl-0.9.1.json: a group of one 0.7 beside groups (0.1 x 3),
# (1.0, 1.0005, 1.0) and (0, 2); 8 of the 9 rewards are nonzero).
CASE_B = [0.7, 0.1, 0.1, 0.1, 1.0, 1.0005, 1.0, 0.0, 2.0]
CASE_B_GROUPS = ["s0", "e0", "e0", "e0", "v0", "v0", "v0", "n0", "n0"]


def test_gpg_keeps_alpha_for_a_group_of_one():
    # gpg: mean 0 and f_norm 1 for a group of one, so A = alpha (r - 0); alpha = 9 / 8 -> 0.7875;
    # the pair (0, 2): alpha (-1, 1) = (-1.125, 1.125). verl: 0.7875, ..., -1.125, 1.125
    adv = advantages(CASE_B, CASE_B_GROUPS, AdvantageConfig(estimator="gpg", singleton="unit-std"))
    assert adv[0] == 9 / 8 * 0.7 and adv[7:].tolist() == [-1.125, 1.125]
    assert advantages(CASE_B, CASE_B_GROUPS, AdvantageConfig(estimator="gpg", singleton="reward"))[0] == 0.7  # 'reward' is r itself


@pytest.mark.parametrize("singleton, expected", [("reward", 0.7), ("zero", 0.0)])
def test_rloo_and_rloo_vectorized(singleton, expected):
    # verl rloo leaves a group of one r (n / (n - 1) applies only when n > 1); rloo_vectorized
    # gives (n r - sum) / max(n - 1, 1) [n > 1] = 0. Both: (0, 2) -> (-2, 2)
    adv = advantages(CASE_B, CASE_B_GROUPS, AdvantageConfig(estimator="rloo", scale="none", singleton=singleton))
    assert adv[0] == expected and adv[7:].tolist() == [-2.0, 2.0]


def test_error_refuses_a_group_of_one_as_passk():
    # verl grpo_passk: "Pass@k requires at least 2 samples per group"
    with pytest.raises(InputError, match=r"reward 0: its group has one row \(`singleton` 'error', as verl's grpo_passk\)"):
        advantages(CASE_B, CASE_B_GROUPS, AdvantageConfig(estimator="passk", singleton="error"))
    # the row named is the input's, past an unscorable row that left its group
    with pytest.raises(InputError, match="reward 3: its group has one row"):
        advantages([np.nan, 1.0, 0.0, 0.5], ["a", "b", "b", "c"], AdvantageConfig(estimator="passk", singleton="error"))
    assert advantages([1.0, 0.0], "bb", AdvantageConfig(estimator="passk", scale="none", singleton="error")).tolist() == [1.0, 0.0]


def test_error_names_the_row_in_the_file(tmp_path):
    src = tmp_path / "r.jsonl"
    src.write_text("".join(f'{{"prompt_id": "{g}", "reward": {r}}}\n' for g, r in zip("aabbc", [1.0, 0.0, 1.0, 0.0, 1.0])))
    proc = run_grpo("advantages", str(src), "--estimator", "passk", "--singleton", "error", check=False)
    assert proc.returncode == 1 and "row 4" in proc.stderr.decode() and "its group has one row" in proc.stderr.decode(), proc.stderr.decode()


# twinkle-kit 0.5.1 GRPOAdvantage, num_generations 1 (advantage/grpo.py:48-55), every group one row:
# rewards (1, 0, 0.5, 0.2, 0.9, 0.4), mean 0.5; r - mean = (0.5, -0.5, 0, -0.3, 0.4, -0.1);
# sample std = sqrt((0.25 + 0.25 + 0 + 0.09 + 0.16 + 0.01) / 5) = sqrt(0.152) = 0.389872;
# batch: (r - mean) / (0.389872 + 1e-8), row 0 = 1.2824729 (ref-twinkle-0.5.1.json); group: r
TWINKLE_R = [1.0, 0.0, 0.5, 0.2, 0.9, 0.4]


@pytest.mark.parametrize(
    "scale, expected",
    [
        ("group", TWINKLE_R),
        ("batch", [1.2824729072117067, -1.2824729072117067, 0.0, -0.7694837443270239, 1.0259783257693653, -0.2564945814423413]),
        ("none", [0.5, -0.5, 0.0, -0.3, 0.4, -0.1]),
    ],
)
def test_batch_is_twinkles_num_generations_one(scale, expected):
    centered = np.array(TWINKLE_R) - 0.5
    assert np.sqrt(np.sum(centered**2) / 5) == pytest.approx(np.sqrt(0.152), rel=1e-15)
    for config in (
        AdvantageConfig(preset="twinkle", scale=scale),
        AdvantageConfig(scale=scale, singleton="batch", **({} if scale == "none" else {"std": "sample", "eps": 1e-8})),
    ):
        np.testing.assert_allclose(advantages(TWINKLE_R, list("abcdef"), config), expected, rtol=1e-15, atol=1e-16)
    # a batch of one row: Twinkle's std is 1, so A = (r - r) / (1 + 1e-8) = 0
    assert advantages([0.7], ["a"], AdvantageConfig(preset="twinkle", scale="batch")).tolist() == [0.0]


def test_batch_reads_every_row_of_the_file(tmp_path):
    # the batch mean is the file's, not a window's: lone rows 1, 0, 0.5 beside a pair (0.2, 0.9)
    # under scale none: lone rows r - mean(1, 0, 0.5, 0.2, 0.9) = r - 0.52, the pair r - 0.55
    src = tmp_path / "r.jsonl"
    src.write_text("".join(f'{{"prompt_id": "{g}", "reward": {r}}}\n' for g, r in zip("abcdd", [1.0, 0.0, 0.5, 0.2, 0.9])))
    out = tmp_path / "o.jsonl"
    run_grpo("advantages", str(src), "--preset", "twinkle", "--scale", "none", "-q", "-o", str(out))
    got = [json.loads(line)["advantage"] for line in out.read_text().splitlines()]
    np.testing.assert_allclose(got, [0.48, -0.52, -0.02, -0.35, 0.35], rtol=1e-14, atol=1e-15)


def test_twinkle_rloo_refuses_a_group_of_one():
    # RLOOAdvantage raises ValueError('Invalid') for num_generations <= 1 (rloo.py:45-48)
    with pytest.raises(InputError, match="its group has one row"):
        advantages(TWINKLE_R, list("abcdef"), AdvantageConfig(preset="twinkle", estimator="rloo"))
