"""The estimator registry: each estimator is one function and a spec of what it needs.

A row-level estimator takes the rewards in their groups (:class:`~.groups.Groups`) and
returns ``r - b``, the reward minus its baseline; the scale (``group``, ``batch`` or
``none``, see :mod:`.scale`) divides it afterwards. A token-level estimator takes each row's
steps (:class:`~.returns.Steps`: per-token rewards, and values) and returns per-token
advantages and returns. Its docstring's first line is its help in ``--help`` and the docs;
the rest states the formula.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import UsageError

SCALES = ("group", "batch", "none")


@dataclass(frozen=True)
class Estimator:
    """An advantage estimator and what the engine must give it.

    Attributes
    ----------
    name, aliases
        What ``estimator`` accepts.
    compute
        Row level: ``Groups -> r - b``, one float64 per row. Token level:
        ``Steps -> (advantages, returns)``, one float64 per valid token each.
    needs
        What it reads besides the rewards and the grouping: ``length`` (each row's valid
        tokens), ``baseline`` (a baseline reward column), ``values`` (per-token values).
    scope
        ``group``: a group's rows are all it needs, so groups may be computed a window at a
        time; ``file``: it needs statistics of the whole input.
    level
        ``row`` (one advantage per row) or ``token`` (one per token).
    grouped
        Its baseline comes from the group, so groups without signal (one row, equal
        rewards) get 0; ``False``: every row stands alone.
    whitens
        ``tokens``: its advantages are always whitened over the valid tokens of the input
        (a row counts once per token); ``None``: only with ``whiten``, over rows.
    params
        The options of :class:`~grpo_cli.config.AdvantageConfig` it reads besides
        ``estimator``; any other option given with it is an error.
    scales
        The scales it accepts; ``default_scale`` applies when none is given.
    sums
        Token level, baseline per group: ``Steps -> sums`` of a batch's steps (see
        :mod:`.optimal_token_baseline`), merged over the input in a pass before ``compute``,
        which finds the baselines in ``Steps.groups``; ``None``: no such pass.
    gain
        ``Groups -> float``: the factor its ``r - b`` carries (gpg's alpha), which a group of
        one row keeps under ``singleton`` 'unit-std'; ``None``: 1.
    """

    name: str
    compute: Callable
    aliases: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    scope: str = "group"
    level: str = "row"
    grouped: bool = True
    whitens: str | None = None
    params: tuple[str, ...] = ("scale", "std", "eps")
    scales: tuple[str, ...] = SCALES
    default_scale: str = "group"
    gain: Callable | None = None
    sums: Callable | None = None

    @property
    def help(self) -> str:
        """The first line of the function's docstring."""
        return (self.compute.__doc__ or "").strip().splitlines()[0]


ESTIMATORS: dict[str, Estimator] = {}


def estimator(name: str, **spec) -> Callable:
    """Register the decorated function as estimator ``name`` (``spec``: see :class:`Estimator`)."""

    def register(fn: Callable) -> Callable:
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
