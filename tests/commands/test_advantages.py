"""The installed `grpo advantages` command, run as a subprocess on the shipped sample data."""

import hashlib
import io
import json

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

from ..conftest import read_json, run_grpo, write_jsonl_rows
from ..estimators.references import reference_advantages


def expected_for(path, **kw):
    table = pq.read_table(path.with_suffix(".parquet"), columns=["prompt_id", "reward"])
    return reference_advantages(table["reward"].to_numpy(), table["prompt_id"].to_pylist(), **kw)


def test_parquet_to_parquet(sample_parquet, tmp_path):
    out = tmp_path / "adv.parquet"
    run_grpo("advantages", str(sample_parquet), "-o", str(out), "-q")
    written = pq.read_table(out)
    original = pq.read_table(sample_parquet)
    assert written.column_names == original.column_names + ["advantage"]
    assert written.drop(["advantage"]).equals(original)  # every input column untouched
    np.testing.assert_allclose(written["advantage"].to_numpy(), expected_for(sample_parquet), rtol=1e-12)


def test_output_gets_the_mode_a_plain_write_would(sample_parquet, tmp_path):
    out, plain = tmp_path / "adv.parquet", tmp_path / "plain"
    run_grpo("advantages", str(sample_parquet), "-o", str(out), "-q")
    plain.write_bytes(b"")
    assert out.stat().st_mode == plain.stat().st_mode
    out.chmod(0o600)  # a file replaced keeps its mode (issue 43, class 18)
    run_grpo("advantages", str(sample_parquet), "-o", str(out), "-q")
    assert out.stat().st_mode & 0o777 == 0o600


def test_jsonl_to_jsonl_sample_std_rloo(sample_jsonl, tmp_path):
    out = tmp_path / "adv.jsonl"
    run_grpo("advantages", str(sample_jsonl), "-o", str(out), "--estimator", "rloo", "--std", "sample", "--eps", "1e-8", "-q")
    frame = pl.read_ndjson(out)
    expected = expected_for(sample_jsonl, estimator="rloo", ddof=1, eps=1e-8)
    np.testing.assert_allclose(frame["advantage"].to_numpy(), expected, rtol=1e-12)
    assert frame.columns[-1] == "advantage" and frame.height == 320


def test_stdin_to_stdout_jsonl(sample_jsonl):
    proc = run_grpo("advantages", "-", "-o", "-", "--round", "4", "-q", stdin=sample_jsonl.read_bytes())
    frame = pl.read_ndjson(io.BytesIO(proc.stdout))
    expected = np.round(expected_for(sample_jsonl), 4)
    assert frame["advantage"].to_list() == expected.tolist()
    assert proc.stderr == b""


def test_parquet_stdin_to_stdout_parquet(sample_parquet):
    proc = run_grpo("advantages", "-", "-o", "-", "--scale", "batch", stdin=sample_parquet.read_bytes())
    written = pq.read_table(io.BytesIO(proc.stdout))
    np.testing.assert_allclose(written["advantage"].to_numpy(), expected_for(sample_parquet, scale="batch"), rtol=1e-12)
    assert b"grpo advantages" in proc.stderr  # the summary goes to stderr, data to stdout


def test_summary_json(sample_parquet, tmp_path):
    summary = tmp_path / "summary.json"
    proc = run_grpo("advantages", str(sample_parquet), "--summary-json", str(summary), "-q")
    assert proc.stdout == b"" and proc.stderr == b""
    figures = read_json(summary)
    table = pl.read_parquet(sample_parquet, columns=["prompt_id", "reward"])
    spread = table.group_by("prompt_id").agg((pl.col("reward").max() - pl.col("reward").min()).alias("s"))
    zero = int((spread["s"] == 0).sum())
    assert figures["rows"] == 320 and figures["groups"] == 40 and figures["group_sizes"] == {"8": 40}
    assert figures["zero_variance_groups"] == {"count": zero, "share": zero / 40}
    assert figures["reward"]["mean"] == pytest.approx(table["reward"].mean(), rel=1e-12)
    adv = expected_for(sample_parquet)
    assert figures["advantage"]["max"] == pytest.approx(adv.max(), rel=1e-12)
    assert sum(figures["advantage_histogram"]["counts"]) == 320


