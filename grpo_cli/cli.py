"""The `grpo` command: each command parses options, calls one library function, renders.

Data goes to stdout (only with ``-o -``); tables and errors go to stderr.
Exit codes: 0 success, 1 bad input data, 2 bad usage (options), 141-style quiet exit on a
closed output pipe.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from enum import Enum
from typing import Annotated, Callable, Iterator, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from .config import AGGREGATIONS, ESTIMATOR_ALIASES, KL_ESTIMATORS, RATIO_LEVELS, SCALES, STD_KINDS, AdvantageConfig, ObjectiveConfig
from .engines.local import advantages_file, objective_file
from .engines.memory import keep_freed_memory
from .errors import GrpoError, Interrupted
from .io import FORMATS
from .report import render_advantages, render_objective, write_json

app = typer.Typer(
    help="Group-relative advantages (GRPO, RLOO, Dr.GRPO) and clipped policy objectives on rollout files.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
stderr = Console(stderr=True)


def _choices(name: str, values) -> type[Enum]:
    """A str Enum of the library's valid names, so `--help` and validation list them."""
    return Enum(name, {v: v for v in values}, type=str)


Estimator = _choices("Estimator", ESTIMATOR_ALIASES)
Scale = _choices("Scale", SCALES)
Std = _choices("Std", STD_KINDS)
Aggregation = _choices("Aggregation", AGGREGATIONS)
KL = _choices("KL", KL_ESTIMATORS)
RatioLevel = _choices("RatioLevel", RATIO_LEVELS)
Format = _choices("Format", FORMATS)


# Options shared by every command, declared once.
InputArg = Annotated[list[str], typer.Argument(help="Rollout files (.parquet, .jsonl, .ndjson), folders of them, or quoted globs, read as one dataset; or - for stdin.")]
OutputOpt = Annotated[Optional[str], typer.Option("--output", "-o", help="Write the annotated rows here, as one file (- for stdout). Without it (or --output-dir), only the summary is printed.")]
OutputDirOpt = Annotated[Optional[str], typer.Option(help="Write one annotated file per input file into this existing folder, with the input's name.")]
ThreadsOpt = Annotated[Optional[int], typer.Option(min=1, help="Worker threads for the token math (default: one per core). Results do not depend on it.")]
InputFormatOpt = Annotated[Optional[Format], typer.Option(help="Input format when the name does not tell (default: suffix, then file magic).")]
OutputFormatOpt = Annotated[Optional[Format], typer.Option(help="Output format (default: suffix of -o; for stdout, the input's format).")]
PromptColOpt = Annotated[Optional[str], typer.Option(help="Prompt id column (default: whichever of prompt_id, uid, index is present; two present is an error).")]
RewardColOpt = Annotated[Optional[str], typer.Option(help="Reward column (default: whichever of reward, score is present).")]
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


def _interrupt(signum: int, frame) -> None:
    raise Interrupted(signal.Signals(signum).name, 128 + signum)


@contextlib.contextmanager
def reported_errors(debug: bool) -> Iterator[None]:
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
        typer.echo(f"Error: {exc}", err=True)
        raise typer.Exit(exc.exit_code)
    except BrokenPipeError:
        # The reader closed the pipe (e.g. `| head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
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


@contextlib.contextmanager
def progress_bar(show: bool) -> Iterator[Optional[Callable[[int, int, str], None]]]:
    """A rich progress bar of rows (and row groups or files) on stderr, shown only when
    stderr is a terminal."""
    if not (show and stderr.is_terminal):
        yield None
        return
    columns = (
        TextColumn("rows"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[pieces]}"),
        TimeElapsedColumn(), TimeRemainingColumn(),
    )
    with Progress(*columns, console=stderr, transient=True) as bar:
        task = bar.add_task("rows", total=None, pieces="")
        yield lambda done, total, pieces: bar.update(task, completed=done, total=total, pieces=pieces)


def _emit(figures: dict, render, quiet: bool, summary_json: Optional[str]) -> None:
    if summary_json:
        write_json(figures, summary_json)
    if not quiet:
        render(figures, stderr)


