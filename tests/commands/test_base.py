"""Issue 5: every bad input gets one clear line, a non-zero exit, no output file, and an
untouched input; runs that are killed or cannot write leave nothing behind."""

import hashlib
import os
import signal
import subprocess
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ..conftest import grpo_executable, read_json, run_grpo, write_jsonl_rows


def base_rows() -> list[dict]:
    return [{"prompt_id": f"p{i // 2}", "reward": float(i % 2), "logprobs": [-0.1, -0.2], "old_logprobs": [-0.1, -0.3]} for i in range(4)]


def edit(row: int, **changes):
    def make():
        rows = base_rows()
        rows[row].update(changes)
        return rows

    return make


def rename(old: str, new: str):
    return lambda: [{(new if k == old else k): v for k, v in r.items()} for r in base_rows()]


def write_input(tmp_path, fmt: str, make) -> "os.PathLike":
    """Write the case's rows (or raw bytes) as ``in.<fmt>``."""
    path = tmp_path / f"in.{fmt}"
    data = make()
    if isinstance(data, bytes):
        path.write_bytes(data)
    elif fmt == "parquet":
        pq.write_table(data if isinstance(data, pa.Table) else pa.Table.from_pylist(data), path)
    else:
        write_jsonl_rows(path, data)
    return path


def assert_refused(proc, tmp_path, code: int, fragment: str, before: dict) -> None:
    err = proc.stderr.decode()
    assert proc.returncode == code, err
    assert fragment in err, err
    assert "Traceback" not in err
    if code == 1:
        assert err.startswith("Error: ") and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir()), "output or temp file left behind"
    assert digests(tmp_path) == before, "an input file changed"


def digests(folder) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir() if p.is_file()}


TOKENS = ("objective",)
ADV = ("advantages",)
BOTH = ("advantages", "objective")

