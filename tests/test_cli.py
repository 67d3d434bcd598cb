"""The CLI's own concerns: options that do not apply are usage errors (exit 2) naming flags,
library messages shown with flags, and a progress bar that never touches stdout."""

import io
import os
import pty
import re
import subprocess

import pyarrow.parquet as pq
import pytest

from .conftest import grpo_executable, run_grpo


@pytest.mark.parametrize(
    "args, message",
    [
        # defects of issue 11: each used to change nothing (or switch the estimator) silently
        (["objective", "--std", "sample"], "--std applies to an estimator, and none is given: the advantages come from an advantage "
                                           "column if there is one, else from estimator 'mean', which takes no --std; "
                                           "pass --estimator (e.g. 'grpo'), or drop --std"),
        (["objective", "--eps", "0.5"], "--eps applies to an estimator, and none is given"),
        (["objective", "--scale", "group"], "--scale applies to an estimator, and none is given"),
        (["objective", "--estimator", "mean", "--std", "sample"], "estimator 'mean' takes no --std; it is never scaled"),
        (["objective", "--max-length", "512"], "--max-length applies only to --agg 'seq-mean-token-sum-norm' (found --agg 'seq-mean-token-sum'); drop it"),
        (["objective", "--epsilon", "0.2", "--epsilon-low", "0.1", "--epsilon-high", "0.3"], "--epsilon-low and --epsilon-high both override --epsilon"),
        (["objective", "--scale", "none", "--estimator", "grpo", "--eps", "1e-8"], "--eps applies only to scaled advantages and --scale is 'none'"),
        (["advantages", "--round", "3"], "--round rounds the written advantages (the summary never is); pass --output or --output-dir too, or drop it"),
        (["advantages", "--output-format", "jsonl"], "--output-format applies to written rows; pass --output or --output-dir too, or drop it"),
        (["advantages", "--estimator", "drgrpo", "--eps", "1e-8"], "estimator 'drgrpo' takes no --eps; it is never scaled"),
    ],
)
def test_options_that_do_not_apply_are_usage_errors(sample_parquet, args, message):
    proc = run_grpo(args[0], str(sample_parquet), *args[1:], check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and err.startswith(f"Error: {message}"), err
    assert err.count("\n") == 1 and proc.stdout == b""


def test_an_advantage_column_takes_no_estimator_options(tmp_path, sample_parquet):
    annotated = tmp_path / "adv.parquet"
    run_grpo("advantages", str(sample_parquet), "-o", str(annotated), "-q")
    proc = run_grpo("objective", str(annotated), "--reward-col", "reward", check=False)
    assert proc.returncode == 2
    assert "--reward-col is not read: the advantages come from column 'advantage'; drop --reward-col, or pass --estimator" in proc.stderr.decode()
    proc = run_grpo("objective", str(annotated), "--advantage-col", "advantage", "--estimator", "grpo", check=False)
    assert proc.returncode == 2 and "pass either --advantage-col or --estimator (an estimator), not both" in proc.stderr.decode()


def test_messages_name_flags_not_parameters(tmp_path, sample_parquet):
    """The library names `reward_col`; the command says --reward-col. No backticked parameter
    of a command reaches its user."""
    src = tmp_path / "r.jsonl"
    src.write_text('{"uid": "a", "rewards": 1.0, "logprobs": [-0.1], "old_logprobs": [-0.1]}\n')
    for args in (["advantages", str(src)], ["objective", str(src)], ["advantages", str(src), "--num-generations", "2"]):
        err = run_grpo(*args, check=False).stderr.decode()
        assert err.startswith("Error: ") and not re.search(r"`[a-z_]+_col`|`num_generations`", err), err
    err = run_grpo("advantages", str(src), "--reward-col", "rewards", "--num-generations", "2", check=False).stderr.decode()
    assert "expected --num-generations 2" in err or "not a multiple of --num-generations 2" in err


def test_progress_bar_goes_to_a_terminal_stderr_only(sample_parquet):
    """With stderr on a terminal, the bar is drawn there; stdout carries only the data."""
    leader, follower = pty.openpty()
    proc = subprocess.run(
        [grpo_executable(), "advantages", str(sample_parquet), "-o", "-"],
        stdout=subprocess.PIPE, stderr=follower, env={**os.environ, "COLUMNS": "100", "TERM": "xterm"}, timeout=120,
    )
    os.close(follower)
    drawn = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    assert proc.returncode == 0
    assert pq.read_table(io.BytesIO(proc.stdout)).num_rows == 320
    assert b"rows " in drawn and "━".encode() in drawn and b"grpo advantages" in drawn
    assert b"row groups 1/1" in drawn
    piped = run_grpo("advantages", str(sample_parquet), "-o", "-")
    assert "━".encode() not in piped.stderr  # not a terminal: no bar
