"""Run one golden case in-process, as ``grpo`` would, and describe what it left."""

import hashlib
import json
import os
from pathlib import Path

from typer.testing import CliRunner

from grpo_cli.cli import app


def run_case(args: list[str], folder: Path) -> dict:
    """Exit code, first line of stderr on failure, the summary JSON and each output's sha256.

    ``folder`` holds (or links) ``sample_data``; ``OUT`` in ``args`` names the output there."""
    out = next((a.replace("OUT", "out") for a in args if a.startswith("OUT")), None)
    argv = [a.replace("OUT", "out") for a in args]
    summary = folder / "summary.json"
    if argv[0] != "presets":
        argv += ["--summary-json", str(summary), "-q"]
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(app, argv, env={"COLUMNS": "100"})
    finally:
        os.chdir(cwd)
    record: dict = {"exit": result.exit_code}
    if result.exit_code != 0:
        record["error"] = (result.stderr or result.output).strip().splitlines()[:1]
    elif argv[0] == "presets":
        record["stdout_sha256"] = hashlib.sha256(result.stdout.encode()).hexdigest()
    if summary.exists():
        record["summary"] = json.loads(summary.read_text())
        summary.unlink()
    if out is not None and (folder / out).exists():
        record["output_sha256"] = hashlib.sha256((folder / out).read_bytes()).hexdigest()
        (folder / out).unlink()
    return record
