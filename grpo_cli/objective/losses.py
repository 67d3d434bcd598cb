"""The loss registry: each policy objective is one function of the token ratios.

A loss gives its per-token term as the advantage times a factor, ``L_t = A_t f_t``, with
one factor where ``A > 0`` and one where ``A < 0`` (:class:`SignedFactors`); ``f_t`` is a
function of what :class:`LossInputs` holds (the ratio, the log-prob, the row). With one
advantage per row that factors out of the row sum, ``sum_t L_it = A_i sum_t f_it`` (the
fast path); per-token advantages are multiplied token by token. A loss also declares its
diagnostics: token flags (e.g. "the clipped branch was taken"), each counted on the tokens
whose advantage has a given sign and reported as a share of counted tokens.

Each loss is the value its framework's loss function returns (negated: this is the
objective, ``loss = -objective``); its docstring says what its gradient does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

if TYPE_CHECKING:
    from ..tokens import Tokens


@dataclass(frozen=True)
class LossInputs:
    """What a loss reads of a block of rows: ``ratio`` rho_t and ``log_ratio`` (at the
    configured ratio level, clamped), the rows (``tokens``, for per-row reductions) and
    their new log-probs ``logp``."""

    ratio: np.ndarray
    log_ratio: np.ndarray
    tokens: Tokens

    @property
    def logp(self) -> np.ndarray:
        """log pi_t of the new policy, float64."""
        return self.tokens.new.astype(np.float64, copy=False)


@dataclass
class SignedFactors:
    """Per-token factors of a loss, ``L_t = A_t * (positive_t if A_t > 0 else negative_t)``,
    and its per-token flags by name (``None``: set on no token)."""

    positive: np.ndarray
    negative: np.ndarray
    flags: dict[str, np.ndarray | None]


@dataclass(frozen=True)
class Flag:
    """A diagnostic: tokens where the loss's flag ``name`` is set and the advantage has
    ``sign`` (+1: A > 0, -1: A < 0, 0: either), reported as a share of counted tokens under
    ``clip_frac``; ``per_row`` flags also make up the per-row ``clip_frac`` column."""

    name: str
    sign: int
    per_row: bool = True


@dataclass(frozen=True)
class Loss:
    """A policy objective: its factors, the options it reads (of
    :class:`~grpo_cli.objective.config.ObjectiveConfig`; any other loss option is refused), the flags
    it reports, and ``defaults``: option values it is defined with (e.g. GSPO's sequence
    ratio and per-sequence mean), which apply unless the option is given or a preset sets it for this loss (they come before its base values)."""

    name: str
    factors: Callable[[LossInputs, object], SignedFactors]
    params: tuple[str, ...]
    flags: tuple[Flag, ...]
    defaults: tuple[tuple[str, object], ...] = ()

    @property
    def help(self) -> str:
        """The first line of the function's docstring."""
        return (self.factors.__doc__ or "").strip().splitlines()[0]


LOSSES: dict[str, Loss] = {}


def loss(name: str, *, params: tuple[str, ...] = (), flags: tuple[Flag, ...] = (), **defaults) -> Callable:
    """Register the decorated ``factors(inputs, config)`` function as loss ``name``."""

    def register(fn: Callable[[LossInputs, object], SignedFactors]) -> Callable:
        LOSSES[name] = Loss(name, fn, params, flags, tuple(defaults.items()))
        return fn

    return register
