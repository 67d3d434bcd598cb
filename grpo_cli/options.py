"""Every option of `grpo`, declared once: its flag, type, range or choices, default, help and
panel, and how its value reaches the library. A command lists the declarations it takes (the
groups below, then its own); its click parameters, its help and the keywords it passes to its
file API (:mod:`grpo_cli.files`) all come from them. Help and defaults come from the library:
config field metadata, registries, column roles.

An option that takes one value refuses to be given twice (:class:`OneValueEach`).

>>> [o.name for o in GROUPING]
['prompt_col', 'num_generations', 'by', 'by_file']
"""

from __future__ import annotations

import numpy  # noqa: F401  (first, not from within config's import: a command's start-up then faults in fewer pages, tried.csv)

import copy
import inspect
from dataclasses import Field, dataclass, fields, replace
from functools import partial
from enum import Enum
from typing import Annotated, Any, Callable, Optional, cast

import typer
from typer.core import TyperCommand, TyperOption

from .config import CLIP, COLUMNS, ESTIMATOR, INPUT, KL_PANEL, OUTPUT, ROLLOUT, AdvantageConfig, field_type
from .engines import ENGINES
from .io import CODECS, FORMATS
from .parallel import IN_FLIGHT_PER_CORE
from .schema import ROLES

__all__ = ["CLIP", "COLUMNS", "ESTIMATOR", "INPUT", "KL_PANEL", "OUTPUT", "ROLLOUT"]  # the panels, where the commands' own options go too


def choices(name: str, values) -> type[Enum]:
    """A str Enum of the library's valid names, so `--help` and validation list them."""
    return cast("type[Enum]", Enum(name, {v: v for v in values}, type=str))


def escaped(text: str) -> str:
    """``text`` shown as it is in rich's help: every ``[`` escaped from markup (not
    ``rich.markup.escape``: importing it would load rich into every run)."""
    return text.replace("[", "\\[")


def _default(value) -> str:
    """``[default: value]``, escaped from rich markup."""
    return escaped(f"[default: {'off' if value is None or value is False else value}]")


def config_help(cls, name: str, extra: str = "", shown: str | None = None) -> str:
    """A config field's help, ``extra``, and its default: ``shown``, else as the field says it is shown, else its value."""
    meta = next(f for f in fields(cls) if f.name == name).metadata
    shown = next((s for s in (shown, meta["shown"]) if s is not None), meta["default"])
    return f"{meta['help']}{' ' + extra if extra else ''} {_default(shown)}"


def _column_help(role: str, text: str) -> str:
    """A column option's help and the names it looks for by default."""
    candidates = ROLES[role].candidates
    if len(candidates) > 1:
        found = f"whichever of {', '.join(candidates)} is present; two present is an error"
    else:
        found = f"{candidates[0]}, if present" if candidates else "none"
    return f"{text} {_default(found)}"


def plain(value: Any) -> Any:
    """A choice's name (``None``: not given); other values as they are."""
    return value.value if isinstance(value, Enum) else value


def _given_flag(value: bool) -> bool | None:
    """A config flag: ``True`` when given, else ``None`` (not given: the default or the preset's)."""
    return value or None


def _columns(values: tuple[str, ...] | list[str] | None) -> str | list[str] | None:
    """A repeatable column option as the library takes it: one name, a list of several, or ``None``."""
    return values[0] if values and len(values) == 1 else (list(values) if values else None)


@dataclass(frozen=True)
class Option:
    """One option: ``name`` (the library's keyword), the CLI value's ``type`` (``Optional``
    added when the default is ``None``), its click/typer declaration ``info`` (flags, help,
    panel, range), its ``default``, ``convert``, the CLI value as the library takes it
    (errors it raises name the library keyword, shown as the flag), and the ``group`` of
    options commands take together (a config field's, see :func:`grpo_cli.config.option`)."""

    name: str
    type: Any
    info: Any
    default: Any = None
    convert: Callable[[Any], Any] = plain
    group: str = ""

    @property
    def parameter(self) -> inspect.Parameter:
        """The option as typer reads it from a signature."""
        cli_type = Optional[self.type] if self.default is None else self.type
        return inspect.Parameter(self.name, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[cli_type, self.info], default=self.default)

    def told(self, help: str) -> Option:
        """The same option with another ``help`` (what it does in one command)."""
        info = copy.copy(self.info)
        info.help = help
        return replace(self, info=info)


def option(name: str, type: Any, help: str, panel: str, *flags: str, default: Any = None, convert: Callable = plain, **typer_options) -> Option:
    """An option whose help is ``help`` (with its default in it, if any)."""
    typer_options.setdefault("show_default", False)
    return Option(name, type, typer.Option(*flags, help=help, rich_help_panel=panel, **typer_options), default, convert)


