"""The `grpo` command's entry point: the list of commands, ``--version``, and the exit.

A command is built from its module in :mod:`.commands` (its options, their help from the
library's registries) only when it runs or shows its help, so ``grpo --help`` and ``grpo --version``
import none of numpy, pyarrow, polars or rich; this list is plain click help.
Exit codes: 0 success, 1 bad input data, 2 bad usage (options), 141-style quiet exit on a
closed output pipe.

>>> from typer.testing import CliRunner
>>> CliRunner().invoke(app, ["--version"]).output.startswith("grpo ")
True
"""

import atexit
import contextlib
import gc
import os
import sys
from collections.abc import Mapping
from typing import Annotated, NoReturn

import typer
from typer.core import TyperGroup

from . import commands
from .allocator import keep_freed_memory, small_pages


class _Built(Mapping):
    """The commands by name, each built by :func:`grpo_cli.commands.base.build` when looked up."""

    def __getitem__(self, name: str):
        if name not in commands.names():
            raise KeyError(name)
        from .commands.base import build
        return build(name)

    def __iter__(self):
        return iter(commands.names())

    def __len__(self) -> int:
        return len(commands.names())


class Commands(TyperGroup):
    """The group of the registered commands (:mod:`grpo_cli.commands`); its help lists them without building them."""

    def __init__(self, **options):
        super().__init__(**options)
        self.commands = _Built()

    def format_commands(self, ctx, formatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, commands.summary(name)) for name in commands.names()])


app = typer.Typer(
    cls=Commands,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version
        typer.echo(f"grpo {version('grpo-cli')}")
        raise typer.Exit()


@app.callback()
def _commands(
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """Group-relative advantages (GRPO, RLOO, Dr.GRPO) and clipped policy objectives on rollout files."""
    _collect_from_here()  # click builds the command (imports its modules) before it calls this


def _collect_from_here() -> None:
    """Start-up is over: collect cyclic garbage as usual from here on, but never walk again
    the objects start-up made (``gc.freeze``), if :func:`main` turned the collector off for
    start-up; a host that runs :data:`app` itself keeps its collector as it is. Importing
    numpy, pyarrow and a command's modules makes some 50,000 objects; collecting them as they
    were made took 9-10 ms of every run (about 80 collections; typer's import, before
    :func:`main`, still pays about 3 ms). 31 interleaved runs on 10M rows, summary only: 0.453
    s -> 0.435 s (binary rewards), 0.457 s -> 0.450 s (continuous)."""
    global _collector_paused
    if _collector_paused:
        gc.freeze()
        gc.enable()
        _collector_paused = False


_collector_paused = False  # by main(), for start-up


def drop_stdout() -> None:
    """Point stdout at /dev/null: whatever is still buffered for it is discarded at exit."""
    if sys.stdout is None:  # closed when we started: nothing is buffered, and descriptor 1 is not ours
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


class _WithoutPandas:
    """An import hook under which pandas is not installed. pyarrow imports pandas, if it is,
    on its first numpy conversion (0.2-0.3 s) only to recognise pandas objects; no command
    uses pandas, so the command's own process does without it (the Python API does not)."""

    @staticmethod
    def find_spec(name: str, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("the grpo command does not use pandas", name=name)
        return None


def main() -> None:
    global _collector_paused
    gc.disable()  # until start-up is over: :func:`_collect_from_here`
    _collector_paused = True
    keep_freed_memory()
    small_pages()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # no command multiplies matrices: numpy's BLAS threads would only spin
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _WithoutPandas)
    try:
        app(prog_name="grpo")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else (print(exc.code, file=sys.stderr), 1)[1]
    _exit(code)


def _exit(code: int) -> NoReturn:
    """Leave as a normal exit does (exit handlers such as Ray's shutdown run, then buffered
    output is flushed), without tearing the interpreter down: unloading numpy and pyarrow
    takes 0.06-0.09 s of every run here (measured) and frees nothing the kernel would not. A
    reader that closed stdout before the last of it was flushed ends the run quietly, 141."""
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        drop_stdout()
        code = code or 141
    except (AttributeError, ValueError):  # no stdout, or closed
        pass
    with contextlib.suppress(AttributeError, ValueError, OSError):
        sys.stderr.flush()
    os._exit(code)
