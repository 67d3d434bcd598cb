"""CI runs the benchmark at a tiny size: it must work end to end (no timing is asserted)."""

import csv
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT, grpo_executable, run_grpo


TOKENS = [
    "floor (pyarrow read + write, 1 column)",
    "pyarrow default writer, 1 column",
    "grpo advantages -o",
    "naive per-sample Python loop",
    "floor (pyarrow read + write, 8 columns)",
    "grpo objective -o",
    "read floor (pyarrow read only)",
    "read floor, page checksums verified",
    "grpo objective (summary only)",
]
ADVANTAGES = [
    "floor (pyarrow read + write, 1 column)",
    "pyarrow default writer, 1 column",
    "grpo advantages -o",
    "polars over() script",
    "polars read + write",
    *(["DuckDB window query"] if importlib.util.find_spec("duckdb") else []),
    *(["torch-style script"] if importlib.util.find_spec("torch") else []),
    "naive per-sample Python loop",
    "read floor (pyarrow reads prompt_id, reward)",
    "grpo advantages (summary only)",
]


@pytest.mark.slow  # the benchmark, every command and its peers: about 10 s of CPU each
@pytest.mark.parametrize(
    "mean_tokens, labels, extra", [(4, TOKENS, ["--skip-peers", "--page-checksums", "with"]), (0, ADVANTAGES, []), (0, ADVANTAGES, ["--scattered"])]
)
def test_benchmark_smoke(tmp_path, mean_tokens, labels, extra):
    """One table per reward kind, a row per command, in order; every written file's size; the
    same rows appended to the results file, dated, with their floor."""
    env = {**os.environ, "PATH": f"{Path(grpo_executable()).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/bench.py"),
            "--rows",
            "256",
            "--mean-tokens",
            str(mean_tokens),
            "--runs",
            "1",
            "--workdir",
            str(tmp_path),
            "--rewards",
            "binary,continuous",
            "--results",
            str(tmp_path / "results.csv"),
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [line.split(" | ") for line in proc.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    header = ["| command", "median s", "x floor", "cores used", "peak RSS MiB", "output MiB |"]
    assert [row for row in rows if row == header] == [header, header]
    assert [row[0][2:] for row in rows if row != header] == labels * 2
    writes = [row for row in rows if row != header and "read floor" not in row[0] and "summary" not in row[0]]
    assert all(row[5].rstrip(" |") for row in writes) and not any(row[5].rstrip(" |") for row in rows if "summary" in row[0])
    with (tmp_path / "results.csv").open(newline="") as f:
        recorded = list(csv.DictReader(f))
    assert [r["command"] for r in recorded] == labels * 2 and len({r["date"] for r in recorded}) == 1
    assert [r["setup"].rsplit("; ", 1)[1] for r in recorded] == ["binary rewards"] * len(labels) + ["continuous rewards"] * len(labels)
    assert all(r["seconds"] == row[1] and r["ratio"] == row[2] for r, row in zip(recorded, (row for row in rows if row != header)))
    # the cores used: a run's CPU seconds (user and system) over its wall seconds
    busy = [float(row[3]) for row in rows if row != header]
    assert all(float(r["cpu_seconds"]) > 0 for r in recorded) and all(0 < b < 2 * (os.cpu_count() or 1) for b in busy)
    assert busy == pytest.approx([float(r["cpu_seconds"]) / float(r["seconds"]) for r in recorded], rel=0.01, abs=0.006)  # each rounded
    assert all(r["floor"] and r["cores"] and r["commit"] for r in recorded)


@pytest.mark.slow  # every peer installed, twice: about 20 s of CPU
def test_benchmark_cores_suite(tmp_path):
    """``--cores`` at a tiny ``--scale``: a table per file, then grpo against each peer timed,
    every row recorded with the machine; a peer that is not installed has no row."""
    env = {**os.environ, "PATH": f"{Path(grpo_executable()).parent}{os.pathsep}{os.environ['PATH']}"}
    argv = [sys.executable, str(ROOT / "benchmarks/bench.py"), "--cores", "--scale", "0.0005", "--runs", "1", "--workdir", str(tmp_path)]
    proc = subprocess.run([*argv, "--results", str(tmp_path / "results.csv")], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    with (tmp_path / "results.csv").open(newline="") as f:
        recorded = list(csv.DictReader(f))
    against = [(r["command"], r["floor"]) for r in recorded if r["setup"].endswith("grpo against its peers")]
    duckdb = [("grpo advantages -o", "DuckDB window query")] if importlib.util.find_spec("duckdb") else []
    assert against == [
        ("grpo advantages -o", "polars over() script"),
        *duckdb,
        ("grpo advantages -o", "polars read + write"),
        ("grpo advantages -o", "grpo advantages -o --threads 2"),
        ("grpo advantages (summary only)", "read floor (pyarrow reads prompt_id, reward)"),
        ("grpo objective -o", "polars objective script"),
        ("grpo objective -o", "polars read + write, 9 columns"),
        ("grpo objective -o", "grpo objective -o --threads 2"),
        ("grpo objective (summary only)", "read floor (pyarrow read only)"),
    ]
    assert all(r["ratio"] and r["cores"] and r["cpu"] and r["memory_gib"] and r["commit"] and float(r["cpu_seconds"]) > 0 for r in recorded)
    assert "ids and rewards" in proc.stdout and "tokens, " in proc.stdout


@pytest.mark.slow  # the tokens suite and the report: about 10 s of CPU
def test_benchmark_report(tmp_path):
    """``--report``: after the rest of the run, `grpo report -o` against `grpo mismatch` on a
    file with rollout log-probs, recorded with the run's date; skipped, saying so, without
    matplotlib."""
    env = {**os.environ, "PATH": f"{Path(grpo_executable()).parent}{os.pathsep}{os.environ['PATH']}"}
    argv = [sys.executable, str(ROOT / "benchmarks/bench.py"), "--rows", "64", "--mean-tokens", "8", "--report", "--skip-peers", "--skip-naive"]
    proc = subprocess.run(
        [*argv, "--runs", "1", "--workdir", str(tmp_path), "--results", str(tmp_path / "results.csv")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    with (tmp_path / "results.csv").open(newline="") as f:
        recorded = list(csv.DictReader(f))
    report = [r for r in recorded if r["setup"].endswith("tokens with rollout log-probs")]
    if importlib.util.find_spec("matplotlib") is None:
        assert not report and "--report: skipped, matplotlib is not installed" in proc.stdout
        return
    assert [(r["command"], r["floor"]) for r in report] == [
        ("grpo mismatch (summary only)", "grpo mismatch (summary only)"),
        ("grpo report -o", "grpo mismatch (summary only)"),
    ]
    assert report[1]["output_mib"] and not report[0]["output_mib"] and len({r["date"] for r in recorded}) == 1
    assert len(recorded) > len(report)  # the tokens suite ran first, in the same run


def test_timeline(tmp_path):
    """``timeline.py`` runs a command as `grpo` does, the same file written, and prints the run,
    each stage's calls and the cores used per interval."""
    src = str(ROOT / "sample_data/rollouts.parquet")
    args = ["objective", src, "--threads", "2", "-q", "-o"]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/timeline.py"), "--interval", "0.02", *args, str(tmp_path / "timed.parquet")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    run_grpo(*args, str(tmp_path / "plain.parquet"))
    assert (tmp_path / "timed.parquet").read_bytes() == (tmp_path / "plain.parquet").read_bytes()
    lines = proc.stderr.splitlines()
    run = next(line for line in lines if line.startswith("wall "))
    wall, cpu, start_up = (float(x) for x in re.match(r"wall (\S+) s, CPU (\S+) s, \S+ cores; start-up (\S+) s", run).groups())
    assert 0 < start_up < wall and cpu > 0
    stages = {row.split(" | ")[0][2:]: row.split(" | ") for row in lines if re.match(r"\| (read|kernel|write|encode|join|close) \|", row)}
    assert set(stages) == {"read", "kernel", "write", "encode", "join", "close"}
    assert all(int(row[1]) > 0 and 0 <= float(row[3]) and start_up <= float(row[4]) <= float(row[5].rstrip(" |")) <= wall for row in stages.values())
    timeline = [row for row in lines if re.match(r"\| \d+\.\d\d \| ", row)]
    assert timeline and all(float(row.split(" | ")[1]) >= 0 for row in timeline)


def test_against_runs_the_other_trees_code_from_any_folder(tmp_path):
    """``--against DIR`` times DIR's code, also when the benchmark runs in a checkout's root,
    where `python -m grpo_cli` would import that checkout's code instead."""
    spec = importlib.util.spec_from_file_location("bench", ROOT / "benchmarks/bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    tree = tmp_path / "tree"
    (tree / "grpo_cli").mkdir(parents=True)
    (tree / "grpo_cli/__init__.py").write_text("")
    (tree / "grpo_cli/__main__.py").write_text("import pathlib, sys\npathlib.Path(sys.argv[1]).write_text(__file__)\n")
    marker = tmp_path / "ran"
    timed, pairs = bench.against([("advantages", "grpo advantages -o", [*bench.grpo(), str(marker)])], tree)
    assert [label for _, label, _ in timed] == ["grpo advantages -o", "grpo advantages -o @ tree"] and pairs[-1] == tuple(
        label for _, label, _ in timed
    )
    subprocess.run(timed[1][2], cwd=ROOT, check=True)
    assert marker.read_text() == str(tree.resolve() / "grpo_cli/__main__.py")
    ran = subprocess.run([*timed[0][2][:-1], "--version"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert ran.stdout.startswith("grpo ")