def column_option(role: str, text: str, name: str | None = None, *, repeatable: bool = False) -> Option:
    """An option naming the column of ``role`` (``name``: ``<role>_col``), in the Columns panel."""
    if repeatable:
        return Option(name or f"{role}_col", list[str], typer.Option(help=_column_help(role, text), rich_help_panel=COLUMNS), None, _columns)
    return Option(name or f"{role}_col", str, typer.Option(help=_column_help(role, text), rich_help_panel=COLUMNS))


def flag(name: str, help: str, panel: str, *flags: str, convert: Callable = plain, group: str = "") -> Option:
    """An on/off option, off by default (no type shown in the help: ``metavar`` empty)."""
    return Option(
        name,
        bool,
        typer.Option(*(flags or (f"--{name.replace('_', '-')}",)), help=help, show_default=False, rich_help_panel=panel, metavar=""),
        False,
        convert,
        group,
    )


def _field_option(cls, f: Field) -> Option:
    """The option of field ``f`` of config class ``cls``, all from the field's declaration."""
    meta, name, type = f.metadata, f.name, field_type(f)
    panel, help = meta["panel"] or cls.PANEL, config_help(cls, name)
    if type is bool:
        return flag(name, help, panel, *meta["flags"], convert=_given_flag, group=meta["group"])
    kind = choices("".join(part.title() for part in name.split("_")), meta["choices"]) if meta["choices"] is not None else type
    convert = partial(_parsed, meta["parse"], name) if meta["parse"] is not None else plain
    info = typer.Option(*meta["flags"], help=help, rich_help_panel=panel, show_default=False, metavar=meta["metavar"])
    return Option(name, kind, info, None, convert, meta["group"])


def _parsed(parse: Callable[[str, str], Any], name: str, text: str | None) -> Any:
    return None if text is None else parse(text, name)


def config_options(cls) -> dict[str, Option]:
    """The options of config class ``cls``, by name, in the order of its fields: each field is
    its option's one declaration (:func:`grpo_cli.config.option`)."""
    return {f.name: _field_option(cls, f) for f in fields(cls)}


def grouped(options: dict[str, Option], *groups: str) -> tuple[Option, ...]:
    """The ``options`` of ``groups``, in their order."""
    return tuple(o for o in options.values() if o.group in groups)


Format = choices("Format", FORMATS)
Codec = choices("Codec", CODECS)
EngineName = choices("EngineName", ENGINES)
PROGRESS_EVERY = 5.0  # seconds between progress lines when stderr is not a terminal
ProgressMode = choices("ProgressMode", ("auto", "always", "never"))

INPUT_ARGUMENT = inspect.Parameter(
    "input",
    inspect.Parameter.KEYWORD_ONLY,
    annotation=Annotated[
        list[str],
        typer.Argument(
            help="Rollout files (.parquet, .jsonl, .ndjson), folders of them (with their sub-folders), or quoted globs (** for any depth), "
            "local or URIs (s3://, gs://, hdfs://), read as one dataset; or - for stdin.",
            show_default=False,
        ),
    ],
)

PROMPT_COL = Option(
    "prompt_col",
    list[str],
    typer.Option(
        help=_column_help(
            "prompt",
            "Prompt id column; repeat it for a composite key (--prompt-col step --prompt-col input: a group is the rows equal on both); "
            "none: read no id column (group by --num-generations).",
        ),
        rich_help_panel=COLUMNS,
    ),
    None,
    _columns,
)
NUM_GENERATIONS = option(
    "num_generations",
    int,
    "Group size. Without an id column, consecutive blocks of N rows form the groups; with one, every group must have N rows.",
    COLUMNS,
    min=1,
)
BY = column_option(
    "batch",
    "Batch column: each value of it (a step) is a batch, as the trainer saw it: the batch-wide statistics (--scale batch, whitening, "
    "flash-reinforce's and GPG's batch figures) and the summary are per value; a group spanning two values is an error. "
    "none: the whole input is one batch.",
    "by",
)
BY_FILE = flag("by_file", "Each input file is a batch (as --by COL, per file).", COLUMNS)
REWARD_COL = column_option("reward", "Reward column (a struct field as rewards.accuracy); repeat it for several reward functions.", repeatable=True)
BASELINE_COL = column_option("baseline", "Baseline reward per row (the greedy response's reward), read by --estimator remax.")
MASK_COL = column_option("mask", "Token mask: list of 0/1 or bool; masked tokens count nowhere (none: count every token).")
REF_COL = column_option("ref", "Reference log-probs (a list per row; optional; none: do without).", "ref_logprobs_col")
ROLLOUT_COL = column_option(
    "rollout", "The rollout sampler's log-probs (vLLM, SGLang; a list per row; optional; none: do without).", "rollout_logprobs_col"
)
OLD_COL = column_option("old", "Old-policy log-probs (a list per row).", "old_logprobs_col")
ENTROPY_COL = column_option("entropy", "Token entropies (a list per row), read by --top-entropy-quantile below 1 alone.")
NEW_COL = column_option("new", "New-policy log-probs (a list per row).", "logprobs_col")

