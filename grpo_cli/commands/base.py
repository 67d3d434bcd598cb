"""What every command of `grpo` shares: the :class:`Command` a module is, the click command
built from it (its options from :mod:`grpo_cli.options`), errors, progress, and showing the
figures.

Data goes to stdout (only with ``-o -``); tables and errors go to stderr. The library's
messages, which name Python parameters, are shown with the flags.

>>> build("advantages").help.splitlines()[0]
'Compute one advantage per row from the rewards of its group.'
"""

import contextlib
import functools
import importlib
import inspect
import re
import signal
import sys
import threading
import time
from typing import Any, Callable, Iterator, Optional, Protocol, cast

import typer

from .. import options as o
from ..process import drop_stdout
from ..errors import RECEIVED, GrpoError, Interrupted, OutputError, UsageError
from ..files import file_function, json_text
from ..io import stdout
from . import load


class Command(Protocol):
    """A command: a module of :mod:`grpo_cli.commands`. Its docstring's first line is its line
    of help, the rest the help's body; ``EXAMPLES`` close the help. Its file function
    (``<name>_file = file_function(module)``) is the Python API of the command. A command
    that reads no input (``presets``) defines ``main``, its click callback, instead."""

    __name__: str  # grpo_cli.commands.<name>
    OPTIONS: tuple[o.Option, ...]  # in the order the help shows them
    EXAMPLES: str

    def plan(self, source: Any, **options: Any) -> Any:
        """The plan of a run: a frozen dataclass (shared pieces in :mod:`grpo_cli.plan`) whose
        ``run(engine, source)`` builds the command from the engine's primitives
        (:class:`~grpo_cli.engines.Engine`; passes several commands share in :mod:`grpo_cli.passes`)."""

    def keywords(self, given: dict[str, Any]) -> dict[str, Any]:
        """The library's values of the command's options as its plan takes them (config objects made)."""

    def render(self, figures: dict, console: Any) -> None:
        """The figures as tables."""


@functools.cache
def build(name: str) -> typer.core.TyperCommand:
    """Command ``name`` as click runs it: its parameters from its options' declarations."""
    module = load(name)
    doc = inspect.getdoc(module) or ""
    callback = getattr(module, "main", None) or _runner(module)
    app = typer.Typer(pretty_exceptions_enable=False)
    app.command(name, help=doc, epilog=module.EXAMPLES, cls=o.OneValueEach)(callback)
    command = typer.main.get_command_from_info(
        app.registered_commands[0], pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode="rich"
    )
    return cast(typer.core.TyperCommand, command)  # an o.OneValueEach


def _runner(command: Command) -> Callable[..., None]:
    """The click callback of a command that runs on an input: its options as the library takes
    them, its file API run with progress, its figures shown."""
    run_file = file_function(command)

    def run(ctx: typer.Context, input: list[str], **given: Any) -> None:
        quiet, json_out, progress, debug = (o.plain(given.pop(name, False)) for name in o.CLI_ONLY)
        with reported_errors(ctx, debug):
            check_json(json_out, given.get("output"), given.get("summary_json"))
            keywords = command.keywords(o.values(command.OPTIONS, given))
            with progress_reporter(progress, quiet or json_out) as reporter:
                figures = run_file(input, **keywords, progress=reporter)
            written = (keywords.get("output"), keywords.get("output_dir"), keywords.get("summary_json"))
            emit(figures, command.render, quiet, json_out, written=written)

    parameters = [
        inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context),
        o.INPUT_ARGUMENT,
        *(option.parameter for option in command.OPTIONS),
    ]
    run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in parameters}
    return run


MIN_WIDTH = 60  # columns: narrower (COLUMNS=0, 20), the tables would cut numbers; they run past the edge instead


def _stderr():
    """rich's console on stderr, at least :data:`MIN_WIDTH` wide; rich is imported only by a
    run that shows something."""
    from rich.console import Console

    console = Console(stderr=True)
    return console if console.width >= MIN_WIDTH else Console(stderr=True, width=MIN_WIDTH)


