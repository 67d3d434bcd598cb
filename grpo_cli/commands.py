"""The commands of `grpo` (see :mod:`.cli`): each parses options, calls one library function, renders.

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

from . import estimators
from .cli import COMMANDS, drop_stdout
from .config import MULTI_REWARD, ON_NULL, STD_KINDS, WHITEN_EPS_AT, AdvantageConfig, numbers, value_range
from .filters import TRUNCATED, FilterConfig
from .mismatch import MismatchConfig
from .objective.config import ObjectiveConfig
from .engines import ENGINES
from .errors import GrpoError, Interrupted, UsageError
from .files import advantages_file, compare_file, filter_file, inspect_file, json_text, mismatch_file, objective_file
from .io import FORMATS, stdout
from .numerics import ROUND_DIGITS_MAX
from .parallel import IN_FLIGHT_PER_CORE
from .writer import CODECS
from .kl import KL_ESTIMATORS
from .objective import AGGREGATIONS, ALIASES, LOSSES, RATIO_LEVELS
from .objective.rollout import REJECT_LEVELS
from .plan import OBJECTIVE_ESTIMATOR, objective_estimator
from .presets import PRESETS
from .schema import ROLES

app = typer.Typer(pretty_exceptions_enable=False)  # the commands, each built on its own by :func:`command`


def registered(name: str, epilog: str) -> Callable:
    """Register the decorated function as command ``name``; its help is its line in
    :data:`grpo_cli.cli.COMMANDS`, then its docstring."""

    def register(fn: Callable) -> Callable:
        return app.command(name, help=f"{COMMANDS[name]}\n\n{getdoc(fn)}", epilog=epilog)(fn)

    return register


@functools.cache
def command(name: str) -> typer.core.TyperCommand:
    """Command ``name`` as click runs it (its options built from its signature)."""
    info = next(c for c in app.registered_commands if c.name == name)
    return typer.main.get_command_from_info(info, pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode="rich")


def _choices(name: str, values) -> type[Enum]:
    """A str Enum of the library's valid names, so `--help` and validation list them."""
    return Enum(name, {v: v for v in values}, type=str)


def _listing(entries: dict[str, str]) -> str:
    return "; ".join(f"{name}: {text.rstrip('.')}" for name, text in entries.items()) + "."


def _escaped(text: str) -> str:
    """``text`` shown as it is in rich's help: every ``[`` escaped from markup (not
    ``rich.markup.escape``: importing it loads rich, 0.03 s, into every run)."""
    return text.replace("[", "\\[")


def _default(value) -> str:
    """``[default: value]``, escaped from rich markup."""
    return _escaped(f"[default: {'off' if value is None or value is False else value}]")


def _stderr():
    """rich's console on stderr; rich is imported only by a run that shows something."""
    from rich.console import Console
    return Console(stderr=True)


def _config_help(cls, name: str, extra: str = "", default: str | None = None) -> str:
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


def _option(cls, name: str, panel: str, extra: str = "", default: str | None = None, *decls: str, **typer_options) -> typer.models.OptionInfo:
    """An option for a config field (flag: ``decls``, else the field's name), its help and default from the field."""
    return typer.Option(*decls, help=_config_help(cls, name, extra, default), show_default=False, rich_help_panel=panel, **typer_options)


def _column_option(role: str, text: str) -> typer.models.OptionInfo:
    return typer.Option(help=_column_help(role, text), rich_help_panel=COLUMNS)


Estimator = _choices("Estimator", estimators.names())
Scale = _choices("Scale", estimators.SCALES)
Std = _choices("Std", STD_KINDS)
Loss = _choices("Loss", LOSSES)
Aggregation = _choices("Aggregation", {**AGGREGATIONS, **ALIASES})
KL = _choices("KL", KL_ESTIMATORS)
RatioLevel = _choices("RatioLevel", RATIO_LEVELS)
RejectLevel = _choices("RejectLevel", REJECT_LEVELS)
Truncated = _choices("Truncated", TRUNCATED)
EngineName = _choices("EngineName", ENGINES)
Format = _choices("Format", FORMATS)

ESTIMATOR_LIST = _listing({" = ".join((e.name, *e.aliases)): e.help for e in estimators.ESTIMATORS.values()})