ADVANTAGE = config_options(AdvantageConfig)  # the advantages' options: `grpo advantages`, `objective`, and the reward options of more
PRESET = ADVANTAGE["preset"]
INPUT_FORMAT = option("input_format", Format, "Input format when the name does not tell (default: suffix, then file magic).", INPUT)
HIVE = flag("hive", "Read the key=value folders below a folder or glob input (step=1/part-0.parquet) as columns.", INPUT)

OUTPUT_OPTION = option(
    "output",
    str,
    "Write the annotated rows here, as one file (- for stdout). Without it (or --output-dir), only the summary is printed.",
    OUTPUT,
    "--output",
    "-o",
)
OUTPUT_DIR = option(
    "output_dir",
    str,
    "Write one annotated file per input file into this folder (made if missing), at the input's path below its folder or glob.",
    OUTPUT,
)
OUTPUT_FORMAT = option("output_format", Format, "Output format (default: suffix of -o; for stdout, the input's format).", OUTPUT)
COMPRESSION = option("compression", Codec, "Parquet compression (default: the input's codec; snappy for JSON Lines input).", OUTPUT)
THREADS = option(
    "threads",
    int,
    f"Threads for the run: the math, the encoding and Arrow's decoding (default: one per core; at most {IN_FLIGHT_PER_CORE} per core run at once, "
    "so memory does not grow with it). Results do not depend on it.",
    OUTPUT,
    min=1,
)
ENGINE = Option(
    "engine",
    EngineName,
    typer.Option(
        help=escaped("Where the work runs: here, or on a Ray cluster (pip install 'grpo-cli[ray]'). Results are identical."), rich_help_panel=OUTPUT
    ),
    EngineName("local"),
)
RAY_ADDRESS = option(
    "ray_address", str, "The Ray cluster to use with --engine ray (default: RAY_ADDRESS if set, else a local Ray started for the run).", OUTPUT
)
QUIET = flag("quiet", "Print no summary (and no progress unless --progress always).", OUTPUT, "--quiet", "-q")
JSON = flag("json_out", "Print the figures as JSON on stdout instead of the tables.", OUTPUT, "--json")
SUMMARY_JSON = option(
    "summary_json", str, "Also write the summary figures as JSON to this path (- for stdout, when the rows do not go there).", OUTPUT
)
PROGRESS = Option(
    "progress",
    ProgressMode,
    typer.Option(
        help=(
            f"auto: a bar on a terminal, else a line every {PROGRESS_EVERY:g} s on stderr, none with --quiet; always: also with --quiet; never: none."
        ),
        rich_help_panel=OUTPUT,
    ),
    ProgressMode("auto"),
)
DEBUG = flag("debug", "Show tracebacks instead of one-line errors.", OUTPUT)

# The groups that several commands take, each with the same meaning everywhere.
GROUPING = (PROMPT_COL, NUM_GENERATIONS, BY, BY_FILE)
REWARD_OPTIONS = grouped(ADVANTAGE, "rewards")  # how the reward columns make the reward
REWARDS = (REWARD_COL, *REWARD_OPTIONS)
INPUTS = (INPUT_FORMAT, HIVE)
WRITES = (OUTPUT_OPTION, OUTPUT_DIR, OUTPUT_FORMAT, COMPRESSION)
RUN = (THREADS, ENGINE, RAY_ADDRESS, QUIET, SUMMARY_JSON, PROGRESS, DEBUG)
RUN_AND_JSON = (THREADS, ENGINE, RAY_ADDRESS, QUIET, JSON, SUMMARY_JSON, PROGRESS, DEBUG)  # the figures also as JSON on stdout
CLI_ONLY = ("quiet", "json_out", "progress", "debug")  # how the CLI shows a run; no library keyword


def values(options: tuple[Option, ...], given: dict[str, Any]) -> dict[str, Any]:
    """The CLI's values of ``options`` (those ``given``) as the library takes them."""
    return {o.name: o.convert(given[o.name]) for o in options if o.name in given}


def into(**configs: type) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A command's keywords where its plan takes the fields of each config class as one
    keyword (``config=FilterConfig``), made of the options given, and its other options as
    they are."""

    def keywords(given: dict[str, Any]) -> dict[str, Any]:
        rest = dict(given)
        made = {keyword: cls(**{f.name: rest.pop(f.name) for f in fields(cls) if f.name in rest}) for keyword, cls in configs.items()}
        return {**made, **rest}

    return keywords


class OneValueEach(TyperCommand):
    """A command whose options that take one value refuse to be given twice (click's own
    rule is that the last one wins), with one line and exit 2."""

    def make_parser(self, ctx):
        parser = super().make_parser(ctx)
        parse = parser.parse_args

        def parse_once(args):
            opts, rest, order = parse(args)
            seen: set = set()
            for param in order:
                if isinstance(param, TyperOption) and not param.multiple and not param.count and param in seen:
                    typer.echo(f"Error: {max(param.opts, key=len)} given twice; it takes one value", err=True)
                    ctx.exit(2)
                seen.add(param)
            return opts, rest, order

        parser.parse_args = parse_once  # type: ignore[method-assign]
        return parser
