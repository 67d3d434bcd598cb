"""The CLI's own concerns: options that do not apply are usage errors (exit 2) naming flags,
library messages shown with flags, and a progress bar that never touches stdout."""

import concurrent.futures
import gc
import io
import importlib.metadata
import json
import os
import pty
import re
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from .conftest import SAMPLE, grpo_executable, run_grpo, write_jsonl_rows


@pytest.mark.parametrize(
    "args, message",
    [
        # defects of issue 11: each used to change nothing (or switch the estimator) silently
        (
            ["objective", "--std", "sample"],
            "--std applies to an estimator, and none is given: the advantages come from an advantage "
            "column if there is one, else from estimator 'mean', which takes no --std; "
            "pass --estimator (e.g. 'grpo'), or drop --std",
        ),
        (["objective", "--eps", "0.5"], "--eps applies to an estimator, and none is given"),
        (["objective", "--scale", "group"], "--scale applies to an estimator, and none is given"),
        (["objective", "--estimator", "mean", "--std", "sample"], "estimator 'mean' takes no --std; it is never scaled"),
        (
            ["objective", "--max-length", "512"],
            "--max-length applies only to --agg 'seq-mean-token-sum-norm' or 'token-sum-norm' (found --agg 'seq-mean-token-sum'); drop it",
        ),
        (
            ["objective", "--epsilon", "0.2", "--epsilon-low", "0.1", "--epsilon-high", "0.3"],
            "--epsilon-low and --epsilon-high both override --epsilon",
        ),
        (["objective", "--scale", "none", "--estimator", "grpo", "--eps", "1e-8"], "--eps applies only to scaled advantages and --scale is 'none'"),
        (
            ["advantages", "--round", "3"],
            "--round rounds the written advantages (the summary never is); pass --output or --output-dir too, or drop it",
        ),
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
        stdout=subprocess.PIPE,
        stderr=follower,
        env={**os.environ, "COLUMNS": "100", "TERM": "xterm"},
        timeout=120,
    )
    os.close(follower)
    drawn = read_terminal(leader)
    os.close(leader)
    assert proc.returncode == 0
    assert pq.read_table(io.BytesIO(proc.stdout)).num_rows == 320
    assert b"rows " in drawn and "━".encode() in drawn and b"grpo advantages" in drawn
    assert b"row groups 1/1" in drawn
    piped = run_grpo("advantages", str(sample_parquet), "-o", "-")
    assert "━".encode() not in piped.stderr  # not a terminal: no bar


def read_terminal(leader: int) -> bytes:
    drawn = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            return drawn
        if not chunk:
            return drawn
        drawn += chunk


def test_version_short_help_and_completion():
    proc = run_grpo("--version")
    assert re.fullmatch(rb"grpo \d+\.\d+\.\d+\n", proc.stdout)
    for args in (["-h"], ["advantages", "-h"], ["objective", "-h"]):
        assert b"Usage: grpo" in run_grpo(*args).stdout
    assert b"--install-completion" in run_grpo("--help").stdout


def test_the_command_list_and_version_import_no_numerics_and_build_no_command():
    """`grpo --help` and `grpo --version` list the commands without building them: none of
    numpy, pyarrow, polars, rich (or a command's module) is imported (README, Performance)."""
    script = (
        "import sys\n"
        "from grpo_cli.cli import app\n"
        "try:\n    app(prog_name='grpo')\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'pyarrow', 'polars', 'rich') or m.startswith('grpo_cli.commands.')))\n"
    )
    for args in (["--help"], ["--version"], []):
        run = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=True)
        assert run.stdout.splitlines()[-1] == "[]", (args, run.stdout)
    listed = run_grpo("--help").stdout.decode()
    assert re.search(r"advantages +Compute one advantage per row", listed) and re.search(r"presets +The option values", listed)
    assert run_grpo("advantages", "--help").stdout.decode().count("Compute one advantage per row from the rewards of its group.") == 1


