"""``multi_reward`` 'normalize-then-sum-tokens': verl 0.9.1's GDPO (core_algos.py:362-468,
compute_gdpo_outcome_advantage). Each reward column is normalised per group by verl's GRPO
(sample std, eps 1e-6 on the std, a group of one row r / (1 + 1e-6)), the columns are summed
with their weights, and the sum is whitened by masked_whiten over the valid tokens
(torch_functional.py:329-346): a row counts once per token, rows without tokens get 0."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_cli import AdvantageConfig, UsageError, advantages

from ..conftest import run_grpo

# Case A of /work/research/41/ref-verl-0.9.1.json: 2 prompts x 3 rows, response masks
# [11100, 11011, 11000, 11110, 00000, 10000] (row 1 has a hole, row 4 no token).
GROUPS = ["p0", "p0", "p0", "p1", "p1", "p1"]
ACC = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
FMT = [0.5, 1.0, 0.0, 1.0, 1.0, 0.25]
LENGTHS = [3, 4, 2, 4, 0, 1]
MASKS = [[1, 1, 1, 0, 0], [1, 1, 0, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 1, 0], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0]]
# verl's own output (float32 inside: the reward components are read as float32), first valid token
VERL_WEIGHTS_1_05 = [1.482939092683919, -0.8164111936609036, 0.5498001222320592, -0.13330581381207013, 0.0, -1.7495494966784086]
VERL_NO_WEIGHTS = [1.1857217632780395, -0.08715107499541641, -0.5530535433022586, 0.18183849558388404, 0.0, -2.8298078874018633]

VERL = {
    "estimator": "grpo",
    "scale": "group",
    "std": "sample",
    "eps": 1e-6,
    "singleton": "unit-std",
    "multi_reward": "normalize-then-sum-tokens",
    "whiten_std": "sample",
    "whiten_eps_at": "var",
    "whiten_eps": 1e-8,
}


def derived(w_fmt: float) -> np.ndarray:
    """The formula by hand, in float64.

    acc, p0 = (1, 0, 1): mean 2/3, sample std sqrt(((1/3)^2 + (2/3)^2 + (1/3)^2) / 2) = sqrt(1/3);
    acc, p1 = (0, 1, 0): mean 1/3, the same std, the signs flipped.
    fmt, p0 = (0.5, 1, 0): mean 0.5, centred (0, 0.5, -0.5), std 0.5.
    fmt, p1 = (1, 1, 0.25): mean 0.75, centred (0.25, 0.25, -0.5), var 0.375 / 2 = 0.1875.
    S = z_acc + w_fmt z_fmt; over tokens (row i counted L_i times, N = 14):
    mu = sum L_i S_i / N, var = sum L_i (S_i - mu)^2 / (N - 1), A = (S - mu) / sqrt(var + 1e-8).
    """
    eps = 1e-6
    z_acc = np.array([1 / 3, -2 / 3, 1 / 3, -1 / 3, 2 / 3, -1 / 3]) / (np.sqrt(1 / 3) + eps)
    z_fmt = np.concatenate([np.array([0.0, 0.5, -0.5]) / (0.5 + eps), np.array([0.25, 0.25, -0.5]) / (np.sqrt(0.1875) + eps)])
    s = z_acc + w_fmt * z_fmt
    n = np.array(LENGTHS, dtype=float)
    mu = np.sum(n * s) / n.sum()
    var = np.sum(n * (s - mu) ** 2) / (n.sum() - 1)
    return np.where(n > 0, (s - mu) / np.sqrt(var + 1e-8), 0.0)


@pytest.mark.parametrize("weights, w_fmt, verl", [((1.0, 0.5), 0.5, VERL_WEIGHTS_1_05), (None, 1.0, VERL_NO_WEIGHTS)])
def test_gdpo_as_verl(weights, w_fmt, verl):
    config = AdvantageConfig(**VERL, reward_weights=weights)
    got = advantages(np.array([ACC, FMT]).T, GROUPS, config, lengths=LENGTHS)
    np.testing.assert_allclose(got, derived(w_fmt), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(got, verl, rtol=1e-6, atol=1e-6)  # verl's float32 components: ~1e-7 apart


def test_one_column_is_grpo_then_token_whitening():
    # verl without gdpo_reward_keys: [token_level_rewards] alone, i.e. GRPO, then masked_whiten
    r = [1.0, 0.4, 0.5, 0.2, 0.9, -0.3]
    verl = [1.7092294200212987, -0.8195074583744733, -0.3980513119751779, 0.014049665593965515, 0.0, -1.1097544666304113]
    np.testing.assert_allclose(advantages(r, GROUPS, AdvantageConfig(**VERL), lengths=LENGTHS), verl, rtol=1e-8)


def test_rows_weigh_by_their_tokens_unlike_normalize_then_sum():
    # the same sum of GRPO advantages, whitened over rows (TRL) or over tokens (verl)
    rows = {**VERL, "multi_reward": "normalize-then-sum"}
    values = np.array([ACC, FMT]).T
    by_rows = advantages(values, GROUPS, AdvantageConfig(**rows, reward_weights=(1.0, 0.5)))
    by_tokens = advantages(values, GROUPS, AdvantageConfig(**VERL, reward_weights=(1.0, 0.5)), lengths=LENGTHS)
    assert by_rows[4] != 0.0 and by_tokens[4] == 0.0  # the row without tokens leaves the whitening
    assert not np.allclose(by_rows, by_tokens)


def test_needs_each_rows_tokens():
    with pytest.raises(UsageError, match="`multi_reward` 'normalize-then-sum-tokens' needs `lengths`"):
        advantages(np.array([ACC, FMT]).T, GROUPS, AdvantageConfig(**VERL))
    with pytest.raises(UsageError, match="estimator 'grpo' takes no `lengths`"):
        advantages(ACC, GROUPS, AdvantageConfig(), lengths=LENGTHS)


def test_the_file_command_reads_the_mask(tmp_path):
    src = tmp_path / "gdpo.parquet"
    table = pa.table({"prompt_id": GROUPS, "acc": ACC, "fmt": FMT, "response_mask": MASKS})
    pq.write_table(table, src)
    out = tmp_path / "out.parquet"
    args = ["--reward-col", "acc", "--reward-col", "fmt", "--reward-weights", "1,0.5", "--multi-reward", "normalize-then-sum-tokens"]
    options = [f"--{k.replace('_', '-')}={v}" for k, v in VERL.items() if k != "multi_reward"]
    run_grpo("advantages", str(src), *args, *options, "-o", str(out), "-q")
    np.testing.assert_allclose(pq.read_table(out)["advantage"].to_numpy(), derived(0.5), rtol=1e-13, atol=1e-15)
    pq.write_table(table.drop_columns(["response_mask"]), src)
    proc = run_grpo("advantages", str(src), *args, check=False)
    assert proc.returncode != 0 and "--multi-reward 'normalize-then-sum-tokens' needs each row's tokens" in proc.stderr.decode()


@pytest.mark.parametrize(
    "options, message",
    [
        ({"kl_in_reward": 0.1}, "`kl_in_reward` subtracts from one reward, and `multi_reward` 'normalize-then-sum-tokens' estimates each column"),
        ({"estimator": "gae"}, "`multi_reward` 'normalize-then-sum-tokens' estimates each reward column per row, and estimator 'gae' is token-level"),
    ],
)
def test_refused_where_it_does_not_apply(options, message):
    with pytest.raises(UsageError, match=message):
        AdvantageConfig(multi_reward="normalize-then-sum-tokens", **options)


def test_whitening_is_part_of_it():
    config = AdvantageConfig(multi_reward="normalize-then-sum-tokens")
    assert config.whiten and config.figures["multi_reward"] == "normalize-then-sum-tokens"
