"""Flat token buffers from Arrow list columns, validated.

Each list column becomes (lengths per row, flat values) without a Python loop: the child
buffer is taken as it is (float32 or float64; other numbers become float64), and the
token math widens it to float64. Every check raises :class:`~grpo_cli.errors.RowError`
naming the column and the batch's first offending row.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import pyarrow as pa

from .errors import RowError, present
from .schema import is_list, list_values
from .tokens import Tokens, reduce_rows


@dataclass(frozen=True)
class TokenColumns:
    """Which input columns hold the per-token lists (ref, mask, per-token advantages, the
    rollout sampler's log-probs, the token entropies and a value loss's values, old values and
    returns are optional)."""

    new: str | None  # None: a value loss without log-probs (every ratio 1)
    old: str | None
    ref: str | None = None
    mask: str | None = None
    advantage: str | None = None
    rollout: str | None = None
    entropy: str | None = None
    values: str | None = None
    old_values: str | None = None
    returns: str | None = None

    @property
    def critic(self) -> tuple[str | None, str | None, str | None]:
        """The value loss's columns: values, old values, returns."""
        return self.values, self.old_values, self.returns

    @property
    def names(self) -> list[str]:
        """The columns read, each once (one column may play two roles: new and old, old and rollout)."""
        return _named(self)


def _named(columns: TokenColumns | StepColumns) -> list[str]:
    """The columns of every role given, each once."""
    return list(dict.fromkeys(c for c in (getattr(columns, f.name) for f in fields(columns)) if c is not None))


def _list_column(batch: pa.RecordBatch, name: str) -> tuple[np.ndarray, pa.Array]:
    """(lengths, flat child values, nulls kept) of a list column; a null list is refused."""
    column = batch.column(name)
    if not is_list(column.type):
        raise RowError(0, f"column {name!r} must hold a list per row (found {column.type})")
    if column.null_count:
        raise RowError(int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0]), f"column {name!r} is null")
    return np.diff(column.offsets.to_numpy()).astype(np.int64), list_values(column)


def list_lengths(batch: pa.RecordBatch, name: str) -> np.ndarray:
    """The entries of each row of list column ``name`` (int64); a null list is refused."""
    return _list_column(batch, name)[0]


def _first_row_of_token(lengths: np.ndarray, bad: np.ndarray) -> int:
    return int(np.searchsorted(np.cumsum(lengths), int(np.flatnonzero(bad)[0]), side="right"))


def token_mask(batch: pa.RecordBatch, name: str, lengths: np.ndarray) -> np.ndarray:
    """The token mask as bool, one entry per token: 0/1 or booleans, no nulls."""
    mask_lengths, values = _list_column(batch, name)
    if not np.array_equal(mask_lengths, lengths):
        row = int(np.flatnonzero(mask_lengths != lengths)[0])
        raise RowError(row, f"column {name!r} has {mask_lengths[row]} entries but {lengths[row]} tokens")
    if values.null_count:
        raise RowError(_first_row_of_token(lengths, values.is_null().to_numpy(zero_copy_only=False)), f"column {name!r} has a null entry")
    flat = values.to_numpy(zero_copy_only=False)
    if not pa.types.is_boolean(values.type):
        binary = (flat == 0) | (flat == 1)
        if not binary.all():
            raise RowError(_first_row_of_token(lengths, ~binary), f"column {name!r} must hold 0/1 or booleans")
    return flat.astype(bool)


