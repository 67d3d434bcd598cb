"""Batches (issue 42, trap 3): `--by COL` and `--by-file` make each value of a column (a
trainer's step) or each input file a batch. The batch-wide statistics (``--scale batch``,
whitening, flash-reinforce's batch mean) and the summary are computed per batch, in one pass;
a group that spans two batches is refused naming the fix; a ``step`` column is the batch
column when none is given."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_cli import AdvantageConfig, advantages_file

from .conftest import SAMPLE, read_json, run_grpo
from .test_frameworks_files import TRL, TRL_REWARDS, VERL_ROLLOUT, one_line_error

BATCH_SCALE = ("--scale", "batch", "--std", "population", "--eps", "0")


def rows(path, **columns) -> None:
    pq.write_table(pa.table(columns), path)


@pytest.fixture
def two_steps(tmp_path):
    """Two steps of two groups of two; prompt 'a' recurs at step 2 (a later epoch)."""
    path = tmp_path / "steps.parquet"
    rows(path, step=[1, 1, 1, 1, 2, 2, 2, 2], prompt=list("aabbaabb"), reward=[0.0, 1.0, 1.0, 1.0, 0.0, 2.0, 1.0, 3.0])
    return path


def test_scale_batch_is_per_step(two_steps, tmp_path):
    """(r - group mean) / batch std, the std over each step's rows (population, eps 0).
    Step 1: rewards 0 1 1 1, mean 3/4, var (9/16 + 3/16) / 4 = 3/16, std sqrt(3)/4; group a's
    centred rewards -1/2, 1/2 give -+2/sqrt(3); group b has no signal, 0.
    Step 2: rewards 0 2 1 3, mean 3/2, var (9/4 + 1/4 + 1/4 + 9/4) / 4 = 5/4, std sqrt(5)/2;
    both groups centre to -1, 1: -+2/sqrt(5). Over all 8 rows (one batch) the std would be
    sqrt(55/64), another number."""
    out, figures = tmp_path / "a.parquet", tmp_path / "s.json"
    run_grpo(
        "advantages",
        str(two_steps),
        "--prompt-col",
        "step",
        "--prompt-col",
        "prompt",
        *BATCH_SCALE,
        "-o",
        str(out),
        "--summary-json",
        str(figures),
        "-q",
    )
    s3, s5 = 2 / np.sqrt(3), 2 / np.sqrt(5)
    np.testing.assert_allclose(pq.read_table(out)["advantage"].to_numpy(), [-s3, s3, 0, 0, -s5, s5, -s5, s5], rtol=1e-15)
    summary = read_json(figures)
    assert summary["batches"] == "by column 'step', found by its name" and summary["by"]["column"] == "step"
    first, second = summary["by"]["batches"]
    assert (first["batch"], first["rows"], first["groups"], first["zero_variance_groups"]["count"]) == (1, 4, 2, 1)
    assert first["reward"]["mean"] == 0.75 and second["reward"]["mean"] == 1.5
    assert np.isclose(second["reward"]["std"], np.sqrt(5) / 2) and np.isclose(second["advantage"]["std"], 2 / np.sqrt(5))
    merged = tmp_path / "merged.parquet"
    run_grpo("advantages", str(two_steps), "--prompt-col", "step", "--prompt-col", "prompt", "--by", "none", *BATCH_SCALE, "-o", str(merged), "-q")
    np.testing.assert_allclose(pq.read_table(merged)["advantage"].to_numpy()[:2], [-0.5, 0.5] / np.sqrt(55 / 64), rtol=1e-15)


def test_a_prompt_in_two_steps_is_refused_naming_the_fix(two_steps):
    """The same prompt id at steps 1 and 2 would be one group of four; the error names the
    file, the row, both steps and the composite key that keeps them apart."""
    line = one_line_error(run_grpo("advantages", str(two_steps), "--prompt-col", "prompt", check=False))
    assert "steps.parquet: row 4 (prompt id 'a')" in line and "values 1 and 2 of --by column 'step'" in line
    assert "--prompt-col 'step' and 'prompt'" in line and "--by none" in line


def test_by_none_makes_the_input_one_batch(two_steps, tmp_path):
    """`--by none`: the steps merged, the prompt's rows of both steps one group (as before `--by`)."""
    figures = tmp_path / "s.json"
    run_grpo("advantages", str(two_steps), "--prompt-col", "prompt", "--by", "none", "--summary-json", str(figures), "-q")
    assert read_json(figures)["group_sizes"] == {"4": 2} and "by" not in read_json(figures)


