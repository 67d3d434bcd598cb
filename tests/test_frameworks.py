"""Files in the layouts verl, TRL and OpenRLHF really use, through the installed `grpo`, against
hand computations written token by token.

- verl: token tensors right-padded to one width, ``response_mask``, ``old_log_probs``,
  ``ref_log_prob``, a ``uid`` per prompt, per-token ``advantages``; padding holds garbage;
  ``attention_mask`` spans prompt and response (a different width) and plays no role.
- TRL: consecutive blocks of ``num_generations`` rows, a ``prompt`` text column, rewards as a
  struct of reward functions, ``per_token_logps`` / ``old_per_token_logps`` and ``completion_mask``.
- OpenRLHF: ``action_log_probs`` (old), ``base_action_log_probs`` (reference), ``action_mask``,
  the reward inside an ``info`` struct.
"""

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from .conftest import read_json, run_grpo

WIDTH = 12
GROUPS, G = 3, 4
ROWS = GROUPS * G
EPS_CLIP = 0.2


def padded_rollouts(seed: int = 0):
    """Ragged rows of log-probs, then padded to WIDTH with garbage where the mask is 0."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, WIDTH + 1, ROWS)
    mask = (np.arange(WIDTH)[None, :] < lengths[:, None]).astype(np.int64)
    new = -rng.uniform(0.01, 3.0, (ROWS, WIDTH))
    old = np.minimum(new + rng.normal(0, 0.3, (ROWS, WIDTH)), -1e-3)
    ref = np.minimum(new + rng.normal(0, 0.1, (ROWS, WIDTH)), -1e-3)
    rewards = rng.integers(0, 2, ROWS).astype(np.float64)
    rewards[:G] = 1.0  # one group without signal
    pad = mask == 0
    garbage = {"new": np.nan, "old": 5.0, "ref": -np.inf}
    padded = {name: np.where(pad, value, x) for (name, value), x in zip(garbage.items(), (new, old, ref))}
    return lengths, mask, {"new": new, "old": old, "ref": ref}, padded, rewards


def rows_of(x: np.ndarray) -> list:
    return [list(r) for r in x]


def hand_grpo(rewards: np.ndarray, ddof: int, eps: float) -> np.ndarray:
    out = np.empty_like(rewards)
    for start in range(0, len(rewards), G):
        r = list(rewards[start : start + G])
        mean = sum(r) / G
        std = math.sqrt(sum((x - mean) ** 2 for x in r) / (G - ddof))
        out[start : start + G] = [0.0 if std == 0 else (x - mean) / (std + eps) for x in r]
    return out


def hand_terms(lengths, logp, adv_of):
    """Per row, the clipped surrogate of each counted token: min(rho A, clip(rho) A)."""
    terms = []
    for i, n in enumerate(lengths):
        row = []
        for t in range(n):
            rho, a = math.exp(logp["new"][i, t] - logp["old"][i, t]), adv_of(i, t)
            row.append(min(rho * a, min(max(rho, 1 - EPS_CLIP), 1 + EPS_CLIP) * a))
        terms.append(row)
    return terms


def hand_k3(lengths, logp):
    """Per row: the sum of k3 = exp(ref - new) - (ref - new) - 1 over counted tokens."""
    return [
        sum(math.exp(logp["ref"][i, t] - logp["new"][i, t]) - (logp["ref"][i, t] - logp["new"][i, t]) - 1 for t in range(n))
        for i, n in enumerate(lengths)
    ]


def test_verl_padded_with_response_mask_and_per_token_advantages(tmp_path):
    lengths, mask, logp, padded, rewards = padded_rollouts()
    adv = np.repeat(hand_grpo(rewards, ddof=1, eps=1e-6), WIDTH).reshape(ROWS, WIDTH)  # verl broadcasts A over tokens
    src = tmp_path / "verl.parquet"
    pq.write_table(
        pa.table(
            {
                "uid": np.repeat([f"u{k}" for k in range(GROUPS)], G),
                "log_probs": rows_of(padded["new"]),
                "old_log_probs": rows_of(padded["old"]),
                "ref_log_prob": rows_of(padded["ref"]),
                "response_mask": rows_of(mask),
                "advantages": rows_of(np.where(mask == 1, adv, np.nan)),
                "attention_mask": rows_of(np.ones((ROWS, WIDTH + 5), dtype=np.int64)),
            }
        ),
        src,
    )
    run_grpo("objective", str(src), "--agg", "token-mean", "-q", "--summary-json", str(tmp_path / "s.json"))
    figures = read_json(tmp_path / "s.json")

    terms = hand_terms(lengths, logp, lambda i, t: adv[i, t])
    assert figures["tokens"] == int(mask.sum()) == sum(len(r) for r in terms)  # padding not counted
    assert figures["objective"] == pytest.approx(sum(map(sum, terms)) / mask.sum(), rel=1e-12)
    assert figures["kl_ref"] == pytest.approx(sum(hand_k3(lengths, logp)) / mask.sum(), rel=1e-12)
    assert figures["columns"] == {
        "prompt": "uid",
        "reward": None,
        "advantage": "advantages",
        "logprobs": "log_probs",
        "old_logprobs": "old_log_probs",
        "ref_logprobs": "ref_log_prob",
        "mask": "response_mask",
        "baseline": None,
        "rollout_logprobs": None,
    }
    assert figures["unused_columns"] == ["attention_mask"]
    assert figures["config"]["advantages"] == {"column": "advantages", "per_token": True}


def test_verl_padded_with_rewards_and_grpo_estimator(tmp_path):
    lengths, mask, logp, padded, rewards = padded_rollouts(seed=1)
    src = tmp_path / "verl.jsonl"
    pa_table = pa.table(
        {
            "uid": np.repeat(np.arange(GROUPS), G),
            "score": rewards,
            "log_probs": rows_of(padded["new"]),
            "old_log_probs": rows_of(padded["old"]),
            "response_mask": rows_of(mask),
        }
    )
    import polars as pl

    pl.from_arrow(pa_table).with_columns(  # JSON has no NaN: padding is null there
        pl.col("log_probs").list.eval(pl.element().fill_nan(None))
    ).write_ndjson(src)
    out = tmp_path / "out.parquet"
    run_grpo(
        "objective",
        str(src),
        "--estimator",
        "grpo",
        "--std",
        "sample",
        "--eps",
        "1e-6",
        "-o",
        str(out),
        "-q",
        "--summary-json",
        str(tmp_path / "s.json"),
    )
    figures = read_json(tmp_path / "s.json")

    adv = hand_grpo(rewards, ddof=1, eps=1e-6)
    terms = hand_terms(lengths, logp, lambda i, t: adv[i])
    assert figures["objective"] == pytest.approx(np.mean([sum(r) for r in terms]), rel=1e-12)  # seq-mean-token-sum
    assert figures["tokens"] == int(mask.sum())
    assert figures["config"]["advantages"] == {
        "estimator": "grpo",
        "scale": "group",
        "std": "sample",
        "eps": 1e-6,
        "singleton": "zero",
        "reward_weights": None,
        "multi_reward": "sum-then-normalize",
        "on_null": "unscorable",
        "reward_clip": None,
        "kl_in_reward": None,
        "kl": None,
        "gamma": None,
        "lam": None,
        "whiten_std": None,
        "whiten_eps_at": None,
        "whiten_eps": None,
    }
    assert figures["columns"]["reward"] == "score" and figures["unused_columns"] == []
    written = pq.read_table(out)
    np.testing.assert_allclose(written["advantage"].to_numpy(), adv, rtol=1e-12)
    assert written["n_tokens"].to_pylist() == lengths.tolist()
    np.testing.assert_allclose(written["objective_sum"].to_numpy(), [sum(r) for r in terms], rtol=1e-12)


def test_trl_consecutive_blocks_with_struct_rewards(tmp_path):
    lengths, mask, logp, padded, rewards = padded_rollouts(seed=2)
    fmt = np.round(np.linspace(0, 1, ROWS), 3)
    src = tmp_path / "trl.parquet"
    pq.write_table(
        pa.table(
            {
                "prompt": np.repeat(["What is 2+2?", "Name a prime.", "What is 2+2?"], G),  # a prompt may repeat: blocks, not text
                "completion": ["..."] * ROWS,
                "rewards": [{"accuracy": a, "format": f} for a, f in zip(rewards, fmt)],
                "per_token_logps": rows_of(padded["new"]),
                "old_per_token_logps": rows_of(padded["old"]),
                "completion_mask": rows_of(mask),
            }
        ),
        src,
    )
    missing = run_grpo("objective", str(src), "--num-generations", str(G), "--estimator", "grpo", check=False)
    assert missing.returncode == 1 and "did you mean 'rewards', 'rewards.format', 'rewards.accuracy'?" in missing.stderr.decode()
    refused = run_grpo("objective", str(src), "--num-generations", str(G), "--reward-col", "rewards", check=False)
    assert refused.returncode == 2
    assert "column 'rewards' holds several values (accuracy, format); pick one with --reward-col rewards.accuracy" in refused.stderr.decode()

    run_grpo(
        "objective",
        str(src),
        "--num-generations",
        str(G),
        "--reward-col",
        "rewards.accuracy",
        "--estimator",
        "grpo",
        "--std",
        "sample",
        "--eps",
        "1e-4",
        "--agg",
        "seq-mean-token-mean",
        "-q",
        "--summary-json",
        str(tmp_path / "s.json"),
    )
    figures = read_json(tmp_path / "s.json")
    adv = hand_grpo(rewards, ddof=1, eps=1e-4)
    terms = hand_terms(lengths, logp, lambda i, t: adv[i])
    assert figures["objective"] == pytest.approx(np.mean([sum(r) / len(r) for r in terms]), rel=1e-12)
    assert figures["columns"]["reward"] == "rewards.accuracy" and figures["columns"]["mask"] == "completion_mask"
    assert figures["columns"]["prompt"] is None

    out = tmp_path / "adv.parquet"
    run_grpo("advantages", str(src), "--num-generations", str(G), "--reward-col", "rewards.format", "-o", str(out), "-q")
    np.testing.assert_allclose(pq.read_table(out)["advantage"].to_numpy(), hand_grpo(fmt, ddof=0, eps=0.0), rtol=1e-12)


def test_openrlhf_action_tensors_and_info_reward(tmp_path):
    lengths, mask, logp, padded, rewards = padded_rollouts(seed=3)
    src = tmp_path / "openrlhf.parquet"
    pq.write_table(
        pa.table(
            {
                "index": np.repeat(np.arange(GROUPS), G),
                "info": [{"reward": r, "response_length": int(n)} for r, n in zip(rewards, lengths)],
                "log_probs": rows_of(padded["new"]),
                "action_log_probs": rows_of(padded["old"]),
                "base_action_log_probs": rows_of(padded["ref"]),
                "action_mask": rows_of(mask),
                "attention_mask": rows_of(np.ones((ROWS, WIDTH + 3), dtype=np.int64)),
            }
        ),
        src,
    )
    run_grpo(
        "objective",
        str(src),
        "--reward-col",
        "info.reward",
        "--estimator",
        "rloo",
        "--scale",
        "none",
        "--beta",
        "0.05",
        "--agg",
        "token-mean",
        "-q",
        "--summary-json",
        str(tmp_path / "s.json"),
    )
    figures = read_json(tmp_path / "s.json")

    # OpenRLHF's RLOO: r minus the mean of the other rewards of the prompt
    adv = np.array([rewards[i] - (rewards[i // G * G : i // G * G + G].sum() - rewards[i]) / (G - 1) for i in range(ROWS)])
    terms = hand_terms(lengths, logp, lambda i, t: adv[i])
    kl = hand_k3(lengths, logp)
    n = mask.sum()
    assert figures["objective"] == pytest.approx((sum(map(sum, terms)) - 0.05 * sum(kl)) / n, rel=1e-12)
    assert figures["kl_ref"] == pytest.approx(sum(kl) / n, rel=1e-12)
    assert figures["columns"] == {
        "prompt": "index",
        "reward": "info.reward",
        "advantage": None,
        "logprobs": "log_probs",
        "old_logprobs": "action_log_probs",
        "ref_logprobs": "base_action_log_probs",
        "mask": "action_mask",
        "baseline": None,
        "rollout_logprobs": None,
    }
    assert figures["unused_columns"] == ["attention_mask"]


def test_a_mask_like_column_is_never_silently_ignored(tmp_path):
    lengths, mask, logp, padded, rewards = padded_rollouts(seed=4)
    src = tmp_path / "attention_only.parquet"
    pq.write_table(
        pa.table(
            {
                "uid": np.repeat(np.arange(GROUPS), G),
                "reward": rewards,
                "logprobs": rows_of(logp["new"]),
                "old_logprobs": rows_of(logp["old"]),
                "attention_mask": rows_of(mask),
            }
        ),
        src,
    )
    refused = run_grpo("objective", str(src), check=False)
    assert refused.returncode == 2
    assert refused.stderr.decode().strip() == (
        f"Error: {src}: column 'attention_mask' looks like the token mask but is not one of response_mask, loss_mask, "
        "completion_mask, action_mask, mask; pass --mask-col 'attention_mask' to use it, or --mask-col 'none' to do without"
    )
    used = run_grpo("objective", str(src), "--mask-col", "attention_mask", "-q", "--summary-json", str(tmp_path / "a.json"))
    without = run_grpo("objective", str(src), "--mask-col", "none", "-q", "--summary-json", str(tmp_path / "b.json"))
    assert used.returncode == without.returncode == 0
    assert read_json(tmp_path / "a.json")["tokens"] == int(mask.sum())
    assert read_json(tmp_path / "b.json")["tokens"] == ROWS * WIDTH
