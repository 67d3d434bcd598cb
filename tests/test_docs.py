"""The README stays true: its example commands run, and every command has help."""

import os
import re
import subprocess
from pathlib import Path

import pytest

from .conftest import ROOT, grpo_executable, run_grpo

README = (ROOT / "README.md").read_text()


def console_commands() -> list[str]:
    blocks = re.findall(r"```console\n(.*?)```", README, flags=re.S)
    return [line[2:] for block in blocks for line in block.splitlines() if line.startswith("$ ")]


@pytest.mark.parametrize("command", console_commands())
def test_readme_examples_run(command, tmp_path):
    (tmp_path / "sample_data").symlink_to(ROOT / "sample_data")
    env = {**os.environ, "PATH": f"{Path(grpo_executable()).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()


@pytest.mark.parametrize(
    "args",
    [["advantages", "--std", "sample", "--eps", "1e-8"], ["objective", "--epsilon", "0.2"]],
)
def test_readme_usage_output_is_current(monkeypatch, args):
    """The summaries shown in the README are what the commands print today (at 100 columns)."""
    monkeypatch.setenv("COLUMNS", "100")
    proc = run_grpo(args[0], str(ROOT / "sample_data/rollouts.parquet"), *args[1:])
    for line in proc.stderr.decode().splitlines():
        assert line.rstrip() in README, f"README usage output is stale: {line!r}"


def test_readme_commands_exist():
    assert "<!-- ci: run -->" in README and "<!-- ci: test -->" in README


@pytest.mark.parametrize("command", ["advantages", "objective"])
def test_every_command_has_help(command):
    proc = run_grpo(command, "--help")
    assert b"Usage" in proc.stdout
    assert f"grpo {command}" in README
