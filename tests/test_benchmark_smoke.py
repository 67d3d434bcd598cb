"""CI runs the benchmark at a tiny size: it must work end to end (no timing is asserted)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT, grpo_executable


@pytest.mark.parametrize("mean_tokens, commands, extra", [(4, 7, []), (0, 3, []), (0, 3, ["--scattered"])])
def test_benchmark_smoke(tmp_path, mean_tokens, commands, extra):
    env = {**os.environ, "PATH": f"{Path(grpo_executable()).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/bench.py"), "--rows", "256", "--mean-tokens", str(mean_tokens),
         "--runs", "1", "--workdir", str(tmp_path), *extra],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + commands
    assert rows[2].startswith("| grpo advantages -o |")
