"""--kl-at after-baseline: the KL in the reward after a row-level estimator's baseline, token by
token, as OpenRLHF 0.11.2 (trainer/ppo_utils/experience_maker.py:268-321, models/utils.py:131-159):
the baseline on the scalar reward, then per token rho_t = -beta KL_t + A [t = last], and the
cumulative return with gamma 1 over the valid tokens:

    A_t = A - beta * sum_{s >= t, valid} KL_s,  KL_s = old_s - ref_s (k1)

whitened over the valid tokens afterwards only by the estimators that whiten (reinforce_baseline)."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_cli import AdvantageConfig, UsageError, advantages, objective_file

from ..conftest import run_grpo

MASK = [[1, 0, 1, 1], [1, 1, 0, 0]]
OLD = [[-0.5, -9.0, -1.0, -0.2], [-1.0, -2.0, 0.0, 0.0]]
REF = [[-0.6, 0.0, -1.1, -0.5], [-1.0, -1.0, 0.0, 0.0]]


@pytest.fixture
def rollout(tmp_path):
    path = tmp_path / "kl.parquet"
    table = {"prompt_id": ["a", "a"], "reward": [1.0, 0.0], "response_mask": MASK, "old_logprobs": OLD, "ref_logprobs": REF}
    pq.write_table(pa.table(table), path)
    return path


def token_advantages(path, tmp_path, *args):
    out = tmp_path / "out.parquet"
    run_grpo("advantages", str(path), "--estimator", "rloo", "--scale", "none", "--kl-in-reward", "0.5", *args, "-o", str(out), "-q")
    table = pq.read_table(out)
    return table["token_advantage" if "token_advantage" in table.column_names else "advantage"].to_pylist()


def test_after_the_baseline_per_token(rollout, tmp_path):
    # rloo: A = (1, -1). Row 0's valid tokens: KL = old - ref = (0.1, 0.1, 0.3), to go (0.5, 0.4, 0.3):
    # A_t = 1 - 0.5 (0.5, 0.4, 0.3) = (0.75, 0.8, 0.85), its masked entry 0.
    # Row 1: KL = (0, -1), to go (-1, -1): A_t = -1 + 0.5 = (-0.5, -0.5), then two masked entries.
    got = token_advantages(rollout, tmp_path, "--kl-at", "after-baseline")
    np.testing.assert_allclose(got[0], [0.75, 0.0, 0.8, 0.85], rtol=1e-14)
    np.testing.assert_allclose(got[1], [-0.5, -0.5, 0.0, 0.0], rtol=1e-14)


def test_before_the_baseline_is_one_number_per_row(rollout, tmp_path):
    # r - 0.5 sum KL = (1 - 0.25, 0 + 0.5) = (0.75, 0.5); rloo: (0.25, -0.25)
    np.testing.assert_allclose(token_advantages(rollout, tmp_path), [0.25, -0.25], rtol=1e-14)


def test_openrlhf_group_norm_row(tmp_path):
    # the fixed case of /work/research/41/openrlhf_twinkle_case.py, group a = (1, 0, 0.5): group_norm z_0 =
    # 0.5 / (0.5 + 1e-9); row 0's KL = (-0.7 + 0.6, -1.0 + 1.1, -0.35 + 0.5) = (-0.1, 0.1, 0.15), to go
    # (0.15, 0.25, 0.15): A_t = z_0 - 0.01 (0.15, 0.25, 0.15). OpenRLHF (float32 KL): 0.9985, 0.9975, 0.9985.
    path = tmp_path / "case.parquet"
    old = [[-0.70, -1.00, -0.35], [-1.60, -0.12, -0.95, -1.40], [-0.45, -0.60]]
    ref = [[-0.60, -1.10, -0.50], [-1.70, -0.20, -0.80, -1.30], [-0.50, -0.80]]
    pq.write_table(pa.table({"prompt_id": ["a"] * 3, "reward": [1.0, 0.0, 0.5], "old_logprobs": old, "ref_logprobs": ref}), path)
    out = tmp_path / "out.parquet"
    args = ["--estimator", "grpo", "--std", "sample", "--eps", "1e-9", "--kl-in-reward", "0.01", "--kl-at", "after-baseline"]
    run_grpo("advantages", str(path), *args, "-o", str(out), "-q")
    row = pq.read_table(out)["token_advantage"].to_pylist()[0]
    z = 0.5 / (0.5 + 1e-9)
    np.testing.assert_allclose(row, [z - 0.01 * 0.15, z - 0.01 * 0.25, z - 0.01 * 0.15], rtol=1e-14)
    np.testing.assert_allclose(row, [0.9985, 0.9975, 0.9985], rtol=1e-6)


def test_whitened_after_the_kl(rollout, tmp_path):
    # reinforce-baseline: r - mean = (0.5, -0.5); with the KL after: (0.5 - 0.5 (0.5, 0.4, 0.3), -0.5 + 0.5 (1, 1))
    # = (0.25, 0.3, 0.35, 0, 0) over the 5 valid tokens, then OpenRLHF's (x - mean) / sqrt(max(var_ddof0, 1e-8))
    out = tmp_path / "out.parquet"
    openrlhf = ["--whiten-std", "population", "--whiten-eps-at", "var-floor", "--whiten-eps", "1e-8"]
    run_grpo(
        "advantages",
        str(rollout),
        "--estimator",
        "reinforce-baseline",
        "--kl-in-reward",
        "0.5",
        "--kl-at",
        "after-baseline",
        *openrlhf,
        "-o",
        str(out),
        "-q",
    )
    x = np.array([0.25, 0.3, 0.35, 0.0, 0.0])
    expected = (x - x.mean()) / np.sqrt(x.var())
    got = pq.read_table(out)["token_advantage"].to_pylist()
    np.testing.assert_allclose([got[0][0], *got[0][2:], *got[1][:2]], expected, rtol=1e-12)


def test_refused_where_it_does_not_apply(rollout):
    with pytest.raises(UsageError, match="`kl_at` applies to `kl_in_reward`"):
        AdvantageConfig(kl_at="after-baseline")
    with pytest.raises(UsageError, match="`kl_in_reward` reads each token's old and reference log-probs"):
        advantages([1.0, 0.0], "aa", AdvantageConfig(kl_in_reward=0.1))  # rewards alone: no tokens to read it from
    config = AdvantageConfig(estimator="rloo", scale="none", kl_in_reward=0.1, kl_at="after-baseline")
    with pytest.raises(UsageError, match="`kl_at` 'after-baseline' gives each token its own advantage"):
        objective_file(str(rollout), advantage_config=config, logprobs_col="old_logprobs", old_logprobs_col="old_logprobs")
    proc = run_grpo("advantages", str(rollout), "--kl-in-reward", "0.1", "--kl-at", "after-baseline", "-o", "x.parquet", "--round", "3", check=False)
    assert proc.returncode == 2 and "--round rounds the per-row advantage column" in proc.stderr.decode()