def test_a_command_imports_only_its_own_modules(sample_parquet, tmp_path):
    """`grpo advantages` on rows without token columns imports none of the other commands'
    modules (their options, plans, kernels and math), nor the token columns', nor numpy.ma
    (``pa.array`` of a numpy array imports it: 7 ms) (README, Performance)."""
    script = (
        "import atexit, json, sys\n"
        "from grpo_cli.cli import main\n"
        "atexit.register(lambda: print(json.dumps(sorted(m for m in sys.modules if m.startswith('grpo_cli.') or m.split('.')[:2] == ['numpy', 'ma']))))\n"
        "main()\n"
    )
    others = ("objective", "mismatch", "inspect", "compare", "filter", "presets")
    for args in (["-q"], ["-o", str(tmp_path / "a.parquet")]):
        run = subprocess.run([sys.executable, "-c", script, "advantages", str(sample_parquet), *args], capture_output=True, text=True, check=True)
        loaded = set(json.loads(run.stdout.splitlines()[-1]))
        assert {"grpo_cli.commands.advantages", "grpo_cli.plan", "grpo_cli.engines.kernels"} <= loaded
        unwanted = {
            f"grpo_cli.{m}" for m in ("objective", "mismatch", "compare", "filters", "inspection", "token_columns", "tokens", "engines.token_kernels")
        }
        unwanted |= {f"grpo_cli.{package}.{m}" for package in ("commands", "plan") for m in others}
        assert not {m for m in loaded if m in unwanted or m.startswith(("grpo_cli.objective.", "numpy.ma"))}, sorted(loaded)


@pytest.mark.parametrize("command", ["advantages", "objective"])
def test_help_has_panels_and_flags_without_a_type(command):
    shown = run_grpo(command, "--help", env={"COLUMNS": "120"}).stdout.decode()
    panels = re.findall(r"╭─ (.+?) ─", shown)
    expected = ["Arguments", "Options", "Input", "Columns", "Advantages"]
    expected += ["Clip and aggregation", "Rollout correction", "KL", "Output and run"] if command == "objective" else ["Output and run"]
    assert panels == expected
    assert not [line for line in shown.splitlines() if "<bool>" in line and "--help" not in line]  # typer >= 0.29 types its own --help
    assert re.search(r"--hive +Read the key=value", shown) and re.search(r"--quiet +-q +Print no summary", shown)
    assert "seed 0" not in shown.lower()


def test_a_library_range_error_names_the_flag(sample_parquet):
    err = run_grpo("objective", str(sample_parquet), "--epsilon", "-1", check=False).stderr.decode()
    assert err.startswith("Error: --epsilon must be > 0 and finite (found -1.0)") and "epsilon`" not in err, err


def on_a_terminal(args: list[str]) -> tuple[subprocess.CompletedProcess, bytes]:
    """Run grpo with stdout on a pseudo-terminal (read while it runs); return what it showed."""
    leader, follower = pty.openpty()
    shown = concurrent.futures.ThreadPoolExecutor(1).submit(read_terminal, leader)
    proc = subprocess.run([grpo_executable(), *args], stdout=follower, stderr=subprocess.PIPE, timeout=120)
    os.close(follower)
    drawn = shown.result(timeout=60)
    os.close(leader)
    return proc, drawn


@pytest.mark.slow  # a process on a terminal
def test_parquet_is_not_written_to_a_terminal(sample_parquet):
    proc, shown = on_a_terminal(["advantages", str(sample_parquet), "-o", "-", "-q"])
    assert proc.returncode == 2 and b"PAR1" not in shown
    assert proc.stderr.decode() == "Error: parquet is binary and stdout is a terminal; redirect or pipe it, or pass --output-format jsonl\n"
    proc, shown = on_a_terminal(["advantages", str(sample_parquet), "-o", "-", "-q", "--output-format", "jsonl"])
    assert proc.returncode == 0 and shown.count(b'"advantage"') == 320


def test_progress_modes(sample_parquet):
    """Not a terminal: `auto` and `always` print a line only every few seconds (a short run
    prints none, see commands.progress_lines); `never` and -q print nothing."""
    for args in ([], ["--progress", "always", "-q"], ["--progress", "never"], ["-q"]):
        proc = run_grpo("advantages", str(sample_parquet), *args)
        assert b"grpo: " not in proc.stderr and (b"grpo advantages" in proc.stderr) == (
            "-q" not in args and "never" not in args or args == ["--progress", "never"]
        )