@app.command()
def advantages(
    input: InputArg,
    output: OutputOpt = None,
    output_dir: OutputDirOpt = None,
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
    threads: ThreadsOpt = None,
    quiet: QuietOpt = False,
    summary_json: SummaryJsonOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Compute one advantage per row from the rewards of its group.

    A group of one row, or of equal rewards, gets advantage 0 (never NaN).
    """
    with reported_errors(debug):
        config = AdvantageConfig(estimator=estimator.value, scale=_value(scale), std=std.value, eps=eps)
        with progress_bar(not quiet) as progress:
            figures = advantages_file(
                input, output, output_dir=output_dir, config=config, prompt_col=prompt_col, reward_col=reward_col,
                num_generations=num_generations, round_digits=round,
                input_format=_value(input_format), output_format=_value(output_format),
                threads=threads, progress=progress,
            )
        _emit(figures, render_advantages, quiet, summary_json)


@app.command()
def objective(
    input: InputArg,
    output: OutputOpt = None,
    output_dir: OutputDirOpt = None,
    epsilon: Annotated[float, typer.Option(help="Clip range: clip(rho, 1 - eps, 1 + eps).")] = 0.2,
    epsilon_low: Annotated[Optional[float], typer.Option(help="Override the low side (default: --epsilon).")] = None,
    epsilon_high: Annotated[Optional[float], typer.Option(help="Override the high side, DAPO clip-higher (default: --epsilon).")] = None,
    dual_clip: Annotated[Optional[float], typer.Option(help="C > 1: for A < 0 the token term is max(surrogate, C*A).")] = None,
    ratio_level: Annotated[RatioLevel, typer.Option(help="token (PPO) or sequence (GSPO: exp of the row's mean log-ratio).")] = RatioLevel.token,
    agg: Annotated[Aggregation, typer.Option(help="seq-mean-token-sum (seed 002, Dr.GRPO), seq-mean-token-mean (GRPO), token-mean (DAPO, verl), token-sum, seq-mean-token-sum-norm (/ rows*max_length).")] = Aggregation("seq-mean-token-sum"),
    max_length: Annotated[Optional[int], typer.Option(help="The constant of seq-mean-token-sum-norm.")] = None,
    beta: Annotated[float, typer.Option(help="KL penalty weight against reference log-probs: L - beta*KL.")] = 0.0,
    kl: Annotated[KL, typer.Option(help="KL estimator with d = new - ref: k1 = d, k2 = d^2/2, k3 = exp(-d)+d-1, abs = |d|.")] = KL.k3,
    logratio_clamp: Annotated[float, typer.Option(help="Clamp new - old to [-c, c] before exp (counted in the summary).")] = 20.0,
    logprobs_col: Annotated[Optional[str], typer.Option(help="New-policy log-probs (default: logprobs, log_probs, new_logprobs).")] = None,
    old_logprobs_col: Annotated[Optional[str], typer.Option(help="Old-policy log-probs (default: old_logprobs, old_log_probs).")] = None,
    ref_logprobs_col: Annotated[Optional[str], typer.Option(help="Reference log-probs (default: ref_logprobs, ref_log_probs if present).")] = None,
    mask_col: Annotated[Optional[str], typer.Option(help="Token mask: list of 0/1 or bool; masked tokens count nowhere.")] = None,
    advantage_col: Annotated[Optional[str], typer.Option(help="Use this advantage column (default: `advantage` if present).")] = None,
    estimator: Annotated[Optional[Estimator], typer.Option(help="Compute advantages instead (as grpo advantages). Default without an advantage column: mean.")] = None,
    scale: ScaleOpt = None,
    std: StdOpt = Std.population,
    eps: EpsOpt = 0.0,
    prompt_col: PromptColOpt = None,
    reward_col: RewardColOpt = None,
    num_generations: NumGenOpt = None,
    input_format: InputFormatOpt = None,
    output_format: OutputFormatOpt = None,
    threads: ThreadsOpt = None,
    quiet: QuietOpt = False,
    summary_json: SummaryJsonOpt = None,
    debug: DebugOpt = False,
) -> None:
    """The PPO-style clipped objective from new/old per-token log-probs.

    Advantages come from an advantage column, else from the rewards (mean baseline per
    prompt; the whole file is one group without ids or --num-generations). The objective is
    maximised; the loss is its negative.
    """
    with reported_errors(debug):
        config = ObjectiveConfig(
            epsilon=epsilon, epsilon_low=epsilon_low, epsilon_high=epsilon_high, dual_clip=dual_clip,
            ratio_level=ratio_level.value, agg=agg.value, max_length=max_length, beta=beta, kl=kl.value,
            logratio_clamp=logratio_clamp,
        )
        advantage_config = None
        if estimator is not None or scale is not None:
            name = estimator.value if estimator is not None else "grpo"
            advantage_config = AdvantageConfig(estimator=name, scale=_value(scale), std=std.value, eps=eps)
        with progress_bar(not quiet) as progress:
            figures = objective_file(
                input, output, output_dir=output_dir, config=config, advantage_config=advantage_config,
                advantage_col=advantage_col, prompt_col=prompt_col, reward_col=reward_col,
                num_generations=num_generations, logprobs_col=logprobs_col, old_logprobs_col=old_logprobs_col,
                ref_logprobs_col=ref_logprobs_col, mask_col=mask_col, input_format=_value(input_format),
                output_format=_value(output_format), threads=threads, progress=progress,
            )
        _emit(figures, render_objective, quiet, summary_json)


def main() -> None:
    keep_freed_memory()
    app(prog_name="grpo")