@pytest.mark.parametrize(
    "options",
    [BATCH_SCALE, ("--estimator", "rloo", "--whiten"), ("--estimator", "flash-reinforce"), ("--estimator", "gpg"), ("--scale", "group")],
    ids=["scale-batch", "rloo-whiten", "flash-reinforce", "gpg", "group"],
)
def test_by_file_is_each_file_alone(tmp_path, options):
    """`--by-file` over two files gives each row the advantage that file alone gives it."""
    rng = np.random.default_rng(7)
    files = []
    for k in range(2):
        files.append(tmp_path / f"part-{k}.parquet")
        rows(files[-1], prompt_id=np.repeat(np.arange(6) + 10 * k, 4), reward=rng.integers(0, 4, 24).astype(float) * (k + 1))
    out = tmp_path / "all.parquet"
    run_grpo("advantages", *map(str, files), *options, "--by-file", "-o", str(out), "-q")
    alone = []
    for k, f in enumerate(files):
        run_grpo("advantages", str(f), *options, "-o", str(tmp_path / f"alone-{k}.parquet"), "-q")
        alone.append(pq.read_table(tmp_path / f"alone-{k}.parquet")["advantage"].to_numpy())
    assert np.array_equal(pq.read_table(out)["advantage"].to_numpy(), np.concatenate(alone))


def test_batches_not_contiguous_are_still_per_value(tmp_path):
    """Steps interleaved in the file (a shuffled dump): each row gets its own step's number.
    flash-reinforce's baseline is the batch mean: step 1 rewards 0, 2 (mean 1), step 2
    rewards 10, 30 (mean 20); A = r - mean."""
    path, out = tmp_path / "mixed.parquet", tmp_path / "a.parquet"
    rows(path, step=[1, 2, 1, 2], reward=[0.0, 10.0, 2.0, 30.0])
    run_grpo("advantages", str(path), "--estimator", "flash-reinforce", "-o", str(out), "-q")
    assert pq.read_table(out)["advantage"].to_pylist() == [-1.0, -10.0, 1.0, 10.0]


def test_without_ids_each_batch_is_one_group(tmp_path):
    """No prompt id and no group size: each step is one group."""
    path, figures = tmp_path / "s.parquet", tmp_path / "s.json"
    rows(path, step=[1, 1, 2, 2], reward=[0.0, 2.0, 10.0, 30.0])
    run_grpo("advantages", str(path), "--estimator", "flash-reinforce", "--summary-json", str(figures), "-q")
    assert read_json(figures)["grouped_by"] == "one group per batch" and read_json(figures)["group_sizes"] == {"2": 2}