def test_num_generations_without_id_column(tmp_path):
    src = tmp_path / "noid.jsonl"
    src.write_text("".join(f'{{"score": {r}}}\n' for r in [0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]))
    out = tmp_path / "out.jsonl"
    run_grpo("advantages", str(src), "--num-generations", "4", "--scale", "none", "-o", str(out), "-q")
    assert pl.read_ndjson(out)["advantage"].to_list() == [-0.5, 0.5, -0.5, 0.5, 0.75, -0.25, -0.25, -0.25]


def test_an_id_column_found_by_name_and_unique_on_every_row_is_refused_with_the_fix(tmp_path):
    """OpenRLHF's ``index`` numbers samples, not prompts: taken as the prompt id, every group
    would be one row and every advantage 0. Refused, naming the fix; the fix works."""
    rows = [{"index": i, "reward": r, "greedy_reward": 0.5} for i, r in enumerate([1.0, 0.0, 0.5, 0.5])]
    path = write_jsonl_rows(tmp_path / "openrlhf.jsonl", rows)
    proc = run_grpo("advantages", str(path), "-q", check=False)
    assert proc.returncode == 1 and proc.stderr.decode() == (
        f"Error: {path}: column 'index', found as the prompt id, is unique on every row: every group would be one row, "
        "every advantage 0; pass --num-generations N to group consecutive blocks of N rows (with --prompt-col 'none'), "
        "or --prompt-col the column that names the prompt\n"
    )
    out = tmp_path / "out.jsonl"
    run_grpo("advantages", str(path), "--prompt-col", "none", "--num-generations", "2", "-o", str(out), "-q")
    assert [json.loads(line)["advantage"] for line in out.read_text().splitlines()] == [1.0, -1.0, 0.0, 0.0]
    run_grpo("advantages", str(path), "--prompt-col", "index", "-q")  # given: the user says so
    run_grpo("advantages", str(path), "--estimator", "remax", "-q")  # its numbers need no groups: no refusal


def test_missing_reward_column_suggests_names(tmp_path):
    src = tmp_path / "bad.jsonl"
    src.write_text('{"prompt_id": 1, "rewards": 1.0}\n')
    proc = run_grpo("advantages", str(src), "-o", str(tmp_path / "o.jsonl"), check=False)
    assert proc.returncode == 1
    assert proc.stderr.decode().strip().splitlines() == [
        f"Error: {src}: no reward column (looked for reward, score, token_level_scores, token_level_rewards; pass --reward-col); did you mean 'rewards'?"
    ]
    assert not (tmp_path / "o.jsonl").exists()


def test_nan_reward_names_row_and_prompt_with_on_null_error(tmp_path):
    src = tmp_path / "nan.jsonl"
    src.write_text('{"uid": "p1", "reward": 1.0}\n{"uid": "p1", "reward": NaN}\n')
    proc = run_grpo("advantages", str(src), "--on-null", "error", check=False)
    assert proc.returncode == 1
    assert "row 1 (prompt id 'p1'): column 'reward' is null or NaN" in proc.stderr.decode()
    assert "Traceback" not in proc.stderr.decode()


def test_null_rewards_are_unscorable_by_default(tmp_path):
    """TRL's rule: a row whose every reward is null is left out of its group (which keeps
    rows 0 and 2: mean 0.5, population std 0.5) and gets advantage 0."""
    src = tmp_path / "nulls.jsonl"
    src.write_text('{"uid": "p", "reward": 1.0}\n{"uid": "p", "reward": null}\n{"uid": "p", "reward": 0.0}\n{"uid": "q", "reward": null}\n')
    out = tmp_path / "a.jsonl"
    proc = run_grpo("advantages", str(src), "-o", str(out), "--summary-json", str(tmp_path / "s.json"))
    assert [json.loads(line)["advantage"] for line in out.read_text().splitlines()] == [1.0, 0.0, -1.0, 0.0]
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["unscorable_rows"] == 2 and summary["groups"] == 1 and summary["reward"]["mean"] == 0.5
    assert "unscorable rows" in proc.stderr.decode()


