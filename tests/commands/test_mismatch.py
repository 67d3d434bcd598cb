"""`grpo mismatch`: hand-derived figures, batch-size independence, the per-row columns shared
with `grpo objective -o`, and its errors."""

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_cli import MismatchConfig, mismatch_file

from ..conftest import SAMPLE, run_grpo

L2 = math.log(2.0)


@pytest.fixture
def two_rows(tmp_path):
    # row 0: w = exp(old - rollout) = 2 and 0.5; row 1: one token, w = 1
    path = tmp_path / "m.parquet"
    pq.write_table(
        pa.table({"prompt_id": ["a", "b"], "old_logprobs": [[-1.0, -1.0], [-0.5]], "rollout_logprobs": [[-1.0 - L2, -1.0 + L2], [-0.5]]}), path
    )
    return path


def test_hand_derived_figures(two_rows):
    f = mismatch_file(str(two_rows), config=MismatchConfig(is_cap=1.5, is_mask=(0.6, 3.0)))
    assert (f["rows"], f["tokens"]) == (2, 3)
    assert f["abs_diff_mean"] == pytest.approx(2 * L2 / 3) and f["abs_diff_max"] == pytest.approx(L2)
    assert f["kl_k1"] == pytest.approx(0.0, abs=1e-16)
    assert f["kl_k3"] == pytest.approx(((2 - L2 - 1) + (0.5 + L2 - 1)) / 3)
    assert f["chi2_token"] == pytest.approx((4 + 0.25 + 1) / 3 - 1)
    assert f["chi2_seq"] == pytest.approx(0.0, abs=1e-15)  # both sequence weights are 1
    assert f["ess_token"]["count"] == pytest.approx(3.5**2 / 5.25) and f["ess_token"]["share"] == pytest.approx(3.5**2 / 5.25 / 3)
    assert f["train_ppl"] == pytest.approx((math.e + math.exp(0.5)) / 2) and f["ppl_ratio"] == pytest.approx(1.0)
    assert f["cap"] == {"value": 1.5, "tokens": 1, "token_share": 1 / 3, "rows": 1, "row_share": 0.5, "sequence_rows": 0, "sequence_row_share": 0.0}
    assert (f["mask"]["tokens"], f["mask"]["rows"]) == (1, 1)  # 0.5 < 0.6
    assert [(b["first"], b["last"], b["rows"], b["tokens"]) for b in f["by_position"]] == [(1, 1, 2, 2), (2, 3, 1, 1)]
    assert f["by_position"][0]["abs_diff_mean"] == pytest.approx(L2 / 2)
    assert [(b["first"], b["rows"], b["tokens"]) for b in f["by_length"]] == [(1, 1, 1), (2, 1, 2)]
    assert [w["row"] for w in f["worst_rows"]] == [f"{two_rows}: row 0 (prompt id 'a')", f"{two_rows}: row 1 (prompt id 'b')"]
    assert f["abs_diff_histogram"]["counts"][0] == 1 and sum(f["abs_diff_histogram"]["counts"]) == 3
    assert f["abs_diff_histogram"]["edges"][-1] is None and f["columns"]["rollout_logprobs"] == "rollout_logprobs"


def test_figures_do_not_depend_on_batch_size_or_threads():
    path = str(SAMPLE / "rollouts_vllm.parquet")
    whole = mismatch_file(path)
    assert mismatch_file(path, batch_rows=7, threads=1) == whole
    assert mismatch_file(path, batch_rows=33, threads=2) == whole


def test_per_row_columns_are_the_objectives(tmp_path):
    path = str(SAMPLE / "rollouts_vllm.parquet")
    run_grpo("mismatch", path, "-o", str(tmp_path / "m.parquet"), "-q")
    run_grpo("objective", path, "-o", str(tmp_path / "o.parquet"), "-q")
    m, o = pq.read_table(tmp_path / "m.parquet"), pq.read_table(tmp_path / "o.parquet")
    shared = [n for n in m.schema.names if n.startswith(("rollout_", "train_")) and n != "rollout_logprobs"]
    assert len(shared) == 7 and m.select(shared + ["n_tokens"]).equals(o.select(shared + ["n_tokens"]))
    table = pq.read_table(path)
    old, rollout = table["old_logprobs"].to_pylist(), table["rollout_logprobs"].to_pylist()
    row_k1 = [np.mean(np.subtract(r, o_, dtype=np.float64)) for r, o_ in zip(rollout, old)]
    np.testing.assert_allclose(m["rollout_kl_k1"].to_pylist(), row_k1, rtol=1e-12, atol=1e-15)


def test_json_on_stdout_and_errors(sample_parquet, tmp_path):
    proc = run_grpo("mismatch", str(SAMPLE / "rollouts_vllm.parquet"), "--json", "--worst", "2")
    figures = json.loads(proc.stdout)
    assert len(figures["worst_rows"]) == 2 and proc.stderr.decode() == ""
    missing = run_grpo("mismatch", str(sample_parquet), check=False)
    err = missing.stderr.decode()
    assert missing.returncode == 1 and "rollout_logprobs" in err and len(err.strip().splitlines()) == 1
    both = run_grpo("mismatch", str(SAMPLE / "rollouts_vllm.parquet"), "--json", "-o", "-", check=False)
    assert both.returncode == 2 and not (tmp_path / "-").exists()
    bad = run_grpo("mismatch", str(SAMPLE / "rollouts_vllm.parquet"), "--is-mask", "2,1", check=False)
    assert bad.returncode == 2 and "0 <= LO < HI" in bad.stderr.decode()
