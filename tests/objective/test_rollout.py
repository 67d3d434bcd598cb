"""Rollout correction: importance weights (token, sequence; cap, mask; TRL's names), rejection
(k1, k2, k3 per token, row sum or row mean; verl's names), and the mismatch figures."""

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grpo_cli import ObjectiveConfig, policy_objective
from grpo_cli.errors import UsageError

from ..conftest import run_grpo
from ..strategies import logprob_rollout, unpack

L2 = math.log(2.0)
# one row, two tokens, new = old (rho = 1), rollout such that w = exp(old - rollout) = 2 and 0.5
NEW = OLD = [[-1.0, -1.0]]
ROLLOUT = [[-1.0 - L2, -1.0 + L2]]


def objective(**options):
    return policy_objective(NEW, OLD, advantage_values=[1.0], rollout_log_probs=ROLLOUT, agg="token-sum", details=True, **options)


def test_token_weights_multiply_each_term_then_cap_or_mask():
    assert objective(is_level="token")["objective"] == pytest.approx(2.5, rel=1e-14)  # 1 * 2 + 1 * 0.5
    capped = objective(is_level="token", is_cap=1.5)
    assert capped["objective"] == pytest.approx(2.0, rel=1e-14) and capped["rollout"]["is"]["truncated_tokens"] == 1
    masked = objective(is_level="token", is_mask=(0.6, 3.0))  # 0.5 < 0.6: weight 0, the token still counted
    assert masked["objective"] == pytest.approx(2.0, rel=1e-14) and masked["rollout"]["is"]["masked_tokens"] == 1
    assert masked["tokens"] == 2 and masked["rollout"]["is"]["weight_mean"] == pytest.approx(1.0)
    # TRL's mode names: the level and the one bound they take
    assert objective(is_level="token_truncate", is_cap=1.5)["objective"] == capped["objective"]
    assert objective(is_level="token_mask", is_mask=(0.6, 3.0))["objective"] == masked["objective"]


def test_sequence_weight_is_exp_of_the_row_sum_on_every_token():
    assert objective(is_level="sequence")["objective"] == pytest.approx(2.0, rel=1e-14)  # exp(log 2 - log 2) = 1, twice
    rollout = [[-1.0 - L2, -1.0 - L2]]  # w = exp(2 log 2) = 4 on both tokens, capped at 3
    out = policy_objective(NEW, OLD, advantage_values=[1.0], rollout_log_probs=rollout, agg="token-sum", is_level="sequence", is_cap=3.0)
    assert out == pytest.approx(6.0, rel=1e-14)


def test_the_kl_penalty_is_not_weighted():
    ref = [[-1.5, -1.5]]  # d = new - ref = 0.5 per token, k1 = 0.5
    out = policy_objective(
        NEW, OLD, advantage_values=[1.0], rollout_log_probs=ROLLOUT, ref_log_probs=ref, agg="token-sum", is_level="token", beta=0.1, kl="k1"
    )
    assert out == pytest.approx(2.5 - 0.1 * 1.0, rel=1e-14)


def test_token_rejection_takes_tokens_out_of_the_mask():
    # k1 = rollout - old = -log 1.2 (kept: within log(1/1.5), log 1.5) and -log 2 (rejected)
    rollout = [[-1.0 - math.log(1.2), -1.0 - L2]]
    out = policy_objective(
        NEW, OLD, advantage_values=[1.0], rollout_log_probs=rollout, agg="token-mean", reject="k1", reject_threshold="1.5", details=True
    )
    assert out["objective"] == 1.0 and out["tokens"] == 1
    assert out["rollout"]["rejected"] == {"tokens": 1, "rows": 1, "token_share": 0.5}
    assert list(out["rows"]["rejected_tokens"]) == [1] and list(out["rows"]["n_tokens"]) == [1]
    # asymmetric k1 bounds are on rollout / old (verl's sign): [0.4, 0.9] keeps 1/1.2 = 0.833, rejects 1/2 = 0.5
    kept = policy_objective(
        NEW, OLD, advantage_values=[1.0], rollout_log_probs=rollout, agg="token-sum", reject="k1", reject_threshold="0.6,0.9", details=True
    )
    assert kept["tokens"] == 1


