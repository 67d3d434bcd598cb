"""Groups of one row: 0 (default, TRL), the reward (Twinkle), mean 0 and std 1 (verl), or refused
(verl's grpo_passk)."""

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
