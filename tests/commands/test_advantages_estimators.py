"""The installed `grpo advantages` with the estimators that read more than rewards: token-level
REINFORCE++ and GAE on padded, masked rows (as verl writes them), OPO's lengths, ReMax's
baseline column, several reward columns, and the KL in the reward. Expected numbers come from
loops written from the frameworks' formulas."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_cli import AdvantageConfig, advantages

from ..conftest import run_grpo

# Two prompts, two responses each, padded to 4 tokens with response_mask (verl's layout).
MASK = [[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]
OLD = [[-0.5, -0.25, -1.0, 0.0], [-0.125, -0.5, 0.0, 0.0], [-0.25, -0.25, -0.5, -1.0], [-2.0, 0.0, 0.0, 0.0]]
REF = [[-0.25, -0.5, -1.5, 0.0], [-0.125, -0.25, 0.0, 0.0], [-0.5, -0.25, -0.25, -0.5], [-1.0, 0.0, 0.0, 0.0]]
VALUES = [[0.25, 0.5, 0.75, 9.0], [0.5, 0.25, 9.0, 9.0], [0.0, 0.125, 0.25, 0.5], [0.5, 9.0, 9.0, 9.0]]
REWARD = [1.0, 0.0, 0.5, 1.0]


@pytest.fixture
def padded(tmp_path):
    path = tmp_path / "verl.parquet"
    pq.write_table(
        pa.table(
            {
                "uid": ["a", "a", "b", "b"],
                "score": REWARD,
                "response_mask": MASK,
                "old_log_probs": OLD,
                "ref_log_prob": REF,
                "values": VALUES,
                "reward_baseline": [0.5, 0.5, 0.25, 0.25],
                "accuracy": [1.0, 0.0, None, 1.0],
                "format": [0.5, 0.5, None, 0.0],
            }
        ),
        path,
    )
    return path


def _token_rewards(beta):
    """verl: the score on the last valid token, minus beta * k1(old - ref) on every valid token."""
    out = []
    for r, m, old, ref in zip(REWARD, MASK, OLD, REF):
        n = sum(m)
        out.append([(r if t == n - 1 else 0.0) - beta * (old[t] - ref[t]) for t in range(n)])
    return out


def _whiten_verl(rows):
    """verl masked_whiten: (x - mean) * rsqrt(sample var + 1e-8) over every valid token."""
    flat = np.concatenate(rows)
    mu, var = flat.mean(), flat.var(ddof=1)
    return [list((np.array(r) - mu) / np.sqrt(var + 1e-8)) for r in rows]


def _written(out, column):
    return [row for row in pq.read_table(out)[column].to_pylist()]


def _padded_back(rows):
    return [list(r) + [0.0] * (4 - len(r)) for r in rows]


VERL_WHITEN = ["--whiten-std", "sample", "--whiten-eps-at", "var", "--whiten-eps", "1e-8"]


def test_reinforce_on_padded_rows_with_kl_in_the_reward(padded, tmp_path):
    beta, gamma = 0.1, 0.9
    returns = []
    for rewards in _token_rewards(beta):
        g, row = 0.0, []
        for x in reversed(rewards):
            g = x + gamma * g
            row.append(g)
        returns.append(row[::-1])
    out = tmp_path / "out.parquet"
    run_grpo(
        "advantages",
        str(padded),
        "--estimator",
        "reinforce",
        "--gamma",
        str(gamma),
        "--kl-in-reward",
        str(beta),
        *VERL_WHITEN,
        "-o",
        str(out),
        "--summary-json",
        str(tmp_path / "s.json"),
    )
    adv = _written(out, "token_advantage")
    assert [len(a) for a in adv] == [4, 4, 4, 4]  # one entry per token, padding included
    np.testing.assert_allclose(np.concatenate(adv), np.concatenate(_padded_back(_whiten_verl(returns))), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(np.concatenate(_written(out, "token_return")), np.concatenate(_padded_back(returns)), rtol=1e-12)
    assert [a[3] for a in adv[:2]] == [0.0, 0.0] and adv[3][1:] == [0.0, 0.0, 0.0]  # masked tokens carry 0
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["tokens"] == 10 and summary["columns"]["kl_logprobs"] == "old_log_probs"
    assert summary["advantage"]["mean"] == pytest.approx(0.0, abs=1e-12)
    assert summary["config"]["kl"] == "k1" and summary["config"]["gamma"] == gamma


def test_gae_with_a_values_column(padded, tmp_path):
    gamma, lam = 0.95, 0.9
    adv_rows, ret_rows = [], []
    for rewards, v in zip(_token_rewards(0.0), VALUES):
        n, last, nxt, row = len(rewards), 0.0, 0.0, []
        for t in reversed(range(n)):
            delta = rewards[t] + gamma * nxt - v[t]
            last = delta + gamma * lam * last
            nxt = v[t]
            row.append(last)
        adv_rows.append(row[::-1])
        ret_rows.append([a + v[t] for t, a in enumerate(row[::-1])])
    out = tmp_path / "gae.parquet"
    run_grpo("advantages", str(padded), "--estimator", "gae", "--gamma", str(gamma), "--lam", str(lam), *VERL_WHITEN, "-o", str(out), "-q")
    np.testing.assert_allclose(
        np.concatenate(_written(out, "token_advantage")), np.concatenate(_padded_back(_whiten_verl(adv_rows))), rtol=1e-12, atol=1e-15
    )
    np.testing.assert_allclose(np.concatenate(_written(out, "token_return")), np.concatenate(_padded_back(ret_rows)), rtol=1e-12)


def test_opo_counts_the_masked_tokens(padded, tmp_path):
    # lengths from response_mask: (3, 2 | 4, 1); group a: b = (3*1 + 2*0) / 5 = 0.6; group b: b = (4*0.5 + 1) / 5 = 0.6
    out = tmp_path / "opo.parquet"
    run_grpo("advantages", str(padded), "--estimator", "opo", "-o", str(out), "-q")
    np.testing.assert_allclose(pq.read_table(out)["advantage"].to_numpy(), [0.4, -0.6, -0.1, 0.4], rtol=1e-14)


def test_remax_reads_the_baseline_column(padded, tmp_path):
    out = tmp_path / "remax.parquet"
    run_grpo("advantages", str(padded), "--estimator", "remax", "-o", str(out), "-q")
    assert pq.read_table(out)["advantage"].to_pylist() == [0.5, -0.5, 0.25, 0.75]


def test_kl_in_the_reward_before_the_baseline(padded, tmp_path):
    # TRL RLOO: r - beta * sum_t k1(old - ref) over valid tokens, then the estimator
    kl = [sum(o - r for o, r, m in zip(old, ref, mask) if m) for old, ref, mask in zip(OLD, REF, MASK)]
    shaped = np.array(REWARD) - 0.5 * np.array(kl)
    out = tmp_path / "kl.parquet"
    run_grpo("advantages", str(padded), "--estimator", "rloo", "--scale", "none", "--kl-in-reward", "0.5", "-o", str(out), "-q")
    expected = [shaped[0] - shaped[1], shaped[1] - shaped[0], shaped[2] - shaped[3], shaped[3] - shaped[2]]
    np.testing.assert_allclose(pq.read_table(out)["advantage"].to_numpy(), expected, rtol=1e-14)


@pytest.mark.parametrize("mode", ["sum-then-normalize", "normalize-then-sum"])
def test_several_reward_columns_as_the_api(padded, tmp_path, mode):
    # row 2 has no reward at all: unscorable; its group keeps one row
    out = tmp_path / "multi.parquet"
    run_grpo(
        "advantages",
        str(padded),
        "--reward-col",
        "accuracy",
        "--reward-col",
        "format",
        "--reward-weights",
        "1,0.5",
        "--multi-reward",
        mode,
        "--std",
        "sample",
        "--eps",
        "1e-4",
        "-o",
        str(out),
        "-q",
    )
    config = AdvantageConfig(reward_weights=(1.0, 0.5), multi_reward=mode, std="sample", eps=1e-4)
    values = np.array([[1.0, 0.5], [0.0, 0.5], [np.nan, np.nan], [1.0, 0.0]])
    got = pq.read_table(out)["advantage"].to_numpy()
    np.testing.assert_array_equal(got, advantages(values, list("aabb"), config))
    if mode == "sum-then-normalize":  # r = (1.25, 0.25): (r - 0.75) / (sample std 0.7071 + 1e-4)
        np.testing.assert_allclose(got, [0.5 / (0.5**0.5 + 1e-4), -0.5 / (0.5**0.5 + 1e-4), 0.0, 0.0], rtol=1e-14)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--estimator", "grpo", "--values-col", "values"], "--values-col is not read: estimator 'grpo' reads no token column"),
        (["--estimator", "opo", "--values-col", "values"], "--values-col is read only by estimator 'gae' (found 'opo')"),
        (["--estimator", "reinforce", "-o", "x.parquet", "--round", "3"], "--round rounds the per-row advantage column"),
        (["--reward-weights", "1,2"], "--reward-weights has 2 weights for 1 reward columns"),
        (["--kl", "k3"], "--kl is the estimator of --kl-in-reward"),
        (["--whiten-eps-at", "var"], "--whiten-eps-at applies only with --whiten"),
        (["--estimator", "remax", "--baseline-col", "score", "--gamma", "0.5"], "estimator 'remax' takes no --gamma"),
    ],
)
def test_options_that_do_not_apply_are_refused(padded, tmp_path, args, message):
    proc = run_grpo("advantages", str(padded), *args, check=False)
    assert proc.returncode == 2 and message in proc.stderr.decode(), proc.stderr.decode()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--estimator", "gae", "--values-col", "nope"], "no column 'nope' for values (--values-col)"),
        (["--kl-in-reward", "0.1", "--ref-logprobs-col", "none"], "no column 'none' for reference log-probs"),
    ],
)
def test_missing_columns_are_named(padded, args, message):
    proc = run_grpo("advantages", str(padded), *args, check=False)
    assert proc.returncode == 1 and message in proc.stderr.decode(), proc.stderr.decode()