def test_group_size_disagrees_with_num_generations(sample_parquet):
    proc = run_grpo("advantages", str(sample_parquet), "--num-generations", "4", check=False)
    assert proc.returncode == 1
    assert "prompt id 'gsm8k-0000' has 8 rows, expected --num-generations 4" in proc.stderr.decode()


def test_mean_with_scale_is_usage_error(sample_parquet):
    proc = run_grpo("advantages", str(sample_parquet), "--estimator", "drgrpo", "--scale", "group", check=False)
    assert proc.returncode == 2 and "never scaled" in proc.stderr.decode()


def test_output_equal_to_input_is_refused_and_input_untouched(tmp_path, sample_parquet):
    src = tmp_path / "in.parquet"
    src.write_bytes(sample_parquet.read_bytes())
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    proc = run_grpo("advantages", str(src), "-o", str(src), check=False)
    assert proc.returncode == 2 and "is an input file" in proc.stderr.decode()
    assert hashlib.sha256(src.read_bytes()).hexdigest() == digest


def test_existing_advantage_column_is_replaced(tmp_path, sample_parquet):
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    run_grpo("advantages", str(sample_parquet), "-o", str(first), "-q")
    run_grpo("advantages", str(first), "-o", str(second), "--scale", "none", "-q")
    written = pq.read_table(second)
    assert written.column_names.count("advantage") == 1
    np.testing.assert_allclose(written["advantage"].to_numpy(), expected_for(sample_parquet, scale="none"), rtol=1e-12)


def test_python_dash_m_works(sample_parquet):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "grpo_cli", "advantages", str(sample_parquet), "-q"], capture_output=True)
    assert proc.returncode == 0, proc.stderr


def test_summary_json_names_the_grouping(sample_parquet, tmp_path):
    run_grpo("advantages", str(sample_parquet), "--summary-json", str(tmp_path / "s.json"), "-q")
    assert read_json(tmp_path / "s.json")["grouped_by"] == "by column 'prompt_id'"


def test_overflowing_rewards_are_computed_with_no_numpy_warning(tmp_path):
    """1e308 and -1e308 in one group: sums and squares overflow unless scaled first."""
    rows = [{"prompt_id": 0, "reward": r} for r in (1e308, -1e308, 1e308)] + [{"prompt_id": 1, "reward": r} for r in (1.0, 0.0)]
    src = write_jsonl_rows(tmp_path / "huge.jsonl", rows)
    proc = run_grpo("advantages", str(src), "-o", str(tmp_path / "out.jsonl"), "--summary-json", str(tmp_path / "s.json"))
    assert "Warning" not in proc.stderr.decode()
    np.testing.assert_allclose(pl.read_ndjson(tmp_path / "out.jsonl")["advantage"].to_numpy(), [2**-0.5, -(2**0.5), 2**-0.5, 1.0, -1.0], rtol=1e-15)
    figures = read_json(tmp_path / "s.json")
    assert figures["zero_variance_groups"]["count"] == 0
    assert figures["reward"]["std"] == pytest.approx(np.std(np.array([1.0, -1.0, 1.0, 1e-308, 0.0])) * 1e308, rel=1e-12)
    refused = run_grpo("advantages", str(src), "--estimator", "rloo", "--scale", "none", check=False)
    assert refused.returncode == 1
    assert refused.stderr.decode().strip().splitlines() == [
        f"Error: {src}: row 1 (prompt id 0): the advantage is beyond float64 (rewards up to 1e+308); rescale the rewards"
    ]


