"""The loss registry: each policy objective is one function of the token ratios.

A loss gives its per-token term as the advantage times a factor, ``L_t = A_t f_t``, with
one factor where ``A > 0`` and one where ``A < 0`` (:class:`SignedFactors`); ``f_t`` is a
function of what :class:`LossInputs` holds (the ratio, the log-prob, the row). With one
advantage per row that factors out of the row sum, ``sum_t L_it = A_i sum_t f_it`` (the
fast path); per-token advantages are multiplied token by token. A term that does not scale
with the advantage (DRO's penalty, kl_cov's) is added apart. A loss whose terms need
statistics of the whole input (verl's covariance losses) declares scans of it, run before
the objective's pass (:class:`Scan`). A loss also declares its
diagnostics: token flags (e.g. "the clipped branch was taken"), each counted on the tokens
whose advantage has a given sign and reported as a share of counted tokens.

Each loss is the value its framework's loss function returns (negated: this is the
objective, ``loss = -objective``); its docstring says what its gradient does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

if TYPE_CHECKING:
    from ..tokens import Tokens


@dataclass(frozen=True)
class LossInputs:
    """What a loss reads of a block of rows: ``ratio`` rho_t and ``log_ratio`` (at the
    configured ratio level, clamped), the rows (``tokens``, for per-row reductions) and
    their new log-probs ``logp``; ``row_advantages`` (one per row; ``None``: per token, in
    ``tokens.advantage``); ``first_row``, the block's first row in the whole input; and
    ``context``, what the loss's scans found over the whole input (:class:`Scan`)."""

    ratio: np.ndarray
    log_ratio: np.ndarray
    tokens: Tokens
    row_advantages: np.ndarray | None = None
    first_row: int = 0
    context: Any = None

    @property
    def logp(self) -> np.ndarray:
        """log pi_t of the new policy, float64."""
        return self.tokens.new.astype(np.float64, copy=False)

    @property
    def old_logp(self) -> np.ndarray:
        """log pi_old_t, float64."""
        return self.tokens.old.astype(np.float64, copy=False)

    @property
    def advantage(self) -> np.ndarray:
        """A_t of every token, float64 (a row's advantage on each of its tokens)."""
        if self.row_advantages is None:
            assert self.tokens.advantage is not None  # per token, when no row's is given
            return self.tokens.advantage.astype(np.float64, copy=False)
        return np.repeat(self.row_advantages.astype(np.float64, copy=False), self.tokens.lengths)


@dataclass
class SignedFactors:
    """Per-token factors of a loss, ``L_t = A_t * (positive_t if A_t > 0 else negative_t) + extra_t``,
    and its per-token flags by name (``None``: set on no token); ``extra`` is a term that
    does not scale with the advantage (DRO's penalty; ``None``: none); ``empty``: the factor
    of ``A_i`` that a row without counted tokens adds to a mean over rows of the row means
    (TRL's GMPO: 1; ``None``: 0, as every other loss)."""

    positive: np.ndarray
    negative: np.ndarray
    flags: dict[str, np.ndarray | None]
    extra: np.ndarray | None = None
    empty: float | None = None

    def weighted(self, w: np.ndarray) -> "SignedFactors":
        """Every term times the per-token weights ``w`` (the flags unchanged; an empty row has no weight)."""
        return SignedFactors(self.positive * w, self.negative * w, self.flags, None if self.extra is None else self.extra * w, self.empty)


@dataclass(frozen=True)
class Scan:
    """A pass over the whole input before the objective's, for a loss whose token terms depend
    on statistics of every token (verl computes them per micro-batch; here the input is one):
    ``partial(inputs, state, config)`` on each block of rows (``inputs.context`` is ``state``,
    what the scans before found; ``None`` for the first), then ``finish(partials, state,
    config)`` of the partials in row order gives the next state. The last state is the
    loss's ``context``. Partials are per-row values, or otherwise combined so that the state
    does not depend on how the rows were cut into blocks."""

    partial: Callable[[LossInputs, Any, Any], Any]
    finish: Callable[[list, Any, Any], Any]


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
    it reports, ``defaults``: option values it is defined with (e.g. GSPO's sequence
    ratio and per-sequence mean), which apply unless the option is given or a preset sets it
    for this loss (they come before its base values), and its ``scans`` of the whole input,
    if its terms need any (:class:`Scan`). ``critic``: a value loss, which reads the critic's
    per-token values, old values and returns (``tokens.values``, ...) and no advantages."""

    name: str
    factors: Callable[[LossInputs, object], SignedFactors]
    params: tuple[str, ...]
    flags: tuple[Flag, ...]
    defaults: tuple[tuple[str, object], ...] = ()
    scans: tuple[Scan, ...] = ()
    critic: bool = False

    @property
    def help(self) -> str:
        """The first line of the function's docstring."""
        return (self.factors.__doc__ or "").strip().splitlines()[0]


LOSSES: dict[str, Loss] = {}


def loss(
    name: str, *, params: tuple[str, ...] = (), flags: tuple[Flag, ...] = (), scans: tuple[Scan, ...] = (), critic: bool = False, **defaults
) -> Callable:
    """Register the decorated ``factors(inputs, config)`` function as loss ``name``."""

    def register(fn: Callable[[LossInputs, object], SignedFactors]) -> Callable:
        LOSSES[name] = Loss(name, fn, params, flags, tuple(defaults.items()), scans, critic)
        return fn

    return register
