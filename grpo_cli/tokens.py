"""Flat token buffers from Arrow list columns, validated.

Each list column becomes (lengths per row, flat values) without a Python loop: the child
buffer is taken as it is (float32 or float64; other numbers become float64), and the
token math widens it to float64. Every check names the
column and the first offending row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import InputError
from .objective import Tokens


@dataclass(frozen=True)
class TokenColumns:
    """Which input columns hold the per-token lists (ref and mask are optional)."""

    new: str
    old: str
    ref: str | None = None
    mask: str | None = None

    @property
    def names(self) -> list[str]:
        return [c for c in (self.new, self.old, self.ref, self.mask) if c is not None]


RowLabel = Callable[[int], str]


def _list_column(batch: pa.RecordBatch, name: str, where: Callable[[int], str]) -> tuple[np.ndarray, pa.Array]:
    """(lengths, flat child values) of a list column; nulls are refused."""
    column = batch.column(name)
    if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)):
        raise InputError(f"{where(0)}: column {name!r} must hold a list per row (found {column.type})")
    if column.null_count:
        raise InputError(f"{where(int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0]))}: column {name!r} is null")
    lengths = pc.list_value_length(column).to_numpy().astype(np.int64)
    values = column.flatten()
    if values.null_count:
        row = np.repeat(np.arange(len(lengths)), lengths)[np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0]]
        raise InputError(f"{where(int(row))}: column {name!r} has a null token value")
    return lengths, values


def _first_row_of_token(lengths: np.ndarray, bad: np.ndarray) -> int:
    return int(np.searchsorted(np.cumsum(lengths), int(np.flatnonzero(bad)[0]), side="right"))


def _logprobs(batch, name, lengths_new, where) -> tuple[np.ndarray, np.ndarray]:
    lengths, values = _list_column(batch, name, where)
    if not (pa.types.is_floating(values.type) or pa.types.is_integer(values.type) or pa.types.is_null(values.type)):
        raise InputError(f"{where(0)}: column {name!r} must hold numbers (found list of {values.type})")
    if lengths_new is not None and not np.array_equal(lengths, lengths_new):
        row = int(np.flatnonzero(lengths != lengths_new)[0])
        raise InputError(f"{where(row)}: column {name!r} has {lengths[row]} tokens but {lengths_new[row]} in the log-probs column")
    flat = values.to_numpy(zero_copy_only=False)
    if flat.dtype not in (np.float32, np.float64):
        flat = flat.astype(np.float64)
    # max <= 0 fails on a positive value or NaN (max propagates it), min > -inf on -inf:
    # two reductions without temporaries on the common path, the exact row only on error
    if flat.size and not (flat.max() <= 0 and flat.min() > -np.inf):
        finite = np.isfinite(flat)
        if not finite.all():
            raise InputError(f"{where(_first_row_of_token(lengths, ~finite))}: column {name!r} has a NaN or infinite log-prob")
        raise InputError(f"{where(_first_row_of_token(lengths, flat > 0))}: column {name!r} has a positive log-prob")
    return lengths, flat


def read_tokens(batch: pa.RecordBatch, columns: TokenColumns, first_row: int, row_label: RowLabel) -> Tokens:
    """Validated :class:`Tokens` of one record batch whose first row is ``first_row`` of the
    input; ``row_label(row)`` names a row in errors."""

    def where(row: int) -> str:
        return row_label(first_row + row)

    lengths, new = _logprobs(batch, columns.new, None, where)
    _, old = _logprobs(batch, columns.old, lengths, where)
    ref = _logprobs(batch, columns.ref, lengths, where)[1] if columns.ref else None
    mask = None
    if columns.mask:
        mask_lengths, values = _list_column(batch, columns.mask, where)
        if not np.array_equal(mask_lengths, lengths):
            row = int(np.flatnonzero(mask_lengths != lengths)[0])
            raise InputError(f"{where(row)}: column {columns.mask!r} has {mask_lengths[row]} entries but {lengths[row]} tokens")
        flat = values.to_numpy(zero_copy_only=False)
        if not pa.types.is_boolean(values.type):
            binary = (flat == 0) | (flat == 1)
            if not binary.all():
                raise InputError(f"{where(_first_row_of_token(lengths, ~binary))}: column {columns.mask!r} must hold 0/1 or booleans")
        mask = flat.astype(bool)
    return Tokens(lengths, new, old, ref, mask)
