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

import sys
from collections.abc import Mapping
from typing import Annotated

import typer
from typer.core import TyperGroup

from . import commands
from .process import ClosedStdout, drop_stdout, quick_exit, start_up_done, tune


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
    start_up_done()  # click builds the command (imports its modules) before it calls this


def main() -> None:
    """The console script: the process tuned (:mod:`.process`), the app run, a quick exit."""
    tune()
    if sys.stdout is None:  # started with descriptor 1 closed: printing there is an error, not a no-op
        sys.stdout = ClosedStdout()
    try:
        app(prog_name="grpo")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else (print(exc.code, file=sys.stderr), 1)[1]
        if type(sys.stdout).__name__ == "PacifyFlushWrapper":  # click's mark of a closed pipe (`grpo --help | head`), with its exit 1
            code = 141
    except BrokenPipeError:  # the reader of `grpo presets | head` left: quiet, as the data commands
        drop_stdout()
        code = 141
    except OSError as exc:  # stdout of presets, --version, --help (the data commands say their own)
        print(f"Error: <stdout>: cannot write ({exc.strerror or exc})", file=sys.stderr)
        drop_stdout()  # what is still buffered for it would fail again at exit
        code = 1
    quick_exit(code)
