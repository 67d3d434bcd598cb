"""The `grpo` command: each command parses options, calls one library function, renders.

Data goes to stdout (only with ``-o -``); tables and errors go to stderr.
Exit codes: 0 success, 1 bad input data, 2 bad usage (options), 141-style quiet exit on a
closed output pipe.
"""

from __future__ import annotations

import contextlib
import os
import sys
from enum import Enum
from typing import Annotated, Iterator, Optional

import typer
from rich.console import Console

from .config import AdvantageConfig
from .engines.local import advantages_file
from .errors import GrpoError
from .report import render_advantages, write_json

app = typer.Typer(
    help="Group-relative advantages (GRPO, RLOO, Dr.GRPO) and clipped policy objectives on rollout files.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
stderr = Console(stderr=True)


class Estimator(str, Enum):
    grpo = "grpo"
    rloo = "rloo"
    mean = "mean"
    drgrpo = "drgrpo"
    unbiased = "unbiased"


class Scale(str, Enum):
    group = "group"
    batch = "batch"
    none = "none"


class Std(str, Enum):
    population = "population"
    sample = "sample"


class Format(str, Enum):
    parquet = "parquet"
    jsonl = "jsonl"


# Options shared by every command, declared once.
InputArg = Annotated[str, typer.Argument(help="Rollout file (.parquet, .jsonl, .ndjson), or - for stdin.")]
OutputOpt = Annotated[Optional[str], typer.Option("--output", "-o", help="Write the annotated rows here (- for stdout). Without it, only the summary is printed.")]
InputFormatOpt = Annotated[Optional[Format], typer.Option(help="Input format when the name does not tell (default: suffix, then file magic).")]
OutputFormatOpt = Annotated[Optional[Format], typer.Option(help="Output format (default: suffix of -o; for stdout, the input's format).")]
PromptColOpt = Annotated[Optional[str], typer.Option(help="Prompt id column (default: first of prompt_id, uid, index).")]
RewardColOpt = Annotated[Optional[str], typer.Option(help="Reward column (default: first of reward, score).")]
NumGenOpt = Annotated[Optional[int], typer.Option(min=1, help="Group size. Without an id column, consecutive blocks of N rows form the groups; with one, every group must have N rows.")]
EstimatorOpt = Annotated[Estimator, typer.Option(help="grpo: r - group mean; rloo: r - mean of the others; mean (= drgrpo, unbiased): r - group mean, never scaled.")]
ScaleOpt = Annotated[Optional[Scale], typer.Option(help="Divide by the group's reward std, the std of all rewards, or nothing. Default: group (none for mean).")]
StdOpt = Annotated[Std, typer.Option(help="population = ddof 0 (seed 000); sample = ddof 1 (Twinkle, verl, TRL, OpenRLHF).")]
EpsOpt = Annotated[float, typer.Option(min=0.0, help="Added to the std before dividing.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Print no summary.")]
SummaryJsonOpt = Annotated[Optional[str], typer.Option(help="Also write the summary figures as JSON to this path.")]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks instead of one-line errors.")]


@app.callback()
def _commands() -> None:
    """Group-relative advantages (GRPO, RLOO, Dr.GRPO) and clipped policy objectives on rollout files."""


@contextlib.contextmanager
def reported_errors(debug: bool) -> Iterator[None]:
    """Turn library errors into one ``Error: ...`` line on stderr and the error's exit code."""
    try:
        yield
    except GrpoError as exc:
        if debug:
            raise
        typer.echo(f"Error: {exc}", err=True)
        raise typer.Exit(exc.exit_code)
    except BrokenPipeError:
        # The reader closed the pipe (e.g. `| head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise typer.Exit(141)


def _value(option: Optional[Enum]) -> Optional[str]:
    return option.value if option is not None else None


def _emit(figures: dict, render, quiet: bool, summary_json: Optional[str]) -> None:
    if summary_json:
        write_json(figures, summary_json)
    if not quiet:
        render(figures, stderr)


@app.command()
def advantages(
    input: InputArg,
    output: OutputOpt = None,
    estimator: EstimatorOpt = Estimator.grpo,
    scale: ScaleOpt = None,
    std: StdOpt = Std.population,
    eps: EpsOpt = 0.0,
    prompt_col: PromptColOpt = None,
    reward_col: RewardColOpt = None,
    num_generations: NumGenOpt = None,
    round: Annotated[Optional[int], typer.Option(min=0, help="Round the written advantages to N decimals.")] = None,
    input_format: InputFormatOpt = None,
    output_format: OutputFormatOpt = None,
    quiet: QuietOpt = False,
    summary_json: SummaryJsonOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Compute one advantage per row from the rewards of its group.

    A group of one row, or of equal rewards, gets advantage 0 (never NaN).
    """
    with reported_errors(debug):
        config = AdvantageConfig(estimator=estimator.value, scale=_value(scale), std=std.value, eps=eps)
        figures = advantages_file(
            input, output, config=config, prompt_col=prompt_col, reward_col=reward_col,
            num_generations=num_generations, round_digits=round,
            input_format=_value(input_format), output_format=_value(output_format),
        )
        _emit(figures, render_advantages, quiet, summary_json)


def main() -> None:
    app(prog_name="grpo")