def test_summary_json_to_stdout(sample_parquet):
    proc = run_grpo("advantages", str(sample_parquet), "--summary-json", "-", "-q")
    assert json.loads(proc.stdout)["rows"] == 320 and proc.stderr == b""
    proc = run_grpo("advantages", str(sample_parquet), "--summary-json", "-", "-o", "-", check=False)
    assert proc.returncode == 2 and proc.stdout == b""
    assert "cannot both go to stdout; write --summary-json to a file" in proc.stderr.decode()


@pytest.mark.parametrize("command", ["advantages", "objective"])
def test_summary_fits_80_columns(tmp_path, command):
    """Rewards near float64's limit make the widest figures; at 80 columns nothing wraps (the
    table is the same as at 200 columns) and no line is wider than 80."""
    rows = [
        {"prompt_id": "p", "reward": r, "logprobs": [-1e-300, -700.0], "old_logprobs": [-650.0, -1e-300], "ref_logprobs": [-0.5, -3.25]}
        for r in (1e308, -1e308, 1.5e307, -2.5e-300)
    ]
    src = write_jsonl_rows(tmp_path / "wide.jsonl", rows)
    extra = ["--estimator", "grpo", "--beta", "0.04", "--dual-clip", "3", "--epsilon-high", "0.28"] if command == "objective" else []
    shown = {}
    for width in ("80", "200"):
        proc = run_grpo(command, str(src), *extra, env={"COLUMNS": width}, check=False)
        assert proc.returncode == 0, proc.stderr.decode()
        shown[width] = [line.rstrip() for line in proc.stderr.decode().splitlines()]
    assert max(map(len, shown["80"])) <= 80 and shown["80"] == shown["200"]


def test_a_summary_of_integer_ids_imports_neither_pyarrow_compute_nor_polars(tmp_path):
    """Importing pyarrow.compute takes about 0.03 s (README, Performance): a summary-only run on
    integer prompt ids and float64 rewards calls none of its kernels, so it is not imported."""
    path = tmp_path / "ids.parquet"
    pq.write_table(pa.table({"prompt_id": [7, 7, 9, 9], "reward": [0.0, 1.0, 1.0, 1.0]}), path)
    script = (
        "import atexit, sys\n"
        "from grpo_cli.cli import main\n"
        "atexit.register(lambda: print(*(name in sys.modules for name in ('pyarrow.compute', 'polars'))))\n"
        "sys.argv = ['grpo', *sys.argv[1:]]\n"
        "main()\n"
    )
    summary = tmp_path / "summary.json"
    run = subprocess.run(
        [sys.executable, "-c", script, "advantages", str(path), "-q", "--summary-json", str(summary)], capture_output=True, text=True, check=True
    )
    assert json.loads(summary.read_text())["zero_variance_groups"]["count"] == 1
    assert run.stdout == "False False\n"


@pytest.mark.parametrize("command", ["advantages", "objective"])
def test_parquet_output_and_log_prob_lists_need_no_pyarrow_compute(sample_parquet, tmp_path, command):
    """The output's encodings are judged in numpy, and lists without nulls are read by their
    offsets: neither `advantages -o` nor `objective -o` imports pyarrow.compute, nor numpy.ma
    (``np.unique`` imports it)."""
    script = (
        "import atexit, sys\n"
        "from grpo_cli.cli import main\n"
        "atexit.register(lambda: print(*(name in sys.modules for name in ('pyarrow.compute', 'numpy.ma'))))\n"
        "sys.argv = ['grpo', *sys.argv[1:]]\n"
        "main()\n"
    )
    out = tmp_path / "out.parquet"
    run = subprocess.run(
        [sys.executable, "-c", script, command, str(sample_parquet), "-o", str(out), "-q"], capture_output=True, text=True, check=True
    )
    assert run.stdout == "False False\n"
    assert pq.read_metadata(out).num_rows == pq.read_metadata(sample_parquet).num_rows


