"""MkDocs hooks: the parts of the docs that the code already says, generated from it.

- the navigation's command pages, from the CLI's list of commands (``commands/<name>.md``);
- ``<!-- options: NAME -->``: the options of command NAME, from its click parameters;
- ``<!-- estimators -->``, ``<!-- losses -->``: the registries, from their docstrings;
- ``<!-- presets -->``: each preset's base option values, from ``grpo_cli.presets.PRESETS``;
  ``<!-- presets: frameworks -->`` what each sets per estimator and loss and what its
  framework ships; ``<!-- presets: changes -->`` what changed between releases;
- ``<!-- api -->``: a mkdocstrings block for each name the package exports;
- ``<!-- benchmarks -->``: the latest ``benchmarks/results.csv`` rows of each machine;
- ``<!-- tried: KIND -->``: the ``benchmarks/tried.csv`` rows of KIND (``kept``, ``not-kept``,
  ``observed``): changes measured and what became of them, and observations of the machine.

Everything is read from objects (click commands, registries), not from source text, so the
pages follow the code whatever shape its declarations take.
"""

from __future__ import annotations

import csv
import functools
import inspect
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results.csv"
TRIED = ROOT / "benchmarks" / "tried.csv"
MARKER = re.compile(r"(?<!`)<!-- (options|estimators|losses|presets|api|benchmarks|tried)(?:: ([\w-]+))? -->")


@functools.cache
def commands() -> dict:
    """The ``grpo`` command's subcommands by name, as click runs them (from the registry)."""
    from grpo_cli.commands import names
    from grpo_cli.commands.base import build

    return {name: build(name) for name in names()}


@functools.cache
def declared(name: str) -> dict:
    """Command ``name``'s option declarations (:class:`grpo_cli.options.Option`) by name."""
    from grpo_cli.commands import load

    return {option.name: option for option in load(name).OPTIONS}


def on_config(config):
    """Fill the ``Commands`` section of the navigation with one page per command."""
    pages = [{name: f"commands/{name}.md"} for name in commands()]
    for entry in config["nav"]:
        if isinstance(entry, dict) and "Commands" in entry:
            entry["Commands"] = pages
            return config
    config["nav"].append({"Commands": pages})
    return config


def on_page_markdown(markdown: str, page, config, files) -> str:
    return MARKER.sub(lambda m: RENDER[m.group(1)](m.group(2)), markdown)


