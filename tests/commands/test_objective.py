"""The installed `grpo objective` command on the sample data, batch independence, bad input."""

import json

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

from grpo_cli import AdvantageConfig, ObjectiveConfig, objective_file

from ..conftest import SAMPLE, read_json, run_grpo, write_jsonl_rows
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
        "'seq-mean-token-sum-norm', 'luspo-padded' (found --agg 'token-mean'); drop it"
    )


VLLM = str(SAMPLE / "rollouts_vllm.parquet")  # logprobs, old_logprobs, ref_logprobs, rollout_logprobs


def objective_run(*args: str, command: str = "objective", file: str = VLLM):
    """The run's exit code, first error line and summary figures (``None`` on error)."""
    proc = run_grpo(command, file, *args, "-q", "--summary-json", "-", check=False)
    err = proc.stderr.decode()
    assert "Traceback" not in err and "internal error" not in err
    return proc.returncode, err.strip(), json.loads(proc.stdout) if proc.returncode == 0 else None


def test_a_column_named_for_one_role_is_not_found_for_another():
    # the old policy named as the rollout column: the rollout role is left empty (the KeyError of issue 41 before)
    code, _, figures = objective_run("--old-logprobs-col", "rollout_logprobs")
    assert code == 0 and figures["columns"]["old_logprobs"] == "rollout_logprobs" and figures["columns"]["rollout_logprobs"] is None
    # as verl's bypass ppo_clip, which says the old policy is the rollout's
    bypass = objective_run("--bypass", "ppo_clip")[2]
    assert bypass["objective"] == figures["objective"] and bypass["config"]["bypass"] == "ppo_clip"
    assert bypass["columns"]["old_logprobs"] == bypass["columns"]["rollout_logprobs"] == "rollout_logprobs"
    # the new log-probs' one candidate named as the old ones: not taken for both
    code, err, _ = objective_run("--old-logprobs-col", "logprobs")
    assert code != 0 and "no new log-probs column" in err and "'logprobs' is the --old-logprobs-col" in err
    code, err, _ = objective_run("--ref-logprobs-col", "old_logprobs", "--beta", "0.1")
    assert code != 0 and "'old_logprobs' is the --ref-logprobs-col" in err
    # one column named for two roles: new and old is on-policy (ratio 1); old and rollout is the bypass mode
    code, _, on_policy = objective_run("--logprobs-col", "logprobs", "--old-logprobs-col", "logprobs")
    assert code == 0 and on_policy["ratio"]["max"] == on_policy["ratio"]["min"] == 1.0
    code, err, _ = objective_run("--old-logprobs-col", "rollout_logprobs", "--rollout-logprobs-col", "rollout_logprobs", "--is", "token")
    assert code != 0 and "--bypass" in err
    code, err, _ = objective_run("--bypass", "reinforce", "--old-logprobs-col", "old_logprobs")
    assert code != 0 and "drop --old-logprobs-col" in err
    code, err, _ = objective_run("--bypass", "reinforce", "--rollout-logprobs-col", "none")
    assert code != 0 and "rollout sampler's log-probs" in err


def test_other_commands_leave_a_named_column_to_its_role():
    code, err, _ = objective_run("--old-logprobs-col", "rollout_logprobs", command="mismatch")  # was a silent 0
    assert code != 0 and "'rollout_logprobs' is the --old-logprobs-col" in err
    code, err, _ = objective_run("--old-logprobs-col", "old_logprobs", "--rollout-logprobs-col", "old_logprobs", command="mismatch")
    assert code != 0 and "does not differ from itself" in err
    roles = json.loads(run_grpo("inspect", VLLM, "--old-logprobs-col", "rollout_logprobs", "--json").stdout)["columns"]
    assert roles["old"]["column"] == "rollout_logprobs" and roles["rollout"]["column"] is None
    assert "'rollout_logprobs' is the `old_logprobs_col`" in roles["rollout"]["why"]
    # the KL in the reward: the reference named as the old log-probs leaves the policy to the new ones
    kl = ("--kl-in-reward", "0.1", "--ref-logprobs-col", "old_logprobs")
    named = objective_run(*kl, command="advantages")[2]
    assert named == objective_run(*kl, "--old-logprobs-col", "none", command="advantages")[2]
    assert named["advantage"] != objective_run("--kl-in-reward", "0.1", command="advantages")[2]["advantage"]