# (id, formats, make rows or bytes, commands, extra args, exit code, message fragment)
DATA_CASES = [
    ("empty file", ("parquet", "jsonl"), lambda: b"", BOTH, [], 1, "empty file"),
    (
        "zero rows parquet",
        ("parquet",),
        lambda: pa.table({"prompt_id": pa.array([], pa.string()), "reward": pa.array([], pa.float64())}),
        BOTH,
        [],
        1,
        "no rows",
    ),
    ("zero rows jsonl", ("jsonl",), lambda: b"\n\n", BOTH, [], 1, "no rows"),
    ("truncated parquet", ("parquet",), lambda: pq_bytes()[: len(pq_bytes()) // 2], BOTH, [], 1, "not a readable parquet file"),
    ("corrupt parquet", ("parquet",), lambda: b"PAR1" + bytes(range(256)) * 4 + b"PAR1", BOTH, [], 1, "not a readable parquet file"),
    (
        "line not JSON",
        ("jsonl",),
        lambda: b'{"prompt_id": "p0", "reward": 1}\n{"prompt_id": "p0", "reward": \n',
        BOTH,
        [],
        1,
        "line 2: not valid JSON",
    ),
    (
        "value of the wrong type",
        ("jsonl",),
        edit(2, reward="high"),
        BOTH,
        [],
        1,
        "line 3: column 'reward' holds string where earlier lines hold number",
    ),
    ("mixed types in a list", ("jsonl",), edit(1, logprobs=[-0.1, "x"]), TOKENS, [], 1, "line 2: column 'logprobs' holds list of mixed kinds"),
    (
        "non-numeric reward",
        ("parquet", "jsonl"),
        lambda: [{**r, "reward": "yes"} for r in base_rows()],
        BOTH,
        [],
        1,
        "column 'reward' must be numeric",
    ),
    (
        "missing reward",
        ("parquet", "jsonl"),
        rename("reward", "rewrd"),
        BOTH,
        [],
        1,
        "no reward column (looked for reward, score, token_level_scores, token_level_rewards; pass --reward-col); did you mean 'rewrd'?",
    ),
    ("missing log-probs", ("parquet", "jsonl"), rename("logprobs", "logprob"), TOKENS, [], 1, "did you mean 'logprob'"),
    (
        "ambiguous prompt id",
        ("parquet", "jsonl"),
        lambda: [{**r, "uid": r["prompt_id"]} for r in base_rows()],
        BOTH,
        [],
        2,
        "columns 'prompt_id', 'uid' could each be the prompt id; pick one with --prompt-col",
    ),
    (
        "duplicate column names",
        ("parquet",),
        lambda: pa.Table.from_arrays([pa.array(["p0"]), pa.array([1.0]), pa.array([0.0])], names=["prompt_id", "reward", "reward"]),
        BOTH,
        [],
        1,
        "duplicate column name 'reward'",
    ),
    (
        "duplicate keys",
        ("jsonl",),
        lambda: b'{"prompt_id": "p0", "reward": 1, "reward": 2}\n',
        BOTH,
        [],
        1,
        "line 1: not valid JSON (duplicate column name 'reward')",
    ),
    (
        "null reward",
        ("parquet", "jsonl"),
        edit(3, reward=None),
        BOTH,
        ["--estimator", "mean", "--on-null", "error"],
        1,
        "row 3 (prompt id 'p1'): column 'reward' is null or NaN (--on-null 'error'",
    ),
    (
        "NaN reward",
        ("parquet", "jsonl"),
        edit(1, reward=float("nan")),
        BOTH,
        ["--estimator", "mean", "--on-null", "error"],
        1,
        "row 1 (prompt id 'p0'): column 'reward' is null or NaN",
    ),
    ("infinite reward", ("parquet", "jsonl"), edit(2, reward=float("inf")), BOTH, [], 1, "row 2 (prompt id 'p1'): column 'reward' is infinite"),
    (
        "token lengths differ",
        ("parquet", "jsonl"),
        edit(2, old_logprobs=[-0.1]),
        TOKENS,
        [],
        1,
        "row 2 (prompt id 'p1'): column 'old_logprobs' has 1 tokens but 2 in the log-probs column",
    ),
    ("null token list", ("parquet", "jsonl"), edit(1, logprobs=None), TOKENS, [], 1, "row 1 (prompt id 'p0'): column 'logprobs' is null"),
    (
        "positive log-prob",
        ("parquet", "jsonl"),
        edit(3, logprobs=[-0.1, 0.5]),
        TOKENS,
        [],
        1,
        "row 3 (prompt id 'p1'): column 'logprobs' has a positive log-prob",
    ),
    (
        "NaN log-prob",
        ("parquet", "jsonl"),
        edit(0, old_logprobs=[float("nan"), -0.1]),
        TOKENS,
        [],
        1,
        "row 0 (prompt id 'p0'): column 'old_logprobs' has a NaN or infinite log-prob",
    ),
    (
        "infinite log-prob",
        ("parquet", "jsonl"),
        edit(0, logprobs=[float("-inf"), -0.1]),
        TOKENS,
        [],
        1,
        "column 'logprobs' has a NaN or infinite log-prob",
    ),
    (
        "mask of the wrong length",
        ("parquet", "jsonl"),
        lambda: [{**r, "mask": [1]} for r in base_rows()],
        TOKENS,
        ["--mask-col", "mask"],
        1,
        "row 0 (prompt id 'p0'): column 'mask' has 1 entries but 2 tokens",
    ),
    (
        "group size disagrees",
        ("parquet", "jsonl"),
        base_rows,
        BOTH,
        ["--num-generations", "3"],
        1,
        "prompt id 'p0' has 2 rows, expected --num-generations 3",
    ),
    (
        "rows not divisible",
        ("parquet", "jsonl"),
        lambda: [{k: v for k, v in r.items() if k != "prompt_id"} for r in base_rows()],
        ADV,
        ["--num-generations", "3"],
        1,
        "4 rows is not a multiple of --num-generations 3",
    ),
]


def pq_bytes() -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(base_rows()), sink)
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
@pytest.mark.parametrize("case", DATA_CASES, ids=[c[0] for c in DATA_CASES])
def test_bad_input_is_refused_cleanly(tmp_path, case, fmt):
    _, formats, make, commands, extra, code, fragment = case
    if fmt not in formats:
        pytest.skip(f"does not apply to {fmt}")
    src = write_input(tmp_path, fmt, make)
    (tmp_path / "out").mkdir()
    before = digests(tmp_path)
    for command in commands:
        proc = run_grpo(command, str(src), "-o", str(tmp_path / "out" / f"o.{fmt}"), *extra, check=False)
        assert_refused(proc, tmp_path, code, fragment, before)


def valid_input(tmp_path):
    return write_input(tmp_path, "parquet", base_rows)


OPTION_CASES = [
    (["--epsilon", "0"], "epsilon"),
    (["--dual-clip", "1"], "--dual-clip"),
    (["--estimator", "nope"], "grpo"),  # the valid names are listed
    (["--agg", "nope"], "token-mean"),
    (["--beta", "0.1"], "needs reference log-probs"),
    (["-o", "{input}"], "is an input file"),
    (["-o", "{tmp}/missing/o.parquet"], "does not exist"),
]


@pytest.mark.parametrize("args, fragment", OPTION_CASES, ids=[" ".join(a) for a, _ in OPTION_CASES])
def test_option_errors_exit_2(tmp_path, args, fragment):
    src = valid_input(tmp_path)
    (tmp_path / "out").mkdir()
    before = digests(tmp_path)
    args = [a.format(input=src, tmp=tmp_path) for a in args]
    proc = run_grpo("objective", str(src), *args, check=False)
    assert_refused(proc, tmp_path, 2, fragment, before)


def test_missing_unreadable_and_directory_inputs(tmp_path):
    (tmp_path / "out").mkdir()
    for target, fragment in [(tmp_path / "nope.parquet", "no such file"), (tmp_path / "out", "is a directory with no")]:
        proc = run_grpo("advantages", str(target), check=False)
        assert proc.returncode == 1 and fragment in proc.stderr.decode() and proc.stderr.decode().count("\n") == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(tmp_path):
    src = valid_input(tmp_path)
    src.chmod(0)
    proc = run_grpo("advantages", str(src), check=False)
    assert proc.returncode == 1 and "permission denied" in proc.stderr.decode()


def test_overflowing_log_ratio_is_clamped_and_counted(tmp_path):
    src = write_input(tmp_path, "parquet", edit(1, logprobs=[-0.1, -0.001], old_logprobs=[-0.1, -900.0]))
    run_grpo("objective", str(src), "--summary-json", str(tmp_path / "s.json"), "-q")
    figures = read_json(tmp_path / "s.json")
    assert figures["clamped_tokens"] == 1 and np.isfinite(figures["objective"])


def test_debug_shows_the_traceback(tmp_path):
    src = write_input(tmp_path, "parquet", edit(1, reward=float("inf")))
    proc = run_grpo("advantages", str(src), "--debug", check=False)
    assert proc.returncode != 0 and "Traceback" in proc.stderr.decode()


def big_rollouts(path, rows=200_000, tokens=64):
    rng = np.random.default_rng(0)
    lengths = np.full(rows, tokens)
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * tokens)
    old = -rng.gamma(0.6, 0.8, rows * tokens).astype(np.float32)
    pq.write_table(
        pa.table(
            {
                "prompt_id": np.arange(rows) // 8,
                "reward": rng.uniform(size=rows),
                "logprobs": pa.ListArray.from_arrays(offsets, pa.array(old)),
                "old_logprobs": pa.ListArray.from_arrays(offsets, pa.array(old)),
            }
        ),
        path,
    )
    return lengths