def cell(text: str) -> str:
    """``text`` as one markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


DEFAULT = re.compile(r"\s*\[default: (.*)\]\s*$")


def type_text(param, option) -> str:
    """What an option takes, from its declaration (``option``; ``None`` for click's own
    ``--help``): ``flag``, the choices, a type with its range, ``repeatable``."""
    import enum
    import typing

    if option is None or option.type is bool:
        return "flag"
    kind, repeatable = option.type, typing.get_origin(option.type) is list
    if repeatable:
        kind = typing.get_args(kind)[0]
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        text = " | ".join(f"`{choice.value}`" for choice in kind)
    else:
        text = {str: "text", int: "integer", float: "float"}.get(kind, getattr(kind, "__name__", str(kind)))
        low, high = getattr(option.info, "min", None), getattr(option.info, "max", None)
        if low is not None or high is not None:
            text += f" ({'' if low is None else f'{low} <= '}x{'' if high is None else f' <= {high}'})"
    return text + (", repeatable" if repeatable else "")


def option_row(param, options: dict) -> tuple[str, list[str]]:
    """``(panel, [flags, type, default, help])`` of one click parameter (``options``: the
    command's declarations by name)."""
    help_text = (getattr(param, "help", None) or "").replace("\\[", "[")
    shown = DEFAULT.search(help_text)
    if shown:
        help_text, default = help_text[: shown.start()], shown.group(1)
    elif param.default is None or param.default is False or param.default == () or callable(param.default):
        default = ""
    else:
        default = str(getattr(param.default, "value", param.default))
    flags = ", ".join(f"`{flag}`" for flag in [*param.opts, *param.secondary_opts])
    if param.param_type_name == "argument":
        flags = f"`{param.name.upper()}`" + ("..." if param.nargs == -1 else "")
    if param.param_type_name == "argument":
        what = "text, repeatable"
    else:
        what = type_text(param, options.get(param.name))
    panel = getattr(param, "rich_help_panel", None) or ("Arguments" if param.param_type_name == "argument" else "Options")
    return panel, [flags, what, f"`{default}`" if default else "", help_text.replace("*", "\\*")]


def options(name: str) -> str:
    """One table per help panel of command ``name``'s parameters, in the help's order."""
    panels: dict[str, list[list[str]]] = {}
    for param in commands()[name].params:
        panel, row = option_row(param, declared(name))
        panels.setdefault(panel, []).append(row)
    return "\n".join(f"**{panel}**\n\n" + table(["option", "type", "default", "meaning"], rows) for panel, rows in panels.items())


ROLE = re.compile(r":(?:class|func|data|attr|mod|meth):`~?([\w.]+)`")


def markdown_of(doc: str | None) -> str:
    """A docstring (reStructuredText-ish) as markdown: ``.. math::`` blocks become display
    math, ``:math:`` inline math, double backticks code, cross-references their last name."""
    out, math = [], None
    for line in inspect.cleandoc(doc or "").splitlines():
        if math is not None:
            if line.startswith(" ") and line.strip():
                math.append(line.strip())
                continue
            out += ["", "$$", " ".join(math), "$$", ""]
            math = None
        if line.startswith(".. math::"):
            math = [line[len(".. math::") :].strip()]
            continue
        out.append(line)
    if math is not None:
        out += ["", "$$", " ".join(math), "$$"]
    text = "\n".join(out)
    text = re.sub(r":math:`([^`]*)`", r"\\(\1\\)", text)
    text = ROLE.sub(lambda m: f"`{m.group(1).rsplit('.', 1)[-1]}`", text)
    return text.replace("``", "`")


def names(values) -> str:
    return ", ".join(f"`{v}`" for v in values)


def estimators(_) -> str:
    """Each registered estimator: its docstring, then what its spec declares."""
    from grpo_cli.estimators import ESTIMATORS

    parts = []
    for e in ESTIMATORS.values():
        spec = {k: getattr(e, k, None) for k in ("level", "default_scale", "needs", "params", "aliases", "scope")}
        facts = [
            f"one advantage per {spec['level']}" if spec["level"] else "",
            f"default scale `{spec['default_scale']}`" if spec["default_scale"] else "",
            f"needs {names(spec['needs'])}" if spec["needs"] else "",
            f"options {names(spec['params'])}" if spec["params"] else "no options of its own",
            f"aliases {names(spec['aliases'])}" if spec["aliases"] else "",
            "statistics of the whole input" if spec["scope"] == "file" else "",
        ]
        parts.append(f"### `{e.name}`\n\n{markdown_of(e.compute.__doc__)}\n\n*" + "; ".join(f for f in facts if f) + ".*\n")
    return "\n".join(parts)


def losses(_) -> str:
    """Each registered loss: its docstring, then its options, defaults and flags."""
    from grpo_cli.objective.losses import LOSSES

    parts = []
    for loss in LOSSES.values():
        params, defaults, flags = (getattr(loss, k, ()) for k in ("params", "defaults", "flags"))
        facts = [
            f"options {names(params)}" if params else "no options of its own",
            "defined with " + ", ".join(f"`{k}` {v}" for k, v in dict(defaults).items()) if defaults else "",
            f"flags {names(f.name for f in flags)}" if flags else "",
        ]
        parts.append(f"### `{loss.name}`\n\n{markdown_of(loss.factors.__doc__)}\n\n*" + "; ".join(f for f in facts if f) + ".*\n")
    return "\n".join(parts)


def presets(part: str | None) -> str:
    """The presets' base values (``<!-- presets -->``), what changed between the releases of a
    framework (``changes``), or, per preset, what it sets for each estimator and loss and
    what its framework ships, reproduced or not (``frameworks``)."""
    from grpo_cli.commands.presets import settings, shown_text
    from grpo_cli.presets import CHANGES, PRESETS

    if part == "changes":
        rows = [[f"`{old}` → `{new}`", item, before, after] for (old, new), changes in CHANGES.items() for item, before, after in changes]
        return table(["presets", "what", "older", "newer"], rows)
    if part == "frameworks":
        sections = []
        for p in PRESETS.values():
            kinds = settings(p.name)
            rows = [[f"`--{kind} {name}`", f"`{shown_text(values)}`"] for kind, by_name in kinds.items() for name, values in by_name.items()]
            shipped = [[name, f"`--preset {p.name} {form}`"] for name, form in p.ships.items()]
            shipped += [[name, f"not reproduced: {why}"] for name, why in p.missing.items()]
            sections.append(
                f"### `{p.name}`: {p.framework} {p.version}\n\nRead from {p.source}.\n\n"
                + table([f"with `--preset {p.name}`", "the preset sets"], rows)
                + "\n"
                + table([f"{p.framework} {p.version} ships", "reproduced by"], shipped)
            )
        return "\n".join(sections)
    names = list(PRESETS)
    keys = list(dict.fromkeys(k for p in PRESETS.values() for k in (*p.advantage, *p.objective)))

    def value(preset, key) -> str:
        values = {**preset.advantage, **preset.objective}
        return "-" if key not in values else "off" if values[key] is None else str(values[key])

    rows = [["framework", *(PRESETS[n].framework for n in names)], ["version", *(PRESETS[n].version for n in names)]]
    rows += [[f"`--{key.replace('_', '-')}`", *(value(PRESETS[n], key) for n in names)] for key in keys]
    rows += [["read from", *(PRESETS[n].source for n in names)]]
    return table(["option", *(f"`{n}`" for n in names)], rows)


def api(_) -> str:
    """A mkdocstrings block per exported class or function, where it is defined (the package
    exports them lazily, which static analysis cannot follow)."""
    import grpo_cli

    names = getattr(grpo_cli, "__all__", None) or [n for n in dir(grpo_cli) if not n.startswith("_")]
    objects = [getattr(grpo_cli, name) for name in names]
    return "\n".join(
        f"::: {obj.__module__}.{obj.__qualname__}\n    options:\n      heading_level: 3\n"
        for obj in objects
        if inspect.isclass(obj) or inspect.isfunction(obj)
    )


MACHINE = ("cores", "memory_gib", "cpu")
AGAINST_PEERS = "grpo against its peers"  # the setup of bench.py's rows of grpo against each peer


def benchmarks(_) -> str:
    """Each machine's latest run in ``benchmarks/results.csv`` (the rows of its latest date),
    one table per setup."""
    with RESULTS.open(newline="") as f:
        rows = list(csv.DictReader(f))
    latest: dict[tuple, str] = {}
    for row in rows:
        machine = tuple(row[k] for k in MACHINE)
        latest[machine] = max(latest.get(machine, ""), row["date"])
    parts = []
    for machine, date in sorted(latest.items(), key=lambda item: item[1], reverse=True):
        run = [r for r in rows if tuple(r[k] for k in MACHINE) == machine and r["date"] == date]
        cores, memory, cpu = machine
        parts.append(f"### {cores} cores, {memory} GiB, {cpu}\n\n{date}, commit `{run[0]['commit']}`\n")
        for setup in dict.fromkeys(r["setup"] for r in run):
            shown = [r for r in run if r["setup"] == setup]
            if setup.endswith(AGAINST_PEERS):  # bench.py --cores: grpo's time over each peer's
                headers, cells = ["command", "peer", "median s", "x peer"], ["command", "floor", "seconds", "ratio"]
            else:
                headers, cells = ["command", "median s", "x floor"], ["command", "seconds", "ratio"]
            headers += ["cores used", "peak RSS MiB", "output MiB"]
            parts.append(f"`{setup}`\n\n" + table(headers, [[r[c] for c in cells] + [busy(r), r["peak_rss_mib"], r["output_mib"]] for r in shown]))
    return "\n".join(parts)


def busy(row: dict) -> str:
    """The cores a command of ``row`` kept busy: its CPU seconds over its wall seconds (the
    medians'; rows from before bench.py recorded CPU time have none)."""
    return f"{float(row['cpu_seconds']) / float(row['seconds']):.2f}" if row.get("cpu_seconds") else ""


def tried(kind: str) -> str:
    """The ``benchmarks/tried.csv`` rows of ``kind`` (``not-kept`` for ``not kept``), oldest first."""
    with TRIED.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["kind"] == kind.replace("-", " ")]
    return table(
        ["date", "commit", "change", "measured", "ratio", "verdict"],
        [[r["date"][:10], f"`{r['commit']}`", r["change"], r["figure"], r["ratio"], r["verdict"]] for r in sorted(rows, key=lambda r: r["date"])],
    )


RENDER = {"options": options, "estimators": estimators, "losses": losses, "presets": presets, "api": api, "benchmarks": benchmarks, "tried": tried}
