"""The README, the docs and the help stay true: the example commands of the README and of
every docs page run and print what they show, the docs' option tables show every option with
the default the help shows, every option has help, every command's examples are in its help
and run, and the docs site builds strictly."""

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from grpo_cli.cli import app

from .conftest import ROOT, grpo_executable, run_grpo

README = (ROOT / "README.md").read_text()
DOCS = {path.relative_to(ROOT).as_posix(): path.read_text() for path in sorted((ROOT / "docs").rglob("*.md"))}
PAGES = {"README.md": README, **DOCS}
COMMANDS = typer.main.get_command(app).commands


def _hooks():
    """docs/hooks.py, the MkDocs hooks that generate the docs' tables."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hooks = _hooks()


def console_examples(text: str) -> list[tuple[str, list[str]]]:
    """Each ``$ command`` of the console blocks of ``text``, and the lines shown after it."""
    examples = []
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                examples.append((line[2:], []))
            else:
                examples[-1][1].append(line)
    return examples


EXAMPLES = [(page, command, shown) for page, text in PAGES.items() for command, shown in console_examples(text)]


def console_commands() -> list[str]:
    return [command for _, command, _ in EXAMPLES]


def help_examples(command: str) -> list[str]:
    return [line.strip() for line in (COMMANDS[command].epilog or "").splitlines() if line.startswith("  ")]


SHELL = re.compile(r"[|<>&;$`]|^\w+=")  # a pipe, a redirection, a variable: what only a shell runs


def run_in_sample_folder(command: str, tmp_path):
    """``command`` run where ``sample_data/`` is at hand, at 100 columns: a plain ``grpo ...``
    in this process (:func:`run_grpo`), anything else by bash with the installed ``grpo``."""
    (tmp_path / "sample_data").symlink_to(ROOT / "sample_data")
    if command.startswith("grpo ") and not SHELL.search(command):
        here = os.getcwd()
        os.chdir(tmp_path)
        try:
            return run_grpo(*shlex.split(command)[1:], check=False, env={"COLUMNS": "100"})
        finally:
            os.chdir(here)
    env = {**os.environ, "PATH": f"{Path(grpo_executable()).parent}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "100"}
    return subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=tmp_path, env=env, capture_output=True, timeout=120)


@pytest.mark.parametrize("page, command, shown", EXAMPLES, ids=[f"{p}: {c[:60]}" for p, c, _ in EXAMPLES])
def test_console_examples_run(page, command, shown, tmp_path):
    """Each example of the README and the docs runs, and prints (at 100 columns) the lines the
    page shows after it."""
    proc = run_in_sample_folder(command, tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    printed = [line.rstrip() for line in (proc.stdout + proc.stderr).decode().splitlines()]
    assert all(line.rstrip() in printed for line in shown), f"{page} shows output that {command!r} does not print"


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
    """The two commands `.ci/run` reads (two lines after their markers), and the README's size."""
    lines = README.splitlines()
    run, test = (lines[lines.index(f"<!-- ci: {name} -->") + 2] for name in ("run", "test"))
    assert "sample_data/" in run and run.startswith("python3 -m venv .venv && ")
    assert test.startswith("python3 -m venv .venv && ") and "pytest" in test
    assert len(lines) <= 200


def test_every_command_has_a_page():
    """Each command has its page, with its generated option table; the navigation lists them."""
    for command in COMMANDS:
        assert f"<!-- options: {command} -->" in DOCS.get(f"docs/commands/{command}.md", ""), command
    nav = hooks.on_config({"nav": [{"Home": "index.md"}, {"Commands": []}]})["nav"]
    assert nav[1]["Commands"] == [{c: f"commands/{c}.md"} for c in COMMANDS]