def test_string_ids_split_across_batches_are_grouped_without_importing_pyarrow_compute(tmp_path):
    """Runs of text ids, joined where a batch edge cut them, use Arrow's kernels by name
    (groups.arrow), not the pyarrow.compute module."""
    path = tmp_path / "ids.parquet"
    pq.write_table(pa.table({"prompt_id": ["a", "a", "a", "b", "b", "c"], "reward": [0.0, 1.0, 2.0, 1.0, 1.0, 3.0]}), path)
    script = (
        "import sys\n"
        "from grpo_cli import advantages_file, process\n"
        "sys.meta_path.insert(0, process.WithoutPandas)  # as the command runs: pandas would import pyarrow.compute\n"
        "figures = advantages_file(sys.argv[1], batch_rows=2)\n"
        "print(figures['group_sizes'], 'pyarrow.compute' in sys.modules)\n"
    )
    run = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True)
    assert run.stdout == "{'1': 1, '2': 1, '3': 1} False\n"


TYPER_VERSION = tuple(int(part) for part in importlib.metadata.version("typer").split(".")[:2])


def test_a_quiet_run_imports_no_pydantic_pandas_or_rich_and_flushes_before_its_quick_exit(sample_parquet, tmp_path):
    """Start-up (grpo_cli.process): pyarrow imports no pandas, a run that shows nothing (-q)
    needs no rich, numpy's BLAS threads are not started, and the command exits without
    unloading numpy and pyarrow, so the exit handlers registered since grpo_cli was imported
    must still run and everything printed, theirs included, must be flushed (with stdout
    buffered, as in a user's shell: no PYTHONUNBUFFERED)."""
    script = (
        "import atexit, os, sys\n"
        "from grpo_cli.cli import main\n"
        "atexit.register(lambda: print('handlers ran', *(name in sys.modules for name in ('pydantic', 'pandas', 'rich')),\n"
        "                              os.environ.get('OPENBLAS_NUM_THREADS')))\n"
        "sys.argv = ['grpo', *sys.argv[1:]]\n"
        "main()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "OPENBLAS_NUM_THREADS")}
    run = subprocess.run(
        [sys.executable, "-c", script, "advantages", str(sample_parquet), "-o", "-", "--output-format", "jsonl", "-q"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    *rows, last = run.stdout.splitlines()
    typer_imports_pydantic = TYPER_VERSION >= (0, 29)  # typer 0.29 validates every option with pydantic: its start-up cost, not ours
    assert last == f"handlers ran {typer_imports_pydantic} False False 1"
    assert len(rows) == pq.read_metadata(sample_parquet).num_rows
    assert json.loads(rows[-1])["advantage"] is not None


def test_the_command_collects_garbage_but_not_start_ups_objects(sample_parquet):
    """Start-up (the imports) runs without the cyclic garbage collector, whose collections
    took 9-10 ms of every run; the command itself runs with it, start-up's objects frozen out
    of its walks. A host that runs the CLI's app itself keeps its collector as it was, on or off."""
    script = (
        "import atexit, gc, sys\n"
        "from grpo_cli.cli import main\n"
        "atexit.register(lambda: print(gc.isenabled(), gc.get_freeze_count() > 0))\n"
        "sys.argv = ['grpo', *sys.argv[1:]]\n"
        "main()\n"
    )
    run = subprocess.run([sys.executable, "-c", script, "advantages", str(sample_parquet), "-q"], capture_output=True, text=True, check=True)
    assert run.stdout == "True True\n"

    from typer.testing import CliRunner

    from grpo_cli.cli import app

    frozen = gc.get_freeze_count()
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            assert CliRunner().invoke(app, ["advantages", str(sample_parquet), "-q"]).exit_code == 0
            assert gc.isenabled() == enabled and gc.get_freeze_count() == frozen
        finally:
            gc.enable()


def test_a_narrow_terminal_and_a_line_break_in_a_file_name(tmp_path):
    """Issue 43, class 18: COLUMNS=0 printed no summary and COLUMNS=20 cut the numbers (the
    tables are at least 60 columns wide); a line break in a file name split the one-line error."""
    for columns in ("0", "20"):
        shown = run_grpo("advantages", str(SAMPLE / "rollouts.parquet"), env={"COLUMNS": columns}).stderr.decode()
        assert "│ estimator            │ grpo  scale group  std population │" in shown, columns
    odd = tmp_path / "a\nb.parquet"
    odd.write_bytes(b"")
    proc = run_grpo("advantages", str(odd), check=False)
    assert proc.returncode == 1 and proc.stderr.decode() == f"Error: {tmp_path}/a\\nb.parquet: empty file\n"