def test_a_long_prompt_text_as_group_id_is_shortened_where_it_is_shown(tmp_path):
    """verl dumps name groups by their prompt text: messages and tables show it on one line, 60
    characters at most, its start and its end (where chat prompts differ) around an ellipsis
    (the JSON figures and outputs keep it whole)."""
    prompt = "Solve the following problem step by step, then give the final answer in a box.\nProblem: 2 + 2"
    path = write_jsonl_rows(tmp_path / "long.jsonl", [{"input": prompt, "reward": 1.0}, {"input": prompt, "reward": float("inf")}])
    proc = run_grpo("advantages", str(path), "--prompt-col", "input", "-q", check=False)
    shown = "Solve the following …e final answer in a box. Problem: 2 + 2"
    assert proc.returncode == 1 and proc.stderr.decode() == f"Error: {path}: row 1 (prompt id {shown!r}): column 'reward' is infinite\n"


def test_advantage_name_keeps_the_trainers_own_column(tmp_path):
    """TRL logs its ``advantage``: written under another name, both are kept side by side; a
    name the run reads is refused, and a name without a written output too."""
    import pyarrow as pa

    path = tmp_path / "trl.parquet"
    pq.write_table(pa.table({"prompt_id": [0, 0, 1, 1], "reward": [1.0, 0.0, 1.0, 0.5], "advantage": [0.7, -0.7, 0.7, -0.7]}), path)
    out = tmp_path / "out.parquet"
    run_grpo("advantages", str(path), "--advantage-name", "grpo_advantage", "-o", str(out), "-q")
    table = pq.read_table(out)
    assert table.column_names == ["prompt_id", "reward", "advantage", "grpo_advantage"]
    assert table["advantage"].to_pylist() == [0.7, -0.7, 0.7, -0.7] and table["grpo_advantage"].to_pylist() == [1.0, -1.0, 1.0, -1.0]
    proc = run_grpo("advantages", str(path), "--advantage-name", "reward", "-o", str(out), check=False)
    assert proc.returncode == 2 and "Error: --advantage-name 'reward' would overwrite the reward column the run reads" in proc.stderr.decode()
    proc = run_grpo("advantages", str(path), "--advantage-name", "a", check=False)
    assert proc.returncode == 2 and "--advantage-name names the written column; pass --output or --output-dir too" in proc.stderr.decode()


def test_uid_wins_over_index_and_runs_that_need_no_groups_do_not_ask(tmp_path):
    """verl writes both: uid is its group id, index a dataset row. A run that needs no
    groups (an objective from an advantage column) never stops on two id columns."""
    import pyarrow as pa

    rows = {"uid": ["a", "a", "b", "b"], "index": [0, 1, 2, 3], "prompt_id": ["x", "y", "z", "w"], "reward": [1.0, 0.0, 1.0, 0.5]}
    path = tmp_path / "verl.parquet"
    pq.write_table(pa.table({k: v for k, v in rows.items() if k != "prompt_id"}), path)
    figures = json.loads(run_grpo("advantages", str(path), "-q", "--summary-json", "-").stdout)
    assert figures["columns"]["prompt"] == "uid" and figures["groups"] == 2
    shown = run_grpo("inspect", str(path), "--json").stdout.decode()
    assert "uid over index: uid is verl's group id; index numbers dataset rows" in shown
    both = tmp_path / "both.parquet"  # prompt_id and uid: ambiguous where groups matter, not elsewhere
    table = pa.table(rows).append_column("advantage", pa.array([0.5, -0.5, 0.1, -0.1])).append_column("logprobs", pa.array([[-1.0]] * 4))
    pq.write_table(table.append_column("old_logprobs", pa.array([[-1.0]] * 4)), both)
    proc = run_grpo("advantages", str(both), "-q", check=False)
    assert proc.returncode == 2 and "could each be the prompt id" in proc.stderr.decode()
    run_grpo("objective", str(both), "-q")