def _numbers(batch: pa.RecordBatch, name: str, lengths_new: np.ndarray | None, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(lengths, flat float32/float64 values) of a numeric list column, as long as
    ``lengths_new``; masked tokens (padding) are set to 0, whatever they held."""
    lengths, values = _list_column(batch, name)
    if not (pa.types.is_floating(values.type) or pa.types.is_integer(values.type) or pa.types.is_null(values.type)):
        raise RowError(0, f"column {name!r} must hold numbers (found list of {values.type})")
    if lengths_new is not None and not np.array_equal(lengths, lengths_new):
        row = int(np.flatnonzero(lengths != lengths_new)[0])
        raise RowError(row, f"column {name!r} has {lengths[row]} tokens but {lengths_new[row]} in the log-probs column")
    if values.null_count:
        null = values.is_null().to_numpy(zero_copy_only=False) & (True if mask is None else mask)  # padding may be null
        if null.any():
            raise RowError(_first_row_of_token(lengths, null), f"column {name!r} has a null token value")
        import pyarrow.compute as pc  # here only: its import is tens of ms

        values = pc.fill_null(values, 0)
    flat = values.to_numpy(zero_copy_only=False)
    if flat.dtype not in (np.float32, np.float64):
        flat = flat.astype(np.float64)
    if mask is not None and not mask.all():
        flat = np.where(mask, flat, flat.dtype.type(0))
    return lengths, flat


def _logprobs(batch: pa.RecordBatch, name: str, lengths_new: np.ndarray | None, mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    lengths, flat = _numbers(batch, name, lengths_new, mask)
    # max <= 0 fails on a positive value or NaN (max propagates it), min > -inf on -inf:
    # two reductions without temporaries on the common path, the exact row only on error
    if flat.size and not (flat.max() <= 0 and flat.min() > -np.inf):
        finite = np.isfinite(flat)
        if not finite.all():
            raise RowError(_first_row_of_token(lengths, ~finite), f"column {name!r} has a NaN or infinite log-prob")
        raise RowError(_first_row_of_token(lengths, flat > 0), f"column {name!r} has a positive log-prob")
    return lengths, flat


def _finite(batch: pa.RecordBatch, name: str, lengths: np.ndarray, mask: np.ndarray | None, what: str) -> np.ndarray:
    """A numeric list column as flat float64, as long as ``lengths``; NaN or infinite values
    of counted tokens are refused (masked tokens read as 0)."""
    values = _numbers(batch, name, lengths, mask)[1].astype(np.float64, copy=False)
    finite = np.isfinite(values)
    if not finite.all():
        raise RowError(_first_row_of_token(lengths, ~finite), f"column {name!r} has a NaN or infinite {what}")
    return values


def read_tokens(batch: pa.RecordBatch, columns: TokenColumns) -> Tokens:
    """Validated :class:`Tokens` of one record batch (errors name rows of the batch). With a
    mask, only counted tokens are checked; masked ones (padding) read as 0."""
    lengths = _list_column(batch, columns.new or present(columns.values, "the values"))[0]
    mask = token_mask(batch, columns.mask, lengths) if columns.mask else None
    read: dict[str, np.ndarray] = {}

    def logprobs(name: str) -> np.ndarray:
        if name not in read:  # one column in two roles: read once
            read[name] = _logprobs(batch, name, lengths, mask)[1]
        return read[name]

    if columns.new is None:  # a value loss on a file without log-probs: every ratio is 1
        new = old = np.zeros(int(lengths.sum()))
    else:
        new, old = logprobs(columns.new), logprobs(present(columns.old, "the old log-probs"))
    ref = logprobs(columns.ref) if columns.ref else None
    advantage = None
    if columns.advantage:
        advantage = _finite(batch, columns.advantage, lengths, mask, "advantage")
    rollout = logprobs(columns.rollout) if columns.rollout else None
    entropy = _nonnegative(batch, columns.entropy, lengths, mask, "entropy") if columns.entropy else None
    critic = [None if name is None else _finite(batch, name, lengths, mask, what) for name, what in zip(columns.critic, CRITIC)]
    return Tokens(lengths, new, old, ref, mask, advantage, rollout, entropy, *critic)


CRITIC = ("value", "old value", "return")  # what a value loss's columns hold, as errors name it


def read_entropies(batch: pa.RecordBatch, columns: TokenColumns) -> np.ndarray:
    """The counted tokens' entropies of one record batch, float64, read with the mask alone
    (a pass that needs nothing else)."""
    name = present(columns.entropy, "the entropy column")
    lengths = list_lengths(batch, name)
    mask = token_mask(batch, columns.mask, lengths) if columns.mask else None
    values = _nonnegative(batch, name, lengths, mask, "entropy")
    return values if mask is None else values[mask]


@dataclass(frozen=True)
class StepColumns:
    """The token columns an estimator reads: ``count`` (a list column with one entry per
    token), the ``mask``, the ``policy`` and ``ref`` log-probs of a KL in the reward,
    per-token ``values``, and the ``old`` log-probs, ``sum_pi_squared`` and rollout
    ``is_weights`` (optional) of the optimal token baseline."""

    count: str
    mask: str | None = None
    policy: str | None = None
    ref: str | None = None
    values: str | None = None
    old: str | None = None
    sum_pi_squared: str | None = None
    is_weights: str | None = None

    @property
    def names(self) -> list[str]:
        return _named(self)


@dataclass(frozen=True)
class StepData:
    """One batch's token data for an estimator: ``lengths`` (entries per row), ``valid`` (a
    bool per entry), and on valid tokens only: ``kl_d`` (policy - ref), ``values``, ``old``
    (log-probs), ``sum_pi_squared`` and ``is_weights``."""

    lengths: np.ndarray
    valid: np.ndarray
    kl_d: np.ndarray | None
    values: np.ndarray | None
    old: np.ndarray | None = None
    sum_pi_squared: np.ndarray | None = None
    is_weights: np.ndarray | None = None

    @property
    def valid_lengths(self) -> np.ndarray:
        """Each row's valid tokens."""
        return reduce_rows(self.valid, self.lengths, empty=0, dtype=np.int64)


def read_steps(batch: pa.RecordBatch, columns: StepColumns) -> StepData:
    """Validated :class:`StepData` of one record batch (errors name rows of the batch)."""
    lengths = _list_column(batch, columns.count)[0]
    mask = token_mask(batch, columns.mask, lengths) if columns.mask else np.ones(int(lengths.sum()), dtype=bool)
    kl_d = values = None
    if columns.ref is not None:
        policy = _logprobs(batch, present(columns.policy, "the policy's log-probs of the KL"), lengths, mask)[1][mask]
        kl_d = policy.astype(np.float64) - _logprobs(batch, columns.ref, lengths, mask)[1][mask]
    if columns.values is not None:
        values = _finite(batch, columns.values, lengths, mask, "value")[mask]
    old = sum_pi_squared = is_weights = None
    if columns.sum_pi_squared is not None:
        old = _logprobs(batch, present(columns.old, "the old log-probs"), lengths, mask)[1][mask].astype(np.float64)
        sum_pi_squared = _nonnegative(batch, columns.sum_pi_squared, lengths, mask, "sum of pi^2")[mask]
    if columns.is_weights is not None:
        is_weights = _nonnegative(batch, columns.is_weights, lengths, mask, "importance weight")[mask]
    return StepData(lengths, mask, kl_d, values, old, sum_pi_squared, is_weights)


def _nonnegative(batch: pa.RecordBatch, name: str, lengths: np.ndarray, mask: np.ndarray | None, what: str) -> np.ndarray:
    """A numeric list column as flat float64, its counted tokens' values finite and >= 0."""
    values = _finite(batch, name, lengths, mask, what)
    if values.size and values.min() < 0:
        raise RowError(_first_row_of_token(lengths, values < 0), f"column {name!r} has a negative {what}")
    return values