@pytest.mark.slow  # a 200,000-row file of 12.8M tokens to interrupt
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_killed_run_leaves_no_output_and_no_temp_file(tmp_path, sig, code):
    src = tmp_path / "big.parquet"
    big_rollouts(src)
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.Popen([grpo_executable(), "objective", str(src), "-o", str(out / "o.parquet"), "--threads", "1"], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not any(out.iterdir()) and time.monotonic() < deadline:  # the temp file exists: writing has begun
        time.sleep(0.01)
    assert any(out.iterdir()), "the run never started writing"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert err.decode() == f"Error: interrupted by {signal.Signals(sig).name}; no output written\n"
    assert list(out.iterdir()) == []


@pytest.mark.slow  # a pipeline of processes
def test_closed_pipe_exits_quietly(tmp_path):
    src = tmp_path / "big.parquet"
    big_rollouts(src, rows=50_000)
    shell = f"'{grpo_executable()}' advantages '{src}' -o - | head -c 100 > /dev/null; echo ${{PIPESTATUS[0]}}"
    proc = subprocess.run(["bash", "-c", shell], capture_output=True, timeout=120)
    assert proc.stdout.decode().strip() in ("0", "141")
    assert proc.stderr == b""


def test_full_disk_on_stdout_is_one_clear_line(tmp_path):
    src = valid_input(tmp_path)
    with open("/dev/full", "wb") as full:
        proc = subprocess.run([grpo_executable(), "advantages", str(src), "-o", "-"], stdout=full, stderr=subprocess.PIPE, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.decode() == "Error: <stdout>: cannot write (No space left on device); nothing was written\n"


@pytest.mark.parametrize("where", ["temp file", "write_table"])
def test_write_failures_leave_no_partial_file(tmp_path, monkeypatch, where):
    """A full disk or a permission error while writing: one clear error, nothing left."""
    import errno

    from grpo_cli import advantages_file
    from grpo_cli.errors import OutputError

    src = valid_input(tmp_path)
    out = tmp_path / "out"
    out.mkdir()

    def fail(*args, **kwargs):
        raise OSError(errno.ENOSPC if where == "write_table" else errno.EACCES, os.strerror(errno.ENOSPC if where == "write_table" else errno.EACCES))

    monkeypatch.setattr(os, "open", fail) if where == "temp file" else monkeypatch.setattr(pq.ParquetWriter, "write_table", fail)
    with pytest.raises(OutputError, match="cannot write"):
        advantages_file(str(src), str(out / "o.parquet"))
    assert list(out.iterdir()) == []
