"""The installed `grpo objective` command on the sample data, batch independence, bad input."""

import json

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

from grpo_cli import AdvantageConfig, ObjectiveConfig, objective_file

from ..conftest import read_json, run_grpo, write_jsonl_rows
from ..objective.references import reference_row_objective

PER_ROW = ["advantage", "objective_sum", "objective_mean", "n_tokens", "clip_frac", "ratio_mean", "ratio_max", "kl_old", "kl_ref"]


def test_parquet_objective_rows_match_reference(sample_parquet, tmp_path):
    out, summary = tmp_path / "obj.parquet", tmp_path / "s.json"
    run_grpo("objective", str(sample_parquet), "-o", str(out), "--summary-json", str(summary), "-q")
    written = pq.read_table(out)
    original = pq.read_table(sample_parquet)
    assert written.column_names == original.column_names + PER_ROW
    assert written.select(original.column_names).equals(original)
    frame = pl.from_arrow(written)
    # default advantage: mean baseline per prompt id (seed 002 per group)
    mean_g = frame.select(pl.col("reward").mean().over("prompt_id"))["reward"]
    np.testing.assert_allclose(frame["advantage"], frame["reward"] - mean_g, atol=1e-15)
    new, old = frame["logprobs"].to_list(), frame["old_logprobs"].to_list()
    expected = [reference_row_objective(n, o, a, ObjectiveConfig()) for n, o, a in zip(new, old, frame["advantage"])]
    np.testing.assert_allclose(frame["objective_sum"], expected, rtol=1e-12, atol=1e-14)
    assert frame["n_tokens"].to_list() == [len(x) for x in new]
    figures = read_json(summary)
    assert figures["objective"] == pytest.approx(np.mean(expected), rel=1e-12)
    assert figures["loss"] == -figures["objective"]
    assert figures["rows"] == 320 and figures["tokens"] == int(frame["n_tokens"].sum())


def test_jsonl_stdin_to_stdout_with_advantage_column(sample_parquet, tmp_path):
    adv = tmp_path / "adv.jsonl"
    run_grpo("advantages", str(sample_parquet), "-o", str(adv), "-q")
    proc = run_grpo("objective", "-", "-o", "-", "--agg", "token-mean", "-q", stdin=adv.read_bytes())
    frame = pl.read_ndjson(proc.stdout)
    source = pl.read_ndjson(adv)
    assert frame["advantage"].to_list() == source["advantage"].to_list()  # used, not recomputed
    assert frame.columns.count("advantage") == 1


def test_estimator_options_compute_advantages(sample_parquet, tmp_path):
    summary = tmp_path / "s.json"
    run_grpo(
        "objective",
        str(sample_parquet),
        "--estimator",
        "grpo",
        "--std",
        "sample",
        "--eps",
        "1e-8",
        "--beta",
        "0.04",
        "--kl",
        "k2",
        "--summary-json",
        str(summary),
        "-q",
    )
    figures = read_json(summary)
    library = objective_file(
        str(sample_parquet), config=ObjectiveConfig(beta=0.04, kl="k2"), advantage_config=AdvantageConfig(std="sample", eps=1e-8)
    )
    assert json.loads(json.dumps(library)) == figures
    assert figures["objective"] == pytest.approx(figures["surrogate"] - 0.04 * figures["kl_ref"], rel=1e-12)


def jsonl(tmp_path, rows, name="bad.jsonl"):
    return write_jsonl_rows(tmp_path / name, rows)


GOOD = {"prompt_id": "p0", "reward": 1.0, "logprobs": [-0.1, -0.2], "old_logprobs": [-0.1, -0.3]}


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"logprobs": [-0.1]}, "row 1 (prompt id 'p1'): column 'old_logprobs' has 2 tokens but 1 in the log-probs column"),
        ({"logprobs": None}, "row 1 (prompt id 'p1'): column 'logprobs' is null"),
        ({"old_logprobs": [-0.1, 0.5]}, "row 1 (prompt id 'p1'): column 'old_logprobs' has a positive log-prob"),
        ({"logprobs": [-0.1, float("nan")]}, "row 1 (prompt id 'p1'): column 'logprobs' has a NaN or infinite log-prob"),
    ],
)
def test_bad_token_data(tmp_path, bad, message):
    src = jsonl(tmp_path, [GOOD, {**GOOD, "prompt_id": "p1", **bad}, {**GOOD, "prompt_id": "p1"}])
    out = tmp_path / "out.parquet"
    proc = run_grpo("objective", str(src), "-o", str(out), check=False)
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 1 and lines == [f"Error: {src}: {message}"]
    assert not out.exists() and list(tmp_path.iterdir()) == [src]  # no output, no temp file