def test_blocks_crossing_a_step_are_refused(tmp_path):
    path = tmp_path / "s.parquet"
    rows(path, step=[1, 1, 1, 2, 2, 2], reward=[0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    line = one_line_error(run_grpo("advantages", str(path), "--num-generations", "2", check=False))
    assert "row 3: its group spans two batches (values 1 and 2 of --by column 'step'): pass --by none" in line


def test_trl_steps_are_batches():
    """TRL logs one file per step with its ``step``: each step is a batch, as TRL's
    ``scale_rewards='batch'`` computes the std over the step's batch."""
    ran = run_grpo("advantages", str(TRL), "--prompt-col", "prompt", *TRL_REWARDS, "--scale", "batch", "-q", "--summary-json", "-")
    by = json.loads(ran.stdout)["by"]
    assert [b["batch"] for b in by["batches"]] == [10, 20] and [b["rows"] for b in by["batches"]] == [12, 12]


@pytest.mark.parametrize(
    "args, message",
    [
        (("mismatch", "--by", "prompt_id"), "--by splits advantages and groups into batches, and this run computes neither; drop it"),
        (("advantages", "--by", "step", "--by-file"), "--by 'step' and --by-file each make the batches; pass one"),
        (("advantages", "--by", "nope"), "no column 'nope' for batch (--by)"),
    ],
)
def test_by_misuse_is_one_line(args, message):
    path = SAMPLE / "rollouts_vllm.parquet" if args[0] == "mismatch" else VERL_ROLLOUT
    ran = run_grpo(args[0], str(path), *(("--prompt-col", "step", "--prompt-col", "input") if path == VERL_ROLLOUT else ()), *args[1:], check=False)
    assert message in one_line_error(ran)


def test_a_null_step_is_refused(tmp_path):
    path = tmp_path / "s.parquet"
    rows(path, step=pa.array([1, None], pa.int64()), prompt_id=["a", "b"], reward=[0.0, 1.0])
    assert "row 1 (prompt id 'b'): column 'step' (batch) is null" in one_line_error(run_grpo("advantages", str(path), check=False))


def test_the_library_takes_by(two_steps):
    """The file API takes `by` as the CLI does."""
    figures = advantages_file(two_steps, prompt_col=["step", "prompt"], by="step", config=AdvantageConfig(scale="batch", std="population", eps=0.0))
    assert [b["rows"] for b in figures["by"]["batches"]] == [4, 4]


@pytest.mark.parametrize("estimator", ["reinforce", "reinforce-baseline"])
def test_token_whitening_is_per_file(tmp_path, estimator):
    """The token-level whitening (REINFORCE++'s, over every valid token) is each batch's: with
    `--by-file`, each row's token advantages are those of its file alone, and the summary's
    whole-input figures pool the files'. Each file's n whitened tokens have mean 0 and, the
    whitening's std being the sample one, a population std of sqrt((n - 1) / n); pooled over
    the N tokens of both files, sqrt((N - 2) / N)."""
    table = pq.read_table(SAMPLE / "rollouts.parquet")
    half = table.num_rows // 2
    files = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    pq.write_table(table.slice(0, half), files[0])
    pq.write_table(table.slice(half), files[1])
    out, figures = tmp_path / "all.parquet", tmp_path / "s.json"
    run_grpo("advantages", *map(str, files), "--estimator", estimator, "--by-file", "-o", str(out), "--summary-json", str(figures), "-q")
    alone, column = [], "token_advantage" if estimator == "reinforce" else "advantage"
    for k, f in enumerate(files):
        run_grpo("advantages", str(f), "--estimator", estimator, "-o", str(tmp_path / f"alone-{k}.parquet"), "-q")
        alone.extend(pq.read_table(tmp_path / f"alone-{k}.parquet")[column].to_pylist())
    assert pq.read_table(out)[column].to_pylist() == alone
    if estimator == "reinforce-baseline":  # one advantage per row, whitened counting each row once per token
        return
    summary = read_json(figures)
    each = summary["by"]["batches"]
    assert [b["tokens"] for b in each] == [sum(map(len, table.slice(0, half)["logprobs"].to_pylist())), summary["tokens"] - each[0]["tokens"]]
    assert all(abs(b["advantage"]["mean"]) < 1e-12 and abs(b["advantage"]["std"] - np.sqrt(1 - 1 / b["tokens"])) < 1e-7 for b in each)
    assert abs(summary["advantage"]["std"] - np.sqrt(1 - 2 / summary["tokens"])) < 1e-7
    assert summary["advantage"]["min"] == min(b["advantage"]["min"] for b in each)