def words(text: str) -> str:
    """Text as rendered help shows it: markup escapes, table borders and line breaks dropped."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text.replace("\\[", "[")).split())


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_and_example_is_in_the_help(command):
    rendered = run_grpo(command, "--help").stdout.decode()
    assert "Usage" in rendered
    wide = run_grpo(command, "--help", env={"COLUMNS": "1000"}).stdout.decode()
    for param in COMMANDS[command].params:
        assert param.help and len(param.help.split()) >= 2, f"{command} {param.name}: no help"
        assert words(param.help) in words(wide), f"{command} {param.name}: help not shown"
    examples = help_examples(command)
    assert len(examples) >= 2 and all(e.split("|")[-1].split()[:2] == ["grpo", command] or f"grpo {command}" in e for e in examples)
    assert all(words(e) in words(wide) for e in examples)


@pytest.mark.parametrize("command", COMMANDS)
def test_option_tables_show_every_option_and_its_default(command):
    """The docs' option table of each command (generated by docs/hooks.py) has a row for every
    parameter, with the default its help shows."""
    rendered = hooks.options(command)
    for param in COMMANDS[command].params:
        flags = f"`{param.name.upper()}`" if param.param_type_name == "argument" else f"`{param.opts[0]}`"
        row = next((line for line in rendered.splitlines() if line.startswith(f"| {flags}")), None)
        assert row, f"{command}: no row for {flags}"
        shown = re.search(r"\[default: (.*)\]$", (param.help or "").replace("\\[", "["))
        if shown:
            assert f"| `{hooks.cell(shown.group(1))}` |" in row, f"{command} {flags}: default not shown"


def json_keys(value, skip=("group_sizes",)) -> set[str]:
    """Every key of nested dicts (the keys of ``skip`` dicts are data, not names)."""
    if not isinstance(value, dict):
        return set()
    return {k for k in value} | {sub for k, v in value.items() if k not in skip for sub in json_keys(v)}


@pytest.mark.parametrize(
    "command, args",
    [
        ("advantages", []),
        ("advantages", ["--by", "prompt_id"]),
        ("objective", ["--beta", "0.04"]),
        ("objective", ["--is", "token", "--is-cap", "2", "--reject", "k3", "--reject-threshold", "1"]),
        ("mismatch", ["--is-mask", "0.5,2"]),
        ("compare", ["--estimators", "grpo:std=sample,rloo"]),
        ("inspect", []),
        ("filter", ["--drop-zero-variance", "--keep-if", "0<mean", "--overlong-buffer", "8", "--max-length", "64"]),
    ],
)
def test_every_summary_json_key_is_documented(tmp_path, command, args):
    out = tmp_path / "s.json"
    run_grpo(command, str(ROOT / "sample_data/rollouts_vllm.parquet"), *args, "-q", "--summary-json", str(out))
    section = DOCS[f"docs/commands/{command}.md"]
    # compare's figures are keyed by the estimators' labels (data): their keys are its own
    skip = ("group_sizes", "estimators", "rank_correlation", "sign_flips", "config") if command == "compare" else ("group_sizes", "nulls")
    figures = json.loads(out.read_text())
    keys = json_keys(figures, skip) | ({k for c in figures["config"].values() for k in c} if command == "compare" else set())
    missing = [k for k in sorted(keys) if not re.search(rf"\b{re.escape(k)}\b", section)]
    assert not missing, f"docs/commands/{command}.md: summary keys not documented: {missing}"


@pytest.mark.parametrize("page", [p for p, text in PAGES.items() if "```pycon" in text])
def test_python_examples_print_what_the_api_prints(page):
    import doctest

    blocks = re.findall(r"```pycon\n(.*?)```", PAGES[page], flags=re.S)
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for k, block in enumerate(blocks):
        runner.run(parser.get_doctest(block, {}, f"{page}-{k}", page, 0))
    assert runner.summarize(verbose=False).failed == 0


def test_example_outputs_are_git_ignored():
    """What the README's, the docs' and the help's examples write in the checkout is ignored by git."""
    written = {
        w
        for command in console_commands() + [e for c in COMMANDS for e in help_examples(c)]
        for w in re.findall(r"(?:-o|--summary-json|>)\s+(\S+\.(?:parquet|jsonl|json))", command)
    }
    ignored = set((ROOT / ".gitignore").read_text().split())
    assert written and written <= ignored, written - ignored


def test_readme_conventions_table_is_current():
    """The README's conventions table shows each preset's values and this tool's defaults."""
    from grpo_cli.presets import PRESETS

    table = README.split("## Conventions", 1)[1].split("\n## ", 1)[0]
    header, _, *rows = [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in table.splitlines() if line.startswith("|")]
    frameworks = {"verl": "verl", "TRL": "trl", "OpenRLHF": "openrlhf", "Twinkle": "twinkle"}
    for row in rows:
        option = row[1].strip("`")
        param = next(p for command in ("advantages", "objective") for p in COMMANDS[command].params if option in p.opts)
        default = re.search(r"\[default: (.*)\]$", param.help.replace("\\[", "["))
        assert row[2] == (default.group(1) if default else str(getattr(param.default, "value", param.default))), option
        for name, cell in zip(header[3:], row[3:]):
            values = {**PRESETS[frameworks[name]].advantage, **PRESETS[frameworks[name]].objective}
            value = values.get(param.name)
            assert cell == ("off" if value is None and param.name in values else str(value)), (option, name)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mkdocs", path=os.path.dirname(sys.executable)) is None, reason="mkdocs is not installed (pip install -e '.[docs]')")
