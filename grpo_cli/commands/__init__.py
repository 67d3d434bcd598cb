"""The commands of `grpo` (see :mod:`grpo_cli.cli`): each parses options, calls one library
function, renders. Each command is a module of its own (:mod:`.advantages`, :mod:`.objective`,
...), imported when it runs or shows its help; this module holds what they share: the
options they have in common, errors, progress, and the rendering of the figures.

Data goes to stdout (only with ``-o -``); tables and errors go to stderr. Option help and
defaults come from the library (config fields, registries, column roles), and the library's
messages, which name Python parameters, are shown with the flags.

>>> command("advantages").help.splitlines()[0]
'Compute one advantage per row from the rewards of its group.'
"""

import contextlib
import functools
import importlib
import re
import signal
import sys
import threading
import time
from dataclasses import fields
from enum import Enum
from inspect import getdoc
from typing import Annotated, Callable, Iterator, Optional

import typer

from .. import estimators
from ..cli import COMMANDS, drop_stdout
from ..config import MULTI_REWARD, ON_NULL, STD_KINDS, WHITEN_EPS_AT, AdvantageConfig, numbers, value_range
from ..engines import ENGINES
from ..errors import GrpoError, Interrupted, UsageError
from ..files import json_text
from ..io import FORMATS, stdout
from ..kl import KL_ESTIMATORS
from ..parallel import IN_FLIGHT_PER_CORE
from ..presets import PRESETS
from ..schema import ROLES
from ..writer import CODECS

app = typer.Typer(pretty_exceptions_enable=False)  # the commands, each built on its own by :func:`command`


def registered(name: str, epilog: str) -> Callable:
    """Register the decorated function as command ``name``; its help is its line in
    :data:`grpo_cli.cli.COMMANDS`, then its docstring."""

    def register(fn: Callable) -> Callable:
        return app.command(name, help=f"{COMMANDS[name]}\n\n{getdoc(fn)}", epilog=epilog)(fn)

    return register


@functools.cache
def command(name: str) -> typer.core.TyperCommand:
    """Command ``name`` as click runs it (its options built from its signature); its module
    (of the same name) registers it when imported."""
    importlib.import_module(f".{name}", __name__)
    info = next(c for c in app.registered_commands if c.name == name)
    return typer.main.get_command_from_info(info, pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode="rich")


def choices(name: str, values) -> type[Enum]:
    """A str Enum of the library's valid names, so `--help` and validation list them."""
    return Enum(name, {v: v for v in values}, type=str)


def listing(entries: dict[str, str]) -> str:
    """``name: text; name: text.``, a registry's entries as one line of help."""
    return "; ".join(f"{name}: {text.rstrip('.')}" for name, text in entries.items()) + "."


def escaped(text: str) -> str:
    """``text`` shown as it is in rich's help: every ``[`` escaped from markup (not
    ``rich.markup.escape``: importing it loads rich, 0.03 s, into every run)."""
    return text.replace("[", "\\[")


def _default(value) -> str:
    """``[default: value]``, escaped from rich markup."""
    return escaped(f"[default: {'off' if value is None or value is False else value}]")


def _stderr():
    """rich's console on stderr; rich is imported only by a run that shows something."""
    from rich.console import Console
    return Console(stderr=True)


def config_help(cls, name: str, extra: str = "", default: str | None = None) -> str:
    """A config field's help, ``extra``, and its default (from the field, or ``default``)."""
    meta = next(f for f in fields(cls) if f.name == name).metadata
    shown = default if default is not None else meta["default"]
    return f"{meta['help']}{' ' + extra if extra else ''} {_default(shown)}"


def _column_help(role: str, text: str) -> str:
    """A column option's help and the names it looks for by default."""
    candidates = ROLES[role].candidates
    if len(candidates) > 1:
        found = f"whichever of {', '.join(candidates)} is present; two present is an error"
    else:
        found = f"{candidates[0]}, if present" if candidates else "none"
    return f"{text} {_default(found)}"


INPUT, COLUMNS, ESTIMATOR, CLIP, KL_PANEL, OUTPUT = "Input", "Columns", "Advantages", "Clip and aggregation", "KL", "Output and run"
ROLLOUT = "Rollout correction"


def config_option(cls, name: str, panel: str, extra: str = "", default: str | None = None, *decls: str, **typer_options) -> typer.models.OptionInfo:
    """An option for a config field (flag: ``decls``, else the field's name), its help and default from the field."""
    return typer.Option(*decls, help=config_help(cls, name, extra, default), show_default=False, rich_help_panel=panel, **typer_options)


def column_option(role: str, text: str) -> typer.models.OptionInfo:
    """An option naming the column of ``role``, in the Columns panel."""
    return typer.Option(help=_column_help(role, text), rich_help_panel=COLUMNS)