def _interrupt(signum: int, frame) -> None:
    interrupted = Interrupted(signal.Signals(signum).name, 128 + signum)
    RECEIVED.append(interrupted)  # raised where Python ignores exceptions (a weakref callback), it would be lost
    raise interrupted


LIBRARY_NAMES = {"advantage_config": "estimator"}  # library parameters that CLI options spell out


def _flags(ctx: typer.Context) -> dict[str, str]:
    """Each option's Python parameter name (and library alias) and its long flag."""
    flags = {p.name: max(p.opts, key=len) for p in ctx.command.params if p.name and p.opts and p.opts[0].startswith("-")}
    return {**flags, **{alias: flags[name] for alias, name in LIBRARY_NAMES.items() if name in flags}}


def one_line(message: str) -> str:
    r"""An error as one line: a line break in it (a file name may hold one) shown as ``\n``.

    >>> print(one_line("runs/a\nb.parquet: no column 'reward'"))
    runs/a\nb.parquet: no column 'reward'
    """
    return message.replace("\r", "\\r").replace("\n", "\\n")


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
    RECEIVED.clear()
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    except GrpoError as exc:
        if debug:
            raise
        typer.echo(f"Error: {one_line(with_flags(str(exc), _flags(ctx)))}", err=True)
        drop_stdout()  # a write to stdout that failed (full disk) must not fail again at exit
        raise typer.Exit(exc.exit_code) from None
    except BrokenPipeError:
        # The reader closed the pipe (e.g. `| head`): stop quietly, as Unix tools do.
        drop_stdout()
        raise typer.Exit(141) from None
    except Exception as exc:
        if debug:
            raise
        typer.echo(f"Error: internal error ({type(exc).__name__}: {one_line(str(exc))}); rerun with --debug for the traceback", err=True)
        raise typer.Exit(1) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        RECEIVED.clear()


def progress_lines(write: Callable[[str], None], every: float = o.PROGRESS_EVERY, clock=time.monotonic) -> Callable[[int, int, str], None]:
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
    its own meanwhile, while this one reads and computes: off the critical path."""
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
        TextColumn("rows"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[pieces]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("rows", total=None, pieces="")
        yield lambda done, total, pieces: bar.update(task, completed=done, total=total, pieces=pieces)


def check_json(json_out: bool, output: Optional[str], summary_json: Optional[str]) -> None:
    """Refuse ``--json`` where stdout already carries the rows or the summary JSON."""
    if json_out and (output == "-" or summary_json == "-"):
        raise UsageError("--json prints the figures on stdout, where the rows (or --summary-json -) would go; write them to a file")
    if json_out:
        stdout()  # refused if closed


def emit(figures: dict, render: Callable[[dict, Any], None], quiet: bool, json_out: bool = False, *, written: tuple[Optional[str], ...]) -> None:
    """The figures as JSON on stdout with ``json_out``, else as tables on stderr (``render``)
    unless ``quiet``; the outputs (``written``: the paths given, or None) were committed
    before. Only the tables import the report and rich."""
    if quiet and not json_out:
        return
    with _reporting(any(path is not None for path in written)):
        if json_out:
            out = stdout()
            try:
                out.write(json_text(figures).encode())
                out.flush()
            except BrokenPipeError:
                raise
            except OSError as exc:  # a full disk: one line, as for every output
                raise OutputError(f"<stdout>: cannot write ({exc.strerror or exc})") from None
        else:
            render(figures, _stderr())


@contextlib.contextmanager
def _reporting(written: bool) -> Iterator[None]:
    """Show the figures of a run that has finished, every output (if it ``written`` any)
    committed: an interrupt meanwhile says so, and that only the summary is cut short."""
    try:
        yield
    except Interrupted as exc:
        done = "every output was written completely, only the summary is cut short" if written else "the summary is cut short"
        raise exc.saying(f" while printing the summary; {done}") from None