# Options shared by the commands, declared once.
InputArg = Annotated[list[str], typer.Argument(help="Rollout files (.parquet, .jsonl, .ndjson), folders of them (with their sub-folders), or quoted globs (** for any depth), local or URIs (s3://, gs://, hdfs://), read as one dataset; or - for stdin.", show_default=False)]
OutputOpt = Annotated[Optional[str], typer.Option("--output", "-o", help="Write the annotated rows here, as one file (- for stdout). Without it (or --output-dir), only the summary is printed.", rich_help_panel=OUTPUT)]
OutputDirOpt = Annotated[Optional[str], typer.Option(help="Write one annotated file per input file into this folder (made if missing), at the input's path below its folder or glob.", rich_help_panel=OUTPUT)]
ThreadsOpt = Annotated[Optional[int], typer.Option(min=1, help=f"Worker threads for the math (default: one per core; at most {IN_FLIGHT_PER_CORE} per core run at once, so memory does not grow with it). Results do not depend on it.", rich_help_panel=OUTPUT)]
InputFormatOpt = Annotated[Optional[Format], typer.Option(help="Input format when the name does not tell (default: suffix, then file magic).", rich_help_panel=INPUT)]
HiveOpt = Annotated[bool, typer.Option("--hive", help="Read the key=value folders below a folder or glob input (step=1/part-0.parquet) as columns.", rich_help_panel=INPUT)]
OutputFormatOpt = Annotated[Optional[Format], typer.Option(help="Output format (default: suffix of -o; for stdout, the input's format).", rich_help_panel=OUTPUT)]
Codec = _choices("Codec", CODECS)
CompressionOpt = Annotated[Optional[Codec], typer.Option(help="Parquet compression (default: the input's codec; snappy for JSON Lines input).", rich_help_panel=OUTPUT)]
PromptColOpt = Annotated[Optional[str], _column_option("prompt", "Prompt id column.")]
RewardColOpt = Annotated[Optional[list[str]], _column_option("reward", "Reward column (a struct field as rewards.accuracy); repeat it for several reward functions.")]
BaselineColOpt = Annotated[Optional[str], _column_option("baseline", "Baseline reward per row (the greedy response's reward), read by --estimator remax.")]
MaskColOpt = Annotated[Optional[str], _column_option("mask", "Token mask: list of 0/1 or bool; masked tokens count nowhere (none: count every token).")]
RefColOpt = Annotated[Optional[str], _column_option("ref", "Reference log-probs (a list per row; optional; none: do without).")]
RolloutColOpt = Annotated[Optional[str], _column_option("rollout", "The rollout sampler's log-probs (vLLM, SGLang; a list per row; optional; none: do without).")]
OldColOpt = Annotated[Optional[str], _column_option("old", "Old-policy log-probs (a list per row).")]
NewColOpt = Annotated[Optional[str], _column_option("new", "New-policy log-probs (a list per row).")]
NumGenOpt = Annotated[Optional[int], typer.Option(min=1, help="Group size. Without an id column, consecutive blocks of N rows form the groups; with one, every group must have N rows.", rich_help_panel=COLUMNS)]
ScaleOpt = Annotated[Optional[Scale], _option(AdvantageConfig, "scale", ESTIMATOR, default="the estimator's: " + ", ".join(
    f"{e.default_scale} for {e.name}" for e in estimators.ESTIMATORS.values()))]
StdOpt = Annotated[Optional[Std], _option(AdvantageConfig, "std", ESTIMATOR)]
EpsOpt = Annotated[Optional[float], _option(AdvantageConfig, "eps", ESTIMATOR, min=0.0)]
RewardClipOpt = Annotated[Optional[str], _option(AdvantageConfig, "reward_clip", ESTIMATOR, metavar="LO,HI")]
WhitenOpt = Annotated[bool, typer.Option("--whiten", help=_config_help(AdvantageConfig, "whiten", "Always on for reinforce, "
                                          "reinforce-baseline, gae and normalize-then-sum."), show_default=False, rich_help_panel=ESTIMATOR)]
