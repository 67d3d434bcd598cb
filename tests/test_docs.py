"""The README and the help stay true: the README's example commands run, its option tables show
the defaults the library has, every option has help, and every command's examples are in its
help and run."""

import os
import re
import subprocess
from dataclasses import fields
from pathlib import Path

import pytest
import typer

from grpo_cli import AdvantageConfig, FilterConfig, MismatchConfig, ObjectiveConfig
from grpo_cli.cli import app

from .conftest import ROOT, grpo_executable, run_grpo

README = (ROOT / "README.md").read_text()
COMMANDS = typer.main.get_command(app).commands
CONFIG_OPTIONS = {f.name for cls in (AdvantageConfig, ObjectiveConfig, MismatchConfig, FilterConfig) for f in fields(cls)}


def console_examples() -> list[tuple[str, list[str]]]:
    """Each ``$ command`` of the README's console blocks, and the lines shown after it."""
    examples = []
    for block in re.findall(r"```console\n(.*?)```", README, flags=re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                examples.append((line[2:], []))
            else:
                examples[-1][1].append(line)
    return examples


def console_commands() -> list[str]:
    return [command for command, _ in console_examples()]


def help_examples(command: str) -> list[str]:
    return [line.strip() for line in (COMMANDS[command].epilog or "").splitlines() if line.startswith("  ")]


def run_in_sample_folder(command: str, tmp_path) -> subprocess.CompletedProcess:
    (tmp_path / "sample_data").symlink_to(ROOT / "sample_data")
    env = {**os.environ, "PATH": f"{Path(grpo_executable()).parent}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "100"}
    return subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=tmp_path, env=env, capture_output=True, timeout=120)


@pytest.mark.parametrize("command, shown", console_examples())
def test_readme_examples_run(command, shown, tmp_path):
    """Each example runs, and prints (at 100 columns) the lines the README shows after it."""
    proc = run_in_sample_folder(command, tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    printed = [line.rstrip() for line in (proc.stdout + proc.stderr).decode().splitlines()]
    assert all(line.rstrip() in printed for line in shown), f"README shows output that {command!r} does not print"


@pytest.mark.parametrize("command, example", [(c, e) for c in COMMANDS for e in help_examples(c)])
def test_help_examples_run(command, example, tmp_path):
    proc = run_in_sample_folder(example, tmp_path)
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


def words(text: str) -> str:
    """Text as rendered help shows it: markup escapes, table borders and line breaks dropped."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text.replace("\\[", "[")).split())


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_and_example_is_in_the_help(command):
    rendered = run_grpo(command, "--help").stdout.decode()
    assert "Usage" in rendered and f"grpo {command}" in README
    wide = subprocess.run([grpo_executable(), command, "--help"], capture_output=True, env={**os.environ, "COLUMNS": "1000"}).stdout.decode()
    for param in COMMANDS[command].params:
        assert param.help and len(param.help.split()) >= 2, f"{command} {param.name}: no help"
        assert words(param.help) in words(wide), f"{command} {param.name}: help not shown"
    examples = help_examples(command)
    assert len(examples) >= 2 and all(e.split("|")[-1].split()[:2] == ["grpo", command] or f"grpo {command}" in e for e in examples)
    assert all(words(e) in words(wide) for e in examples)


def readme_defaults(command: str) -> dict[str, str]:
    """The default column of the option tables (headed `... | default |`) in the README section
    of ``command``."""
    section = README.split(f"## `grpo {command}`", 1)[1].split("\n## ", 1)[0]
    tables = re.findall(r"((?:^\|.*\n)+)", section, flags=re.M)
    rows = [[cell.strip() for cell in line.strip().strip("|").split(" | ")]
            for table in tables if table.splitlines()[0].rstrip().endswith("| default |") for line in table.splitlines()[2:]]
    return {flag: row[-1].replace("`", "") for row in rows for flag in re.findall(r"`(--[\w-]+)", row[0])}


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_tables_show_the_defaults_of_the_help(command):
    documented = {**readme_defaults("advantages"), **readme_defaults(command)}  # the shared options: in the advantages section
    for param in COMMANDS[command].params:
        if param.name not in CONFIG_OPTIONS:
            continue
        flag = max(param.opts, key=len)
        shown = re.search(r"\[default: (.*)\]$", param.help.replace("\\[", "[")).group(1)
        assert flag in documented, f"README: no row for {flag} in the `grpo {command}` section"
        assert documented[flag] == shown, f"README: {flag} default {documented[flag]!r}, help says {shown!r}"


def readme_section(command: str) -> str:
    return README.split(f"## `grpo {command}`", 1)[1].split("\n## ", 1)[0]


def json_keys(value, skip=("group_sizes",)) -> set[str]:
    """Every key of nested dicts (the keys of ``skip`` dicts are data, not names)."""
    if not isinstance(value, dict):
        return set()
    return {k for k in value} | {sub for k, v in value.items() if k not in skip for sub in json_keys(v)}


@pytest.mark.parametrize("command, args", [("advantages", []), ("objective", ["--beta", "0.04"]),
                                           ("objective", ["--is", "token", "--is-cap", "2", "--reject", "k3", "--reject-threshold", "1"]),
                                           ("mismatch", ["--is-mask", "0.5,2"]),
                                           ("compare", ["--estimators", "grpo:std=sample,rloo"]),
                                           ("inspect", []),
                                           ("filter", ["--drop-zero-variance", "--keep-if", "0<mean", "--overlong-buffer", "8", "--max-length", "64"])])
def test_every_summary_json_key_is_documented(tmp_path, command, args):
    out = tmp_path / "s.json"
    run_grpo(command, str(ROOT / "sample_data/rollouts_vllm.parquet"), *args, "-q", "--summary-json", str(out))
    import json
    section = readme_section(command)
    # compare's figures are keyed by the estimators' labels (data): their keys are its own
    skip = ("group_sizes", "estimators", "rank_correlation", "sign_flips", "config") if command == "compare" else ("group_sizes", "nulls")
    figures = json.loads(out.read_text())
    keys = json_keys(figures, skip) | ({k for c in figures["config"].values() for k in c} if command == "compare" else set())
    missing = [k for k in sorted(keys) if not re.search(rf"\b{re.escape(k)}\b", section)]
    assert not missing, f"README, `grpo {command}` section: summary keys not documented: {missing}"


def test_readme_python_examples_print_what_the_api_prints():
    import doctest
    blocks = re.findall(r"```pycon\n(.*?)```", README, flags=re.S)
    assert blocks
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for k, block in enumerate(blocks):
        runner.run(parser.get_doctest(block, {}, f"README-{k}", "README.md", 0))
    assert runner.summarize(verbose=False).failed == 0


def test_example_outputs_are_git_ignored():
    """What the README's and the help's examples write in the checkout is ignored by git."""
    written = {w for command in console_commands() + [e for c in COMMANDS for e in help_examples(c)]
               for w in re.findall(r"(?:-o|--summary-json|>)\s+(\S+\.(?:parquet|jsonl|json))", command)}
    ignored = set((ROOT / ".gitignore").read_text().split())
    assert written and written <= ignored, written - ignored
