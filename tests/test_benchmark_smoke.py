"""CI runs the benchmark at a tiny size: it must work end to end (no timing is asserted)."""

import csv
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT, grpo_executable


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
    header = ["| command", "median s", "x floor", "peak RSS MiB", "output MiB |"]
    assert [row for row in rows if row == header] == [header, header]
    assert [row[0][2:] for row in rows if row != header] == labels * 2
    writes = [row for row in rows if row != header and "read floor" not in row[0] and "summary" not in row[0]]
    assert all(row[4].rstrip(" |") for row in writes) and not any(row[4].rstrip(" |") for row in rows if "summary" in row[0])
    with (tmp_path / "results.csv").open(newline="") as f:
        recorded = list(csv.DictReader(f))
    assert [r["command"] for r in recorded] == labels * 2 and len({r["date"] for r in recorded}) == 1
    assert [r["setup"].rsplit("; ", 1)[1] for r in recorded] == ["binary rewards"] * len(labels) + ["continuous rewards"] * len(labels)
    assert all(r["seconds"] == row[1] and r["ratio"] == row[2] for r, row in zip(recorded, (row for row in rows if row != header)))
    assert all(r["floor"] and r["cores"] and r["commit"] for r in recorded)