def test_docs_build_strictly(tmp_path):
    """`mkdocs build --strict`: every page, link and generated table resolves (8-15 s)."""
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "mkdocs"), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stderr


def test_performance_page_shows_each_machines_latest_run(tmp_path, monkeypatch):
    """The Performance page's tables are each machine's latest run in the results file that
    `benchmarks/bench.py` appends to; the file in the repository reads as that page needs."""
    import csv

    with (ROOT / "benchmarks" / "results.csv").open(newline="") as f:
        recorded = list(csv.DictReader(f))
    assert recorded and all(r["date"] and r["commit"] and r["setup"] and r["command"] and float(r["seconds"]) > 0 for r in recorded)
    columns = list(recorded[0])
    rows = [
        ("2026-01-01T00:00:00+00:00", "2", "old", "0.500"),
        ("2026-02-01T00:00:00+00:00", "2", "new", "0.400"),
        ("2026-01-15T00:00:00+00:00", "64", "big", "0.100"),
    ]
    results = tmp_path / "results.csv"
    with results.open("w", newline="") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(
            {
                **dict.fromkeys(columns, ""),
                "date": d,
                "cores": c,
                "memory_gib": "24",
                "cpu": "x",
                "commit": "abc",
                "setup": "python benchmarks/bench.py",
                "command": label,
                "seconds": s,
            }
            for d, c, label, s in rows
        )
    monkeypatch.setattr(hooks, "RESULTS", results)
    page = hooks.benchmarks(None)
    assert "| new | 0.400 |" in page and "| big | 0.100 |" in page and "| old |" not in page
    assert page.index("2 cores") < page.index("64 cores")  # the most recent run first


def test_performance_page_shows_the_changes_measured(tmp_path, monkeypatch):
    """The Performance page's tables of changes measured are the rows of `benchmarks/tried.csv`
    of each kind its markers name, oldest first; the file in the repository reads as they need,
    and the page's prose carries no timing or ratio (those are rows of the data files; its targets are not measured)."""
    import csv

    with (ROOT / "benchmarks" / "tried.csv").open(newline="") as f:
        recorded = list(csv.DictReader(f))
    kinds = set(re.findall(r"<!-- tried: ([\w-]+) -->", DOCS["docs/performance.md"]))
    assert {r["kind"].replace(" ", "-") for r in recorded} == kinds == {"kept", "not-kept", "observed"}
    assert all(
        re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:]+\+00:00", r["date"])
        and re.fullmatch(r"[0-9a-f]{10}", r["commit"])
        and r["change"]
        and (r["figure"] or r["ratio"])
        for r in recorded
    )
    tried = tmp_path / "tried.csv"
    with tried.open("w", newline="") as f:
        writer = csv.DictWriter(f, list(recorded[0]))
        writer.writeheader()
        writer.writerows(
            {**dict.fromkeys(recorded[0], ""), "date": d, "commit": "abc", "kind": k, "change": c, "ratio": r, "verdict": v}
            for d, k, c, r, v in [
                ("2026-02-01T00:00:00+00:00", "not kept", "later", "1.05", "slower"),
                ("2026-01-01T00:00:00+00:00", "not kept", "earlier", "1.01", "no gain"),
                ("2026-01-15T00:00:00+00:00", "kept", "a | b", "0.90", ""),
            ]
        )
    monkeypatch.setattr(hooks, "TRIED", tried)
    not_kept = hooks.tried("not-kept")
    assert "| 2026-01-01 | `abc` | earlier |  | 1.01 | no gain |" in not_kept and "a \\| b" not in not_kept
    assert not_kept.index("earlier") < not_kept.index("later")
    assert "| a \\| b |" in hooks.tried("kept")
    prose = re.sub(r"```.*?```|## Targets.*?(?=\n## )", "", DOCS["docs/performance.md"], flags=re.S)  # targets are not measured
    measured = re.findall(r"\b\d+(?:\.\d+)?\s?(?:s|ms|x|%)(?![\w-])", prose)
    assert not measured, f"docs/performance.md: measured numbers in prose, make them rows of benchmarks/*.csv: {measured}"