Estimator = choices("Estimator", estimators.names())
Scale = choices("Scale", estimators.SCALES)
Std = choices("Std", STD_KINDS)
KL = choices("KL", KL_ESTIMATORS)
EngineName = choices("EngineName", ENGINES)
Format = choices("Format", FORMATS)

ESTIMATOR_LIST = listing({" = ".join((e.name, *e.aliases)): e.help for e in estimators.ESTIMATORS.values()})

# Options shared by the commands, declared once.
InputArg = Annotated[list[str], typer.Argument(help="Rollout files (.parquet, .jsonl, .ndjson), folders of them (with their sub-folders), or quoted globs (** for any depth), local or URIs (s3://, gs://, hdfs://), read as one dataset; or - for stdin.", show_default=False)]
OutputOpt = Annotated[Optional[str], typer.Option("--output", "-o", help="Write the annotated rows here, as one file (- for stdout). Without it (or --output-dir), only the summary is printed.", rich_help_panel=OUTPUT)]
OutputDirOpt = Annotated[Optional[str], typer.Option(help="Write one annotated file per input file into this folder (made if missing), at the input's path below its folder or glob.", rich_help_panel=OUTPUT)]
ThreadsOpt = Annotated[Optional[int], typer.Option(min=1, help=f"Worker threads for the math (default: one per core; at most {IN_FLIGHT_PER_CORE} per core run at once, so memory does not grow with it). Results do not depend on it.", rich_help_panel=OUTPUT)]
InputFormatOpt = Annotated[Optional[Format], typer.Option(help="Input format when the name does not tell (default: suffix, then file magic).", rich_help_panel=INPUT)]
HiveOpt = Annotated[bool, typer.Option("--hive", help="Read the key=value folders below a folder or glob input (step=1/part-0.parquet) as columns.", rich_help_panel=INPUT)]
OutputFormatOpt = Annotated[Optional[Format], typer.Option(help="Output format (default: suffix of -o; for stdout, the input's format).", rich_help_panel=OUTPUT)]
Codec = choices("Codec", CODECS)
CompressionOpt = Annotated[Optional[Codec], typer.Option(help="Parquet compression (default: the input's codec; snappy for JSON Lines input).", rich_help_panel=OUTPUT)]
PromptColOpt = Annotated[Optional[str], column_option("prompt", "Prompt id column.")]
RewardColOpt = Annotated[Optional[list[str]], column_option("reward", "Reward column (a struct field as rewards.accuracy); repeat it for several reward functions.")]
BaselineColOpt = Annotated[Optional[str], column_option("baseline", "Baseline reward per row (the greedy response's reward), read by --estimator remax.")]
MaskColOpt = Annotated[Optional[str], column_option("mask", "Token mask: list of 0/1 or bool; masked tokens count nowhere (none: count every token).")]
RefColOpt = Annotated[Optional[str], column_option("ref", "Reference log-probs (a list per row; optional; none: do without).")]
RolloutColOpt = Annotated[Optional[str], column_option("rollout", "The rollout sampler's log-probs (vLLM, SGLang; a list per row; optional; none: do without).")]
OldColOpt = Annotated[Optional[str], column_option("old", "Old-policy log-probs (a list per row).")]
NewColOpt = Annotated[Optional[str], column_option("new", "New-policy log-probs (a list per row).")]
NumGenOpt = Annotated[Optional[int], typer.Option(min=1, help="Group size. Without an id column, consecutive blocks of N rows form the groups; with one, every group must have N rows.", rich_help_panel=COLUMNS)]
ScaleOpt = Annotated[Optional[Scale], config_option(AdvantageConfig, "scale", ESTIMATOR, default="the estimator's: " + ", ".join(
    f"{e.default_scale} for {e.name}" for e in estimators.ESTIMATORS.values()))]
StdOpt = Annotated[Optional[Std], config_option(AdvantageConfig, "std", ESTIMATOR)]
EpsOpt = Annotated[Optional[float], config_option(AdvantageConfig, "eps", ESTIMATOR, min=0.0)]
RewardClipOpt = Annotated[Optional[str], config_option(AdvantageConfig, "reward_clip", ESTIMATOR, metavar="LO,HI")]
WhitenOpt = Annotated[bool, typer.Option("--whiten", help=config_help(AdvantageConfig, "whiten", "Always on for reinforce, "
                                          "reinforce-baseline, gae and normalize-then-sum."), show_default=False, rich_help_panel=ESTIMATOR)]
