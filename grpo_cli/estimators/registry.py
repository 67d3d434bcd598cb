"""The estimator registry: each estimator is one function and a spec of what it needs.

An estimator function takes the rewards in their groups (:class:`~.groups.Groups`) and
returns ``r - b``, the reward minus its baseline; the scale (``group``, ``batch`` or
``none``, see :mod:`.scale`) divides it afterwards. Its docstring's first line is its help in
``--help`` and the README; the rest states the formula.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import UsageError
from .groups import Groups

SCALES = ("group", "batch", "none")


@dataclass(frozen=True)
class Estimator:
    """An advantage estimator and what the engine must give it.

    Attributes
    ----------
    name, aliases
        What ``estimator`` accepts.
    baseline_removed
        ``Groups -> r - b``, one float64 per row.
    needs
        Column roles read in the first pass besides the grouping (see :data:`grpo_cli.schema.ROLES`).
    scope
        ``group``: a group's rows are all it needs, so groups may be computed a window at a
        time; ``file``: it needs statistics of the whole input.
    level
        ``row`` (one advantage per row) or ``token`` (one per token).
    params
        The options of :class:`~grpo_cli.config.AdvantageConfig` it reads besides
        ``estimator``; any other option given with it is an error.
    scales
        The scales it accepts; ``default_scale`` applies when none is given.
    """

    name: str
    baseline_removed: Callable[[Groups], np.ndarray]
    aliases: tuple[str, ...] = ()
    needs: tuple[str, ...] = ("reward",)
    scope: str = "group"
    level: str = "row"
    params: tuple[str, ...] = ("scale", "std", "eps")
    scales: tuple[str, ...] = SCALES
    default_scale: str = "group"

    @property
    def help(self) -> str:
        """The first line of the function's docstring."""
        return (self.baseline_removed.__doc__ or "").strip().splitlines()[0]


ESTIMATORS: dict[str, Estimator] = {}


def estimator(name: str, **spec) -> Callable:
    """Register the decorated function as estimator ``name`` (``spec``: see :class:`Estimator`)."""

    def register(fn: Callable[[Groups], np.ndarray]) -> Callable[[Groups], np.ndarray]:
        ESTIMATORS[name] = Estimator(name, fn, **spec)
        return fn

    return register


def names() -> list[str]:
    """Every name ``estimator`` accepts: each estimator, then its aliases."""
    return [n for e in ESTIMATORS.values() for n in (e.name, *e.aliases)]


def lookup(name: str) -> Estimator:
    """The estimator called ``name`` (or one of its aliases)."""
    for e in ESTIMATORS.values():
        if name == e.name or name in e.aliases:
            return e
    raise UsageError(f"unknown `estimator` {name!r} (valid: {', '.join(names())})")