def test_a_list_reward_column_is_summed_per_row_and_said(tmp_path):
    """verl's batch holds token_level_scores: the score on the last valid token, 0 elsewhere.
    Each row's reward is the sum of its list; the summary says so. With token_level_rewards
    too, the run names both and stops, as for any two reward candidates."""
    import pyarrow as pa

    scores = [[0.0, 0.0, 1.0], [0.0, 0.0], [0.0, 0.5], [0.0, 0.0, 0.0, 1.0]]
    table = pa.table({"uid": ["a", "a", "b", "b"], "token_level_scores": scores})
    path = tmp_path / "verl.parquet"
    pq.write_table(table, path)
    out = tmp_path / "out.parquet"
    proc = run_grpo("advantages", str(path), "-o", str(out), "--summary-json", str(tmp_path / "s.json"))
    # rewards [1, 0] and [0.5, 1]: each group's population std is its half-range, so A = +-1
    assert pq.read_table(out)["advantage"].to_pylist() == [1.0, -1.0, -1.0, 1.0]
    assert read_json(tmp_path / "s.json")["rewards_summed"] == ["token_level_scores"]
    assert "reward (sum of token_level_scores)" in proc.stderr.decode()
    both = tmp_path / "both.parquet"
    pq.write_table(table.append_column("token_level_rewards", pa.array(scores)), both)
    proc = run_grpo("advantages", str(both), "-q", check=False)
    assert proc.returncode == 2 and "columns 'token_level_scores', 'token_level_rewards' could each be the reward" in proc.stderr.decode()


def test_the_kl_in_the_reward_is_clamped_per_token_when_asked(tmp_path):
    """OpenRLHF clamps each token's KL to [-10, 10] before it enters the reward. Here with
    C = 0.5: d = old - ref = [2, -0.25] and [0.1]; k1 clamped: [0.5, -0.25] and [0.1], so the
    rewards become 1 - 0.25 and 0 - 0.1, and the mean baseline gives +-(0.75 + 0.1) / 2."""
    import pyarrow as pa

    path = tmp_path / "kl.parquet"
    table = {"prompt_id": [0, 0], "reward": [1.0, 0.0], "old_logprobs": [[-1.0, -1.25], [-0.9]], "ref_logprobs": [[-3.0, -1.0], [-1.0]]}
    pq.write_table(pa.table(table), path)
    out = tmp_path / "out.parquet"
    options = ["--estimator", "mean", "--kl-in-reward", "1", "--kl", "k1"]
    run_grpo("advantages", str(path), *options, "--kl-reward-clamp", "0.5", "-o", str(out), "-q")
    assert pq.read_table(out)["advantage"].to_pylist() == pytest.approx([0.425, -0.425], rel=1e-15)
    run_grpo("advantages", str(path), *options, "-o", str(out), "-q")  # unclamped: 1 - 1.75, 0 - 0.1
    assert pq.read_table(out)["advantage"].to_pylist() == pytest.approx([-0.325, 0.325], rel=1e-15)
    proc = run_grpo("advantages", str(path), "--kl-reward-clamp", "0.5", check=False)
    assert proc.returncode == 2 and "--kl-reward-clamp applies to --kl-in-reward" in proc.stderr.decode()


def test_string_view_prompt_ids_group_as_strings(tmp_path):
    """Arrow's string_view ids (issue 43, class 13: an internal error) group as their strings."""
    import pyarrow as pa

    path = tmp_path / "view.parquet"
    pq.write_table(pa.table({"prompt_id": pa.array(["a", "a", "b", "b"], pa.string_view()), "reward": [1.0, 0.0, 1.0, 0.5]}), path)
    out = tmp_path / "out.parquet"
    run_grpo("advantages", str(path), "-o", str(out), "-q")
    assert pq.read_table(out)["advantage"].to_pylist() == [1.0, -1.0, 1.0, -1.0]