WhitenEpsOpt = Annotated[Optional[float], config_option(AdvantageConfig, "whiten_eps", ESTIMATOR)]
WhitenStdOpt = Annotated[Optional[choices("WhitenStd", STD_KINDS)], config_option(AdvantageConfig, "whiten_std", ESTIMATOR)]
WhitenEpsAtOpt = Annotated[Optional[choices("WhitenEpsAt", WHITEN_EPS_AT)], config_option(AdvantageConfig, "whiten_eps_at", ESTIMATOR)]
RewardWeightsOpt = Annotated[Optional[str], config_option(AdvantageConfig, "reward_weights", ESTIMATOR, default="1 each", metavar="W1,W2,...")]
MultiRewardOpt = Annotated[Optional[choices("MultiReward", MULTI_REWARD)], config_option(AdvantageConfig, "multi_reward", ESTIMATOR)]
OnNullOpt = Annotated[Optional[choices("OnNull", ON_NULL)], config_option(AdvantageConfig, "on_null", ESTIMATOR)]
KlInRewardOpt = Annotated[Optional[float], config_option(AdvantageConfig, "kl_in_reward", ESTIMATOR, metavar="BETA")]
GammaOpt = Annotated[Optional[float], config_option(AdvantageConfig, "gamma", ESTIMATOR)]
LamOpt = Annotated[Optional[float], config_option(AdvantageConfig, "lam", ESTIMATOR)]
Singleton = choices("Singleton", estimators.SINGLETONS)
Preset = choices("Preset", PRESETS)
PresetOpt = Annotated[Optional[Preset], typer.Option(help=config_help(AdvantageConfig, "preset"), show_default=False, rich_help_panel=INPUT)]
SingletonOpt = Annotated[Optional[Singleton], config_option(AdvantageConfig, "singleton", ESTIMATOR)]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Print no summary (and no progress unless --progress always).", rich_help_panel=OUTPUT)]
EngineOpt = Annotated[EngineName, typer.Option(help=escaped("Where the work runs: here, or on a Ray cluster (pip install 'grpo-cli[ray]'). Results are identical."), rich_help_panel=OUTPUT)]
RayAddressOpt = Annotated[Optional[str], typer.Option(help="The Ray cluster to use with --engine ray (default: RAY_ADDRESS if set, else a local Ray started for the run).", rich_help_panel=OUTPUT)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the figures as JSON on stdout instead of the tables.", rich_help_panel=OUTPUT)]
SummaryJsonOpt = Annotated[Optional[str], typer.Option(help="Also write the summary figures as JSON to this path (- for stdout, when the rows do not go there).", rich_help_panel=OUTPUT)]
PROGRESS_MODES = ("auto", "always", "never")
ProgressMode = choices("ProgressMode", PROGRESS_MODES)
PROGRESS_EVERY = 5.0  # seconds between progress lines when stderr is not a terminal
ProgressOpt = Annotated[ProgressMode, typer.Option(help=(
    f"auto: a bar on a terminal, else a line every {PROGRESS_EVERY:g} s on stderr, none with --quiet; always: also with "
    "--quiet; never: none."), rich_help_panel=OUTPUT)]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks instead of one-line errors.", rich_help_panel=OUTPUT)]


def _interrupt(signum: int, frame) -> None:
    raise Interrupted(signal.Signals(signum).name, 128 + signum)


LIBRARY_NAMES = {"advantage_config": "estimator"}  # library parameters that CLI options spell out


def _flags(ctx: typer.Context) -> dict[str, str]:
    """Each option's Python parameter name (and library alias) and its long flag."""
    flags = {p.name: max(p.opts, key=len) for p in ctx.command.params if p.opts and p.opts[0].startswith("-")}
    return {**flags, **{alias: flags[name] for alias, name in LIBRARY_NAMES.items() if name in flags}}


def with_flags(message: str, flags: dict[str, str]) -> str:
    """The library names parameters in backticks; the CLI shows their flags instead.

    >>> with_flags("`num_generations` must be >= 1 (pass `x`)", {"num_generations": "--num-generations"})
    '--num-generations must be >= 1 (pass `x`)'
    """
    return re.sub(r"`(\w+)`", lambda m: flags.get(m.group(1), m.group(0)), message)


@contextlib.contextmanager
def reported_errors(ctx: typer.Context, debug: bool) -> Iterator[None]:
    """Turn library errors into one ``Error: ...`` line on stderr and the error's exit code.

    SIGINT and SIGTERM raise :class:`Interrupted`, so every temporary file is removed on the
    way out (exit 130 / 143).
    """
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    except GrpoError as exc:
        if debug:
            raise
        typer.echo(f"Error: {with_flags(str(exc), _flags(ctx))}", err=True)
        drop_stdout()  # a write to stdout that failed (full disk) must not fail again at exit
        raise typer.Exit(exc.exit_code)
    except BrokenPipeError:
        # The reader closed the pipe (e.g. `| head`): stop quietly, as Unix tools do.
        drop_stdout()
        raise typer.Exit(141)
    except Exception as exc:
        if debug:
            raise
        typer.echo(f"Error: internal error ({type(exc).__name__}: {exc}); rerun with --debug for the traceback", err=True)
        raise typer.Exit(1)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def enum_value(option: Optional[Enum]) -> Optional[str]:
    """A choice option's value as the library takes it (``None``: not given)."""
    return option.value if option is not None else None


def progress_lines(write: Callable[[str], None], every: float = PROGRESS_EVERY, clock=time.monotonic) -> Callable[[int, int, str], None]:
    """Progress for logs: one line at most every ``every`` seconds (none for a short run).

    >>> t = iter([0.0, 1.0, 6.0, 7.0]); lines = []
    >>> report = progress_lines(lines.append, clock=lambda: next(t))
    >>> for done in (10, 20, 30): report(done, 40, "row group 1/4")
    >>> lines
    ['grpo: 20/40 rows (50%), row group 1/4, 6 s']
    """
    start = last = clock()

    def report(done: int, total: int, pieces: str) -> None:
        nonlocal last
        now = clock()
        if now - last >= every:
            last = now
            share = f" ({done / total:.0%})" if total else ""
            write(f"grpo: {done:,}/{total:,} rows{share}, {pieces}, {now - start:.0f} s")
    return report


@contextlib.contextmanager
def progress_reporter(mode: str, quiet: bool) -> Iterator[Optional[Callable[[int, int, str], None]]]:
    """Progress of rows (and row groups or files) on stderr: a rich bar on a terminal, else
    a line every few seconds; none with ``never``, or with --quiet unless ``always``. The
    display is set up when the first rows are done (a run that reports none never imports
    rich for it). A run that will show a summary imports its renderer (rich) on a thread of
    its own meanwhile, while this one reads and computes: about 0.02 s off the critical path."""
    if not quiet:
        threading.Thread(target=importlib.import_module, args=("..report", __package__), daemon=True).start()
    if mode == "never" or (quiet and mode != "always"):
        yield None
        return
    with contextlib.ExitStack() as stack:
        display: Optional[Callable[[int, int, str], None]] = None

        def report(done: int, total: int, pieces: str) -> None:
            nonlocal display
            display = display or stack.enter_context(_progress_display())
            display(done, total, pieces)

        yield report


@contextlib.contextmanager
def _progress_display() -> Iterator[Callable[[int, int, str], None]]:
    """A rich bar on a terminal, else a line every few seconds (:func:`progress_lines`)."""
    console = _stderr()
    if not console.is_terminal:
        yield progress_lines(lambda line: print(line, file=sys.stderr, flush=True))
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
    columns = (
        TextColumn("rows"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[pieces]}"),
        TimeElapsedColumn(), TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("rows", total=None, pieces="")
        yield lambda done, total, pieces: bar.update(task, completed=done, total=total, pieces=pieces)


def estimator_options(*, reward_clip: Optional[str], reward_weights: Optional[str], whiten: bool, **options) -> dict:
    """The estimator options of both commands as :class:`AdvantageConfig` takes them (``None``: not given)."""
    return {**{k: enum_value(v) if isinstance(v, Enum) else v for k, v in options.items()},
            "reward_clip": value_range(reward_clip, "reward_clip"), "reward_weights": numbers(reward_weights, "reward_weights"),
            "whiten": whiten or None}


def repeatable(values: Optional[list[str]]) -> str | list[str] | None:
    """A repeatable option as the library takes it: one value, a list of several, or ``None``."""
    return values[0] if values and len(values) == 1 else (values or None)


def check_json(json_out: bool, output: Optional[str], summary_json: Optional[str]) -> None:
    """Refuse ``--json`` where stdout already carries the rows or the summary JSON."""
    if json_out and (output == "-" or summary_json == "-"):
        raise UsageError("--json prints the figures on stdout, where the rows (or --summary-json -) would go; write them to a file")
    if json_out:
        stdout()  # refused if closed


def emit(figures: dict, command: str, quiet: bool, json_out: bool = False, *, written: tuple[Optional[str], ...]) -> None:
    """The figures as JSON on stdout with ``json_out``, else as tables on stderr
    (``report.render_<command>``) unless ``quiet``; the outputs (``written``: the paths
    given, or None) were committed before. Only the tables import the report and rich."""
    if quiet and not json_out:
        return
    with _reporting(any(path is not None for path in written)):
        if json_out:
            out = stdout()
            out.write(json_text(figures).encode())
            out.flush()
        else:
            from .. import report
            getattr(report, f"render_{command}")(figures, _stderr())


@contextlib.contextmanager
def _reporting(written: bool) -> Iterator[None]:
    """Show the figures of a run that has finished, every output (if it ``written`` any)
    committed: an interrupt meanwhile says so, and that only the summary is cut short."""
    try:
        yield
    except Interrupted as exc:
        done = "every output was written completely, only the summary is cut short" if written else "the summary is cut short"
        raise exc.saying(f" while printing the summary; {done}") from None