def test_normalized_weights_take_the_mean_over_the_whole_input():
    config = ObjectiveConfig(is_level="token", is_cap=2.0, is_normalize=True, agg="token-mean")
    whole = objective_file(VLLM, config=config)
    batched = objective_file(VLLM, config=config, batch_rows=7)
    assert batched["objective"] == pytest.approx(whole["objective"], rel=1e-12)
    plain = objective_file(VLLM, config=ObjectiveConfig(is_level="token", is_cap=2.0, agg="token-mean"))
    mu = plain["rollout"]["is"]["weight_mean"]  # over the counted tokens: the mean of the normalization
    assert whole["surrogate"] == pytest.approx(plain["surrogate"] / mu, rel=1e-6) and whole["config"]["is_normalize"]


def test_the_summary_says_when_the_old_policy_is_the_rollouts():
    def shown(*args: str) -> str:
        ran = run_grpo("objective", VLLM, *args, env={"COLUMNS": "200"})
        return (ran.stdout + ran.stderr).decode()

    assert "the rollout's (bypass reinforce" in shown("--bypass", "reinforce", "--is", "token")
    assert "old policy" not in shown()


def test_the_groups_of_advantages_from_rewards_come_first(tmp_path):
    """Without a prompt id or --num-generations, the whole file is one mean-baseline group:
    the summary's first line and `grouped_by` say so (null from an advantage column)."""
    rows = [{"reward": r, "logprobs": [-1.0], "old_logprobs": [-1.1]} for r in (1.0, 0.0, 0.5)]
    src = write_jsonl_rows(tmp_path / "noid.jsonl", rows)
    proc = run_grpo("objective", str(src), "--summary-json", str(tmp_path / "s.json"))
    first = proc.stderr.decode().splitlines()[2]
    assert "groups" in first and "one group: the whole input (estimator mean)" in first
    assert read_json(tmp_path / "s.json")["grouped_by"] == "one group: the whole input"
    with_adv = write_jsonl_rows(tmp_path / "adv.jsonl", [{**row, "advantage": 0.5} for row in rows])
    run_grpo("objective", str(with_adv), "-q", "--summary-json", str(tmp_path / "a.json"))
    assert read_json(tmp_path / "a.json")["grouped_by"] is None


def test_an_on_policy_file_with_old_log_probs_only(tmp_path):
    """verl's saved batch has old_log_probs and no new ones (on-policy: new = old): named as
    the new log-probs they are both, every ratio is 1, and the summary says so."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "verl.parquet"
    pq.write_table(pa.table({"uid": ["a", "a"], "reward": [1.0, 0.0], "old_log_probs": [[-1.0, -0.5], [-0.2]]}), path)
    proc = run_grpo("objective", str(path), "--logprobs-col", "old_log_probs", "--summary-json", str(tmp_path / "s.json"))
    figures = read_json(tmp_path / "s.json")
    # mean baseline: A = [0.5, -0.5]; ratio 1: (2 * 0.5 + 1 * -0.5) / 2 rows
    assert figures["objective"] == 0.25 and figures["ratio"] == {"mean": 1.0, "min": 1.0, "max": 1.0}
    assert figures["columns"]["logprobs"] == figures["columns"]["old_logprobs"] == "old_log_probs"
    shown = proc.stderr.decode()
    assert "on-policy" in shown and "the new log-probs are the old ones" in shown and "every ratio is 1" in shown