@pytest.mark.parametrize(
    "args, message",
    [
        (["--epsilon", "0"], "--epsilon must be > 0 and finite (found 0.0)"),
        (["--epsilon-high", "-1"], "--epsilon-high must be > 0 and finite (found -1.0)"),
        (["--dual-clip", "1"], "--dual-clip must be > 1 and finite (found 1.0)"),
        (
            ["--beta", "0.1"],
            "--beta > 0 needs reference log-probs: pass --ref-logprobs-col (looked for ref_logprobs, ref_log_probs, ref_log_prob, ref_per_token_logps, base_action_log_probs)",
        ),
        (["--agg", "seq-mean-token-sum-norm"], "--agg 'seq-mean-token-sum-norm' needs --max-length >= 1 (found None)"),
    ],
)
def test_option_errors(tmp_path, args, message):
    src = jsonl(tmp_path, [GOOD])
    out = tmp_path / "out.jsonl"
    proc = run_grpo("objective", str(src), "-o", str(out), *args, check=False)
    assert proc.returncode == 2 and proc.stderr.decode().strip() == f"Error: {message}"
    assert not out.exists()


def test_mask_column_and_whole_file_group(tmp_path):
    rows = [
        {"logprobs": [-1.0, -1.0, -1.0], "old_logprobs": [-1.0, -4.0, -1.0], "mask": [1, 0, 1], "score": 1.0},
        {"logprobs": [-1.0], "old_logprobs": [-1.0], "mask": [1], "score": 0.0},
    ]
    src, summary = jsonl(tmp_path, rows, "m.jsonl"), tmp_path / "s.json"
    run_grpo("objective", str(src), "--mask-col", "mask", "--agg", "token-sum", "--summary-json", str(summary), "-q")
    figures = read_json(summary)
    # no ids: one group, mean 0.5 -> A = +0.5, -0.5; masked token ignored: 2 * 0.5 - 0.5
    assert figures["objective"] == 0.5 and figures["tokens"] == 3 and figures["clip_frac"]["high"] == 0.0


def test_empty_rows_skip_and_the_summary_line(tmp_path):
    # rho = 1: rows' token means are A = 1 (2 tokens) and A = -2 (1 token); row 2 is fully masked.
    # seq-mean-token-mean: (1 - 2) / 3 counting the empty row, (1 - 2) / 2 skipping it
    rows = [
        {"logprobs": [-1.0, -1.0], "old_logprobs": [-1.0, -1.0], "mask": [1, 1], "advantage": 1.0},
        {"logprobs": [-1.0], "old_logprobs": [-1.0], "mask": [1], "advantage": -2.0},
        {"logprobs": [-1.0, -1.0], "old_logprobs": [-1.0, -1.0], "mask": [0, 0], "advantage": 5.0},
    ]
    src = write_jsonl_rows(tmp_path / "in.jsonl", rows)
    shown = {}
    for rule, expected in (("count", (1 - 2) / 3), ("skip", (1 - 2) / 2)):
        summary = tmp_path / f"{rule}.json"
        proc = run_grpo("objective", str(src), "--agg", "seq-mean-token-mean", "--empty-rows", rule, "--summary-json", str(summary))
        figures = read_json(summary)
        assert figures["objective"] == pytest.approx(expected, rel=1e-15)
        assert figures["empty_rows"] == 1 and figures["rows"] == 3 and figures["config"]["empty_rows"] == rule
        shown[rule] = " ".join(proc.stderr.decode().split())
    assert "empty rows │ 1 (counted as 0 in the mean over 3 rows)" in shown["count"]
    assert "empty rows │ 1 (left out: the mean is over 2 rows)" in shown["skip"]
    proc = run_grpo("objective", str(src), "--agg", "token-mean")
    assert "empty rows │ 1 (no counted tokens)" in " ".join(proc.stderr.decode().split())
    full = write_jsonl_rows(tmp_path / "full.jsonl", rows[:2])
    assert "empty rows" not in run_grpo("objective", str(full)).stderr.decode()
    refused = run_grpo("objective", str(src), "--agg", "token-mean", "--empty-rows", "skip", check=False)
    assert refused.returncode == 2 and refused.stderr.decode().strip() == (
        "Error: --empty-rows applies only to the means over rows, --agg 'seq-mean-token-sum', 'seq-mean-token-mean', "
        "'seq-mean-token-sum-norm' (found --agg 'token-mean'); drop it"
    )
