"""Registries that fill themselves: adding a command, an estimator, a loss or a format is one
new module.

Each registry finds its entries among :func:`modules` of its package, so no list of modules is
kept anywhere: the commands by file name, the formats by their ``FORMAT``, and the estimators
and losses through :func:`import_registering`, which imports every module of the package whose
source uses the registering decorator (``@estimator(``, ``@loss(``) and lists the registry by
name.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import Any


def modules(folder: str | Path) -> list[Path]:
    """The modules of the package in ``folder`` (its ``.py`` files but ``__init__`` and those
    named with a leading underscore), by name.

    >>> [p.stem for p in modules(Path(__file__).parent / "io" / "formats")]
    ['jsonl', 'parquet']
    """
    return sorted(Path(folder).glob("[!_]*.py"))


def import_registering(package: str, folder: str, marker: str, registry: dict[str, Any]) -> None:
    """Import each module ``package.NAME`` of ``folder`` whose source holds ``marker``, then
    order ``registry`` (which those modules fill) by name.

    >>> import grpo_cli.estimators as e
    >>> import_registering(e.__name__, e.__path__[0], "@estimator(", e.ESTIMATORS)
    >>> list(e.ESTIMATORS)[:3]
    ['flash-reinforce', 'gae', 'gpg']
    """
    for path in modules(folder):
        if marker in path.read_text(encoding="utf-8"):
            import_module(f"{package}.{path.stem}")
    entries = sorted(registry.items())
    registry.clear()
    registry.update(entries)