def test_sequence_rejection_takes_the_whole_row_out():
    # verl's seq_mean_k3: k3 = exp(-d) + d - 1 with d = rollout - old = -log 2, +log 2: (1 - log 2) and (log 2 - 0.5)
    k3 = [(2 - L2 - 1), (0.5 + L2 - 1)]
    mean = sum(k3) / 2
    for threshold, tokens in ((mean * 1.01, 2), (mean * 0.99, 0)):
        out = policy_objective(
            NEW, OLD, advantage_values=[1.0], rollout_log_probs=ROLLOUT, reject="seq_mean_k3", reject_threshold=str(threshold), details=True
        )
        assert out["tokens"] == tokens and out["config"]["reject_level"] == "sequence-mean"
    out = policy_objective(
        NEW,
        OLD,
        advantage_values=[1.0],
        rollout_log_probs=ROLLOUT,
        reject="k2",
        reject_level="sequence-sum",
        reject_threshold=str(L2 * L2 * 0.99),
        details=True,
    )  # k2 sum = 2 * (log 2)^2 / 2
    assert out["tokens"] == 0 and out["rollout"]["rejected"]["rows"] == 1


def test_mismatch_figures():
    out = objective()
    r = out["rollout"]
    assert r["tokens"] == 2 and r["abs_diff_mean"] == pytest.approx(L2) and r["abs_diff_max"] == pytest.approx(L2)
    assert r["kl_k1"] == pytest.approx(0.0, abs=1e-15)
    assert r["kl_k3"] == pytest.approx(((2 - L2 - 1) + (0.5 + L2 - 1)) / 2, rel=1e-14)
    assert r["is"] is None and r["rejected"] is None and out["objective"] == 2.0  # no correction asked: no weighting


@pytest.mark.parametrize("loss", ["ppo", "gspo", "sapo", "cispo", "gpg"])
@given(rows=logprob_rollout, level=st.sampled_from(["token", "sequence"]))
def test_rollout_equal_to_old_changes_nothing(loss, rows, level):
    new, old, adv = unpack(rows)
    plain = policy_objective(new, old, advantage_values=adv, loss=loss)
    weighted = policy_objective(
        new, old, advantage_values=adv, loss=loss, rollout_log_probs=old, is_level=level, is_cap=2.0, reject="k3", reject_threshold="1e-9"
    )
    assert weighted == pytest.approx(plain, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize(
    "options, words",
    [
        ({"is_cap": 2.0}, "pass `is_level`"),
        ({"is_level": "token_truncate"}, "takes `is_cap`"),
        ({"is_level": "token_truncate", "is_cap": 2.0, "is_mask": (0.5, 2.0)}, "takes `is_cap`"),
        ({"is_level": "tok"}, "unknown `is_level`"),
        ({"is_level": "token", "loss": "gmpo"}, "geometric mean"),
        ({"reject": "k1"}, "needs `reject_threshold`"),
        ({"reject": "k2", "reject_threshold": "0.5,2"}, "one upper bound"),
        ({"reject": "k1", "reject_threshold": "0.5"}, "must be > 1"),
        ({"reject": "seq_sum_k1", "reject_level": "token", "reject_threshold": "2"}, "drop `reject_level`"),
        ({"reject_level": "token"}, "applies to `reject`"),
        ({"is_level": "token", "is_mask": (2.0, 1.0)}, "0 <= LO < HI"),
    ],
)
def test_rollout_option_errors(options, words):
    with pytest.raises(UsageError, match=words.replace("(", r"\(")):
        ObjectiveConfig(**options)


def test_cli_rollout_columns_and_errors(sample_parquet, tmp_path):
    table = pq.read_table(sample_parquet)
    old = table["old_logprobs"].combine_chunks()
    rollout = old.flatten().to_numpy().astype(np.float64) - 0.01
    path = tmp_path / "r.parquet"
    pq.write_table(table.append_column("rollout_logprobs", pa.ListArray.from_arrays(old.offsets, pa.array(rollout))), path)
    out, summary = tmp_path / "o.parquet", tmp_path / "s.json"
    run_grpo(
        "objective",
        str(path),
        "--is",
        "sequence_truncate",
        "--is-cap",
        "2",
        "--reject",
        "token_k1",
        "--reject-threshold",
        "1.5",
        "-o",
        str(out),
        "-q",
        "--summary-json",
        str(summary),
    )
    written = pq.read_table(out)
    for name in ("rollout_abs_diff_mean", "rollout_kl_k1", "rollout_log_weight", "train_log_ppl", "is_weight_mean", "rejected_tokens"):
        assert name in written.schema.names
    figures = json.loads(summary.read_text())
    assert figures["columns"]["rollout_logprobs"] == "rollout_logprobs" and figures["config"]["is_level"] == "sequence"
    n = np.array(written["n_tokens"].to_pylist())
    diff = np.array(written["rollout_abs_diff_mean"].to_pylist(), dtype=float)
    assert np.abs(diff[n > 0] - 0.01).max() < 1e-12
    proc = run_grpo("objective", str(sample_parquet), "--is", "token", "-q", check=False)
    assert proc.returncode == 1 and "rollout sampler's log-probs" in proc.stderr.decode() and "Traceback" not in proc.stderr.decode()
