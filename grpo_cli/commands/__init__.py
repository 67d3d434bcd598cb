"""The commands of `grpo`, one module each (see :mod:`.base` for what a module holds): the
registry finds them by file name, and reads each one's line of help from the first line of
its docstring without importing it, so `grpo --help` lists them without building any (none
of numpy, pyarrow, polars or rich is imported). A command's module is imported when it runs
or shows its help.

>>> names()[:2], summary("advantages")
(('advantages', 'compare'), 'Compute one advantage per row from the rewards of its group.')
"""

import functools
import importlib
from pathlib import Path
from types import ModuleType

from ..plugins import modules

_HERE = Path(__file__).parent
NOT_COMMANDS = ("base",)  # what the commands share
WITHOUT_INPUT = ("presets",)  # commands that read no input: no plan, no file function


@functools.cache
def names() -> tuple[str, ...]:
    """Every command's name: the modules of this package."""
    return tuple(p.stem for p in modules(_HERE) if p.stem not in NOT_COMMANDS)


def summary(name: str) -> str:
    """Command ``name``'s line of help: the first line of its module's docstring, read without importing it."""
    return (_HERE / f"{name}.py").read_text(encoding="utf-8").split('"""', 2)[1].splitlines()[0]


def load(name: str) -> ModuleType:
    """Command ``name``'s module (a :class:`~.base.Command`)."""
    if name not in names():
        raise KeyError(name)
    return importlib.import_module(f".{name}", __name__)
