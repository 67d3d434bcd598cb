"""Registries that fill themselves: adding an estimator, a loss or a format is one new module.

A package calls :func:`import_registering` once; it imports every module of the package whose
source uses the registering decorator (``@estimator(``, ``@loss(``), so no list of modules is
kept anywhere, and lists the registry by name.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import Any


def import_registering(package: str, folder: str, marker: str, registry: dict[str, Any]) -> None:
    """Import each module ``package.NAME`` of ``folder`` whose source holds ``marker``, then
    order ``registry`` (which those modules fill) by name.

    >>> import grpo_cli.estimators as e
    >>> import_registering(e.__name__, e.__path__[0], "@estimator(", e.ESTIMATORS)
    >>> list(e.ESTIMATORS)[:3]
    ['gae', 'gpg', 'grpo']
    """
    for path in sorted(Path(folder).glob("[!_]*.py")):
        if marker in path.read_text(encoding="utf-8"):
            import_module(f"{package}.{path.stem}")
    entries = sorted(registry.items())
    registry.clear()
    registry.update(entries)