WhitenEpsOpt = Annotated[Optional[float], _option(AdvantageConfig, "whiten_eps", ESTIMATOR)]
WhitenStdOpt = Annotated[Optional[_choices("WhitenStd", STD_KINDS)], _option(AdvantageConfig, "whiten_std", ESTIMATOR)]
WhitenEpsAtOpt = Annotated[Optional[_choices("WhitenEpsAt", WHITEN_EPS_AT)], _option(AdvantageConfig, "whiten_eps_at", ESTIMATOR)]
RewardWeightsOpt = Annotated[Optional[str], _option(AdvantageConfig, "reward_weights", ESTIMATOR, default="1 each", metavar="W1,W2,...")]
MultiRewardOpt = Annotated[Optional[_choices("MultiReward", MULTI_REWARD)], _option(AdvantageConfig, "multi_reward", ESTIMATOR)]
OnNullOpt = Annotated[Optional[_choices("OnNull", ON_NULL)], _option(AdvantageConfig, "on_null", ESTIMATOR)]
KlInRewardOpt = Annotated[Optional[float], _option(AdvantageConfig, "kl_in_reward", ESTIMATOR, metavar="BETA")]
GammaOpt = Annotated[Optional[float], _option(AdvantageConfig, "gamma", ESTIMATOR)]
LamOpt = Annotated[Optional[float], _option(AdvantageConfig, "lam", ESTIMATOR)]
Singleton = _choices("Singleton", estimators.SINGLETONS)
Preset = _choices("Preset", PRESETS)
PresetOpt = Annotated[Optional[Preset], typer.Option(help=_config_help(AdvantageConfig, "preset"), show_default=False, rich_help_panel=INPUT)]
SingletonOpt = Annotated[Optional[Singleton], _option(AdvantageConfig, "singleton", ESTIMATOR)]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Print no summary (and no progress unless --progress always).", rich_help_panel=OUTPUT)]
EngineOpt = Annotated[EngineName, typer.Option(help=_escaped("Where the work runs: here, or on a Ray cluster (pip install 'grpo-cli[ray]'). Results are identical."), rich_help_panel=OUTPUT)]
RayAddressOpt = Annotated[Optional[str], typer.Option(help="The Ray cluster to use with --engine ray (default: RAY_ADDRESS if set, else a local Ray started for the run).", rich_help_panel=OUTPUT)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the figures as JSON on stdout instead of the tables.", rich_help_panel=OUTPUT)]
SummaryJsonOpt = Annotated[Optional[str], typer.Option(help="Also write the summary figures as JSON to this path (- for stdout, when the rows do not go there).", rich_help_panel=OUTPUT)]
PROGRESS_MODES = ("auto", "always", "never")
ProgressMode = _choices("ProgressMode", PROGRESS_MODES)
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


def _value(option: Optional[Enum]) -> Optional[str]:
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
        threading.Thread(target=importlib.import_module, args=(f"{__package__}.report",), daemon=True).start()
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


def _estimator_options(*, reward_clip: Optional[str], reward_weights: Optional[str], whiten: bool, **options) -> dict:
    """The estimator options of both commands as :class:`AdvantageConfig` takes them (``None``: not given)."""
    return {**{k: _value(v) if isinstance(v, Enum) else v for k, v in options.items()},
            "reward_clip": value_range(reward_clip, "reward_clip"), "reward_weights": numbers(reward_weights, "reward_weights"),
            "whiten": whiten or None}


def _one(values: Optional[list[str]]) -> str | list[str] | None:
    """A repeatable option as the library takes it: one value, a list of several, or ``None``."""
    return values[0] if values and len(values) == 1 else (values or None)


def _check_json(json_out: bool, output: Optional[str], summary_json: Optional[str]) -> None:
    if json_out and (output == "-" or summary_json == "-"):
        raise UsageError("--json prints the figures on stdout, where the rows (or --summary-json -) would go; write them to a file")
    if json_out:
        stdout()  # refused if closed


def _emit(figures: dict, command: str, quiet: bool, json_out: bool = False, *, written: tuple[Optional[str], ...]) -> None:
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
            from . import report
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


ADVANTAGES_EXAMPLES = """\
Examples:

  grpo advantages sample_data/rollouts.parquet -o advantages.parquet

  grpo advantages sample_data/rollouts.jsonl --estimator rloo --std sample --eps 1e-8 -o rloo.jsonl

  cat sample_data/rollouts.jsonl | grpo advantages - -o - --round 4 -q > annotated.jsonl
"""


@registered("advantages", ADVANTAGES_EXAMPLES)
def advantages(
    ctx: typer.Context,
    input: InputArg,
    preset: PresetOpt = None,
    input_format: InputFormatOpt = None,
    hive: HiveOpt = False,
    prompt_col: PromptColOpt = None,
    reward_col: RewardColOpt = None,
    num_generations: NumGenOpt = None,
    baseline_col: BaselineColOpt = None,
    mask_col: MaskColOpt = None,
    logprobs_col: NewColOpt = None,
    old_logprobs_col: OldColOpt = None,
    ref_logprobs_col: RefColOpt = None,
    values_col: Annotated[Optional[str], _column_option("values", "Per-token critic values (a list per row), read by --estimator gae.")] = None,
    estimator: Annotated[Optional[Estimator], _option(AdvantageConfig, "estimator", ESTIMATOR, ESTIMATOR_LIST)] = None,
    scale: ScaleOpt = None,
    std: StdOpt = None,
    eps: EpsOpt = None,
    singleton: SingletonOpt = None,
    gamma: GammaOpt = None,
    lam: LamOpt = None,
    reward_weights: RewardWeightsOpt = None,
    multi_reward: MultiRewardOpt = None,
    on_null: OnNullOpt = None,
    reward_clip: RewardClipOpt = None,
    kl_in_reward: KlInRewardOpt = None,
    kl: Annotated[Optional[KL], _option(AdvantageConfig, "kl", ESTIMATOR, _listing({n: (f.__doc__ or "").strip() for n, f in KL_ESTIMATORS.items()}))] = None,
    whiten: WhitenOpt = False,
    whiten_std: WhitenStdOpt = None,
    whiten_eps_at: WhitenEpsAtOpt = None,
    whiten_eps: WhitenEpsOpt = None,
    output: OutputOpt = None,
    output_dir: OutputDirOpt = None,
    round_digits: Annotated[Optional[int], typer.Option("--round", help=f"Round the written advantages to N decimals, 0 to {ROUND_DIGITS_MAX} (the summary is never rounded).", rich_help_panel=OUTPUT)] = None,
    output_format: OutputFormatOpt = None,
    compression: CompressionOpt = None,
    threads: ThreadsOpt = None,
    engine: EngineOpt = EngineName.local,
    ray_address: RayAddressOpt = None,
    quiet: QuietOpt = False,
    summary_json: SummaryJsonOpt = None,
    progress: ProgressOpt = ProgressMode.auto,
    debug: DebugOpt = False,
) -> None:
    """A group of one row, or of equal rewards, gets advantage 0 (never NaN)."""
    with reported_errors(ctx, debug):
        config = AdvantageConfig(preset=_value(preset), estimator=_value(estimator), **_estimator_options(
            scale=scale, std=std, eps=eps, singleton=singleton, gamma=gamma, lam=lam, reward_weights=reward_weights,
            multi_reward=multi_reward, on_null=on_null, reward_clip=reward_clip, kl_in_reward=kl_in_reward, kl=kl,
            whiten=whiten, whiten_std=whiten_std, whiten_eps_at=whiten_eps_at, whiten_eps=whiten_eps))
        with progress_reporter(progress.value, quiet) as progress:
            figures = advantages_file(
                input, output, output_dir=output_dir, config=config, prompt_col=prompt_col, reward_col=_one(reward_col),
                baseline_col=baseline_col, num_generations=num_generations, mask_col=mask_col, logprobs_col=logprobs_col,
                old_logprobs_col=old_logprobs_col, ref_logprobs_col=ref_logprobs_col, values_col=values_col, round_digits=round_digits,
                input_format=_value(input_format), hive=hive, output_format=_value(output_format), compression=_value(compression),
                threads=threads, progress=progress, engine=engine.value, ray_address=ray_address,
                summary_json=summary_json,
            )
        _emit(figures, "advantages", quiet, written=(output, output_dir, summary_json))


OBJECTIVE_EXAMPLES = """\
Examples:

  grpo objective sample_data/rollouts.parquet --epsilon 0.2 -o objective.parquet

  grpo objective sample_data/rollouts.parquet --agg token-mean --epsilon-high 0.28 --dual-clip 3 --beta 0.04 -q --summary-json objective.json

  grpo advantages sample_data/rollouts.parquet -o - -q | grpo objective - --ratio-level sequence -q
"""


@registered("objective", OBJECTIVE_EXAMPLES)
def objective(
    ctx: typer.Context,
    input: InputArg,
    preset: PresetOpt = None,
    input_format: InputFormatOpt = None,
    hive: HiveOpt = False,
    prompt_col: PromptColOpt = None,
    reward_col: RewardColOpt = None,
    num_generations: NumGenOpt = None,
    baseline_col: BaselineColOpt = None,
    logprobs_col: NewColOpt = None,
    old_logprobs_col: OldColOpt = None,
    ref_logprobs_col: RefColOpt = None,
    rollout_logprobs_col: RolloutColOpt = None,
    mask_col: MaskColOpt = None,
    advantage_col: Annotated[Optional[str], _column_option("advantage", "Advantages: a number per row, or a list per row (one per token).")] = None,
    estimator: Annotated[Optional[Estimator], _option(
        AdvantageConfig, "estimator", ESTIMATOR, f"Computes the advantages from the rewards: {ESTIMATOR_LIST}",
        default=f"the advantage column if there is one, else {OBJECTIVE_ESTIMATOR}")] = None,
    scale: ScaleOpt = None,
    std: StdOpt = None,
    eps: EpsOpt = None,
    singleton: SingletonOpt = None,
    reward_weights: RewardWeightsOpt = None,
    multi_reward: MultiRewardOpt = None,
    on_null: OnNullOpt = None,
    reward_clip: RewardClipOpt = None,
    kl_in_reward: Annotated[Optional[float], _option(AdvantageConfig, "kl_in_reward", ESTIMATOR, "Its KL estimator is --kl.", metavar="BETA")] = None,
    whiten: WhitenOpt = False,
    whiten_std: WhitenStdOpt = None,
    whiten_eps_at: WhitenEpsAtOpt = None,
    whiten_eps: WhitenEpsOpt = None,
    loss: Annotated[Optional[Loss], _option(ObjectiveConfig, "loss", CLIP, _listing({n: l.help for n, l in LOSSES.items()}))] = None,
    epsilon: Annotated[Optional[float], _option(ObjectiveConfig, "epsilon", CLIP)] = None,
    epsilon_low: Annotated[Optional[float], _option(ObjectiveConfig, "epsilon_low", CLIP, default="--epsilon")] = None,
    epsilon_high: Annotated[Optional[float], _option(ObjectiveConfig, "epsilon_high", CLIP, default="--epsilon")] = None,
    dual_clip: Annotated[Optional[float], _option(ObjectiveConfig, "dual_clip", CLIP)] = None,
    delta: Annotated[Optional[float], _option(ObjectiveConfig, "delta", CLIP)] = None,
    tau_pos: Annotated[Optional[float], _option(ObjectiveConfig, "tau_pos", CLIP)] = None,
    tau_neg: Annotated[Optional[float], _option(ObjectiveConfig, "tau_neg", CLIP)] = None,
    ratio_level: Annotated[Optional[RatioLevel], _option(ObjectiveConfig, "ratio_level", CLIP)] = None,
    agg: Annotated[Optional[Aggregation], _option(ObjectiveConfig, "agg", CLIP, _listing({n: a.help for n, a in AGGREGATIONS.items()}))] = None,
    max_length: Annotated[Optional[int], _option(ObjectiveConfig, "max_length", CLIP)] = None,
    logratio_clamp: Annotated[Optional[float], _option(ObjectiveConfig, "logratio_clamp", CLIP)] = None,
    is_level: Annotated[Optional[str], _option(ObjectiveConfig, "is_level", ROLLOUT, "", None, "--is", metavar="LEVEL")] = None,
    is_cap: Annotated[Optional[float], _option(ObjectiveConfig, "is_cap", ROLLOUT, metavar="C")] = None,
    is_mask: Annotated[Optional[str], _option(ObjectiveConfig, "is_mask", ROLLOUT, metavar="LO,HI")] = None,
    reject: Annotated[Optional[str], _option(ObjectiveConfig, "reject", ROLLOUT, metavar="KL")] = None,
    reject_level: Annotated[Optional[RejectLevel], _option(ObjectiveConfig, "reject_level", ROLLOUT)] = None,
    reject_threshold: Annotated[Optional[str], _option(ObjectiveConfig, "reject_threshold", ROLLOUT, metavar="BOUNDS")] = None,
    beta: Annotated[Optional[float], _option(ObjectiveConfig, "beta", KL_PANEL)] = None,
    kl: Annotated[Optional[KL], _option(ObjectiveConfig, "kl", KL_PANEL, _listing({n: (f.__doc__ or "").strip() for n, f in KL_ESTIMATORS.items()}))] = None,
    output: OutputOpt = None,
    output_dir: OutputDirOpt = None,
    output_format: OutputFormatOpt = None,
    compression: CompressionOpt = None,
    threads: ThreadsOpt = None,
    engine: EngineOpt = EngineName.local,
    ray_address: RayAddressOpt = None,
    quiet: QuietOpt = False,
    summary_json: SummaryJsonOpt = None,
    progress: ProgressOpt = ProgressMode.auto,
    debug: DebugOpt = False,
) -> None:
    """Advantages come from an advantage column, else from the rewards (mean baseline per prompt; the whole file is one group without ids or --num-generations). The objective is maximised; the loss is its negative."""
    with reported_errors(ctx, debug):
        config = ObjectiveConfig(
            preset=_value(preset), loss=_value(loss), epsilon=epsilon, epsilon_low=epsilon_low, epsilon_high=epsilon_high, dual_clip=dual_clip,
            delta=delta, tau_pos=tau_pos, tau_neg=tau_neg, is_level=is_level, is_cap=is_cap,
            is_mask=value_range(is_mask, "is_mask"), reject=reject, reject_level=_value(reject_level), reject_threshold=reject_threshold,
            ratio_level=_value(ratio_level), agg=_value(agg), max_length=max_length, beta=beta, kl=_value(kl),
            logratio_clamp=logratio_clamp,
        )
        advantage_config = objective_estimator(_value(estimator), _value(preset), **_estimator_options(
            scale=scale, std=std, eps=eps, singleton=singleton, reward_weights=reward_weights, multi_reward=multi_reward,
            on_null=on_null, reward_clip=reward_clip, kl_in_reward=kl_in_reward, kl=kl if kl_in_reward is not None else None,
            whiten=whiten, whiten_std=whiten_std, whiten_eps_at=whiten_eps_at, whiten_eps=whiten_eps))
        with progress_reporter(progress.value, quiet) as progress:
            figures = objective_file(
                input, output, output_dir=output_dir, config=config, advantage_config=advantage_config,
                advantage_col=advantage_col, prompt_col=prompt_col, reward_col=_one(reward_col), baseline_col=baseline_col,
                num_generations=num_generations, logprobs_col=logprobs_col, old_logprobs_col=old_logprobs_col,
                ref_logprobs_col=ref_logprobs_col, rollout_logprobs_col=rollout_logprobs_col, mask_col=mask_col,
                input_format=_value(input_format), hive=hive,
                output_format=_value(output_format), compression=_value(compression), threads=threads, progress=progress, engine=engine.value, ray_address=ray_address,
                summary_json=summary_json,
            )
        _emit(figures, "objective", quiet, written=(output, output_dir, summary_json))


MISMATCH_EXAMPLES = """\
Examples:

  grpo mismatch sample_data/rollouts_vllm.parquet

  grpo mismatch sample_data/rollouts_vllm.parquet --is-cap 3 --is-mask 0.5,2 --json > mismatch.json

  grpo mismatch sample_data/rollouts_vllm.parquet -o mismatch_rows.parquet -q
"""


@registered("mismatch", MISMATCH_EXAMPLES)
def mismatch(
    ctx: typer.Context,
    input: InputArg,
    input_format: InputFormatOpt = None,
    hive: HiveOpt = False,
    prompt_col: Annotated[Optional[str], _column_option("prompt", "Prompt id column (names the worst rows).")] = None,
    old_logprobs_col: OldColOpt = None,
    rollout_logprobs_col: RolloutColOpt = None,
    mask_col: MaskColOpt = None,
    is_cap: Annotated[Optional[float], _option(MismatchConfig, "is_cap", ROLLOUT, metavar="C")] = None,
    is_mask: Annotated[Optional[str], _option(MismatchConfig, "is_mask", ROLLOUT, metavar="LO,HI")] = None,
    logratio_clamp: Annotated[Optional[float], _option(MismatchConfig, "logratio_clamp", ROLLOUT)] = None,
    worst: Annotated[Optional[int], _option(MismatchConfig, "worst", OUTPUT, metavar="N")] = None,
    output: OutputOpt = None,
    output_dir: OutputDirOpt = None,
    output_format: OutputFormatOpt = None,
    compression: CompressionOpt = None,
    threads: ThreadsOpt = None,
    engine: EngineOpt = EngineName.local,
    ray_address: RayAddressOpt = None,
    quiet: QuietOpt = False,
    json_out: JsonOpt = False,
    summary_json: SummaryJsonOpt = None,
    progress: ProgressOpt = ProgressMode.auto,
    debug: DebugOpt = False,
) -> None:
    """|old - rollout|, KL(rollout || old) as k1 and k3, perplexities, chi-square and effective sample size of the weights pi_old / pi_rollout, the share a cap or mask would touch, by token position and response length, and the worst rows. -o writes the per-row figures."""
    with reported_errors(ctx, debug):
        _check_json(json_out, output, summary_json)
        config = MismatchConfig(is_cap=is_cap, is_mask=value_range(is_mask, "is_mask"), logratio_clamp=logratio_clamp, worst=worst)
        with progress_reporter(progress.value, quiet or json_out) as progress:
            figures = mismatch_file(
                input, output, output_dir=output_dir, config=config, prompt_col=prompt_col, old_logprobs_col=old_logprobs_col,
                rollout_logprobs_col=rollout_logprobs_col, mask_col=mask_col, input_format=_value(input_format), hive=hive,
                output_format=_value(output_format), compression=_value(compression), threads=threads, progress=progress, engine=engine.value, ray_address=ray_address,
                summary_json=summary_json,
            )
        _emit(figures, "mismatch", quiet, json_out, written=(output, output_dir, summary_json))


INSPECT_EXAMPLES = """\
Examples:

  grpo inspect sample_data/rollouts.parquet

  grpo inspect sample_data/rollouts.jsonl --json > inspect.json
"""


@registered("inspect", INSPECT_EXAMPLES)
def inspect(
    ctx: typer.Context,
    input: InputArg,
    input_format: InputFormatOpt = None,
    hive: HiveOpt = False,
    prompt_col: PromptColOpt = None,
    reward_col: Annotated[Optional[str], _column_option("reward", "Reward column (or struct field column.field).")] = None,
    num_generations: NumGenOpt = None,
    mask_col: MaskColOpt = None,
    logprobs_col: NewColOpt = None,
    old_logprobs_col: OldColOpt = None,
    ref_logprobs_col: RefColOpt = None,
    rollout_logprobs_col: RolloutColOpt = None,
    advantage_col: Annotated[Optional[str], _column_option("advantage", "Advantage column.")] = None,
    truncated_col: Annotated[Optional[str], _column_option("truncated", "Truncation flag: booleans or 0/1.")] = None,
    threads: ThreadsOpt = None,
    engine: EngineOpt = EngineName.local,
    ray_address: RayAddressOpt = None,
    quiet: QuietOpt = False,
    json_out: JsonOpt = False,
    summary_json: SummaryJsonOpt = None,
    progress: ProgressOpt = ProgressMode.auto,
    debug: DebugOpt = False,
) -> None:
    """The advantages are the default estimator's (grpo, population std, eps 0)."""
    with reported_errors(ctx, debug):
        _check_json(json_out, None, summary_json)
        with progress_reporter(progress.value, quiet or json_out) as progress:
            figures = inspect_file(
                input, prompt_col=prompt_col, reward_col=reward_col, num_generations=num_generations, mask_col=mask_col,
                logprobs_col=logprobs_col, old_logprobs_col=old_logprobs_col, ref_logprobs_col=ref_logprobs_col,
                rollout_logprobs_col=rollout_logprobs_col, advantage_col=advantage_col, truncated_col=truncated_col,
                input_format=_value(input_format), hive=hive, threads=threads, progress=progress, engine=engine.value, ray_address=ray_address,
                summary_json=summary_json,
            )
        _emit(figures, "inspect", quiet, json_out, written=(summary_json,))


COMPARE_EXAMPLES = """\
Examples:

  grpo compare sample_data/rollouts.parquet --estimators grpo,rloo,mean

  grpo compare sample_data/rollouts.parquet --estimators grpo:std=sample,eps=1e-6,verl,trl --json > compare.json

  grpo compare sample_data/rollouts.parquet --estimators grpo,rloo -o compared.parquet -q
"""


@registered("compare", COMPARE_EXAMPLES)
def compare(
    ctx: typer.Context,
    input: InputArg,
    estimators: Annotated[str, typer.Option(help="Two or more, comma-separated: an estimator or a preset's name, each with options as "
                                                 "NAME:key=value,key=value (e.g. grpo:std=sample,eps=1e-6,rloo,verl).",
                                            rich_help_panel=ESTIMATOR, show_default=False)],
    input_format: InputFormatOpt = None,
    hive: HiveOpt = False,
    prompt_col: PromptColOpt = None,
    reward_col: RewardColOpt = None,
    num_generations: NumGenOpt = None,
    baseline_col: BaselineColOpt = None,
    mask_col: MaskColOpt = None,
    top: Annotated[int, typer.Option(min=0, help="List this many of the groups where the estimators differ most.", rich_help_panel=OUTPUT)] = 5,
    output: OutputOpt = None,
    output_dir: OutputDirOpt = None,
    output_format: OutputFormatOpt = None,
    compression: CompressionOpt = None,
    threads: ThreadsOpt = None,
    engine: EngineOpt = EngineName.local,
    ray_address: RayAddressOpt = None,
    quiet: QuietOpt = False,
    json_out: JsonOpt = False,
    summary_json: SummaryJsonOpt = None,
    progress: ProgressOpt = ProgressMode.auto,
    debug: DebugOpt = False,
) -> None:
    """-o writes one advantage_<estimator> column per estimator."""
    with reported_errors(ctx, debug):
        _check_json(json_out, output, summary_json)
        with progress_reporter(progress.value, quiet or json_out) as progress:
            figures = compare_file(
                input, output, output_dir=output_dir, estimators=estimators, prompt_col=prompt_col, reward_col=_one(reward_col),
                num_generations=num_generations, baseline_col=baseline_col, mask_col=mask_col, top=top,
                input_format=_value(input_format), hive=hive, output_format=_value(output_format), compression=_value(compression), threads=threads, progress=progress, engine=engine.value, ray_address=ray_address,
                summary_json=summary_json,
            )
        _emit(figures, "compare", quiet, json_out, written=(output, output_dir, summary_json))


FILTER_EXAMPLES = """\
Examples:

  grpo filter sample_data/rollouts.parquet --drop-zero-variance -o filtered.parquet

  grpo filter sample_data/rollouts.parquet --keep-if '0<mean<1' --overlong-buffer 16 --max-length 64 -o filtered.parquet
"""
RULES = "Rules"


@registered("filter", FILTER_EXAMPLES)
def filter_rows(
    ctx: typer.Context,
    input: InputArg,
    input_format: InputFormatOpt = None,
    hive: HiveOpt = False,
    prompt_col: PromptColOpt = None,
    reward_col: Annotated[Optional[str], _column_option("reward", "Reward column (or struct field column.field).")] = None,
    num_generations: NumGenOpt = None,
    truncated_col: Annotated[Optional[str], _column_option("truncated", "Truncation flag: booleans or 0/1, read by --truncated.")] = None,
    mask_col: MaskColOpt = None,
    logprobs_col: NewColOpt = None,
    drop_zero_variance: Annotated[bool, typer.Option("--drop-zero-variance", help=_config_help(FilterConfig, "drop_zero_variance"), rich_help_panel=RULES)] = False,
    keep_if: Annotated[Optional[str], _option(FilterConfig, "keep_if", RULES, metavar="RULE")] = None,
    truncated: Annotated[Optional[Truncated], _option(FilterConfig, "truncated", RULES)] = None,
    overlong_buffer: Annotated[Optional[int], _option(FilterConfig, "overlong_buffer", RULES, metavar="B")] = None,
    max_length: Annotated[Optional[int], _option(FilterConfig, "max_length", RULES)] = None,
    overlong_factor: Annotated[Optional[float], _option(FilterConfig, "overlong_factor", RULES)] = None,
    output: OutputOpt = None,
    output_dir: OutputDirOpt = None,
    output_format: OutputFormatOpt = None,
    compression: CompressionOpt = None,
    threads: ThreadsOpt = None,
    engine: EngineOpt = EngineName.local,
    ray_address: RayAddressOpt = None,
    quiet: QuietOpt = False,
    summary_json: SummaryJsonOpt = None,
    progress: ProgressOpt = ProgressMode.auto,
    debug: DebugOpt = False,
) -> None:
    """Without -o (or --output-dir), only reports what would be kept and why the rest would not."""
    with reported_errors(ctx, debug):
        config = FilterConfig(drop_zero_variance=drop_zero_variance or None, keep_if=keep_if, truncated=_value(truncated),
                              overlong_buffer=overlong_buffer, max_length=max_length, overlong_factor=overlong_factor)
        with progress_reporter(progress.value, quiet) as progress:
            figures = filter_file(
                input, output, output_dir=output_dir, config=config, prompt_col=prompt_col, reward_col=reward_col,
                num_generations=num_generations, truncated_col=truncated_col, mask_col=mask_col, logprobs_col=logprobs_col,
                input_format=_value(input_format), hive=hive, output_format=_value(output_format), compression=_value(compression), threads=threads, progress=progress, engine=engine.value, ray_address=ray_address,
                summary_json=summary_json,
            )
        _emit(figures, "filter", quiet, written=(output, output_dir, summary_json))


PRESETS_EXAMPLES = """\
Examples:

  grpo presets

  COLUMNS=120 grpo presets > presets.txt
"""


@registered("presets", PRESETS_EXAMPLES)
def presets() -> None:
    """Explicit options override a preset; options a preset does not set keep their defaults."""
    from rich.console import Console

    from .report import render_presets
    render_presets(PRESETS, Console())
