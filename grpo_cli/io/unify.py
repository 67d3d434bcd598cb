"""One schema over many files: each column in the type that holds every file's values.

Files may differ in ways that do not matter: the columns a run reads are cast to one type (int
and float: float; float32 and float64: float64; dictionary-encoded or not: its values' type)
and must be in every file; the others are carried as they are.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import pyarrow as pa

from ..errors import InputError
from ..schema import inexact_integer
from .formats import first_line

if TYPE_CHECKING:
    from .discovery import Part

Data = TypeVar("Data", pa.RecordBatch, pa.Table)


def conform(data: Data, schema: pa.Schema, name: str) -> Data:
    """``data`` (of file ``name``) with the columns of ``schema``, in its order and types; a
    column that ``data`` lacks is null. An integer that float64 (its type in other files)
    would round raises :class:`~grpo_cli.errors.RowError` with its row in ``data``."""
    for field in schema:
        if data.schema.get_field_index(field.name) < 0:
            data = data.append_column(field, pa.nulls(data.num_rows, field.type))
    data = data.select(schema.names)
    if data.schema.equals(schema):
        return data
    return type(data).from_arrays([_cast(data.column(f.name), f, name) for f in schema], schema=schema)


def _cast(column, field: pa.Field, name: str):
    if column.type.equals(field.type):
        return column
    try:
        return column.cast(field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        if pa.types.is_integer(column.type) and pa.types.is_float64(field.type):
            raise inexact_integer(column, field.name) from None
        raise InputError(
            f"{name}: column {field.name!r} ({column.type}) does not fit {field.type}, its type in other files ({first_line(exc)})"
        ) from None


def unified_columns(parts: list[Part], schemas: list[pa.Schema], last: set[str]) -> dict[str, tuple[pa.Field, str | None]]:
    """Each column of any of the ``parts`` (whose columns are ``schemas``), in order of first
    appearance (those in ``last`` last): its field in the type that holds every part's values,
    or its first field and why no type does."""
    fields = [(part, field) for part, schema in zip(parts, schemas) for field in schema]
    seen: dict[str, dict[pa.DataType, tuple[Part, pa.Field]]] = {}
    for part, field in sorted(fields, key=lambda item: item[1].name in last):
        seen.setdefault(field.name, {}).setdefault(field.type, (part, field))
    return {name: unified(list(types.values())) for name, types in seen.items()}


def unified(fields: list[tuple[Part, pa.Field]]) -> tuple[pa.Field, str | None]:
    """One field for a column that parts hold as ``fields`` (each distinct type, with the first
    part holding it), or the first field and why no type holds them all."""
    (first_part, first), *others = fields
    common = first
    for part, field in others:
        try:
            common = pa.unify_schemas([pa.schema([_decoded(common)]), pa.schema([_decoded(field)])], promote_options="permissive").field(0)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return first, f"{part.name}: column {first.name!r} is {field.type} but {first.type} in {first_part.name}"
    return common, None


def _decoded(field: pa.Field) -> pa.Field:
    """A dictionary-encoded field as its values' type (files may differ in the encoding)."""
    return field.with_type(field.type.value_type) if pa.types.is_dictionary(field.type) else field


def typed(values: pa.Array) -> pa.Array:
    """Partition values (strings): int64 if all are integers, else float64 if all are finite
    numbers that float64 holds as written (an integer beyond 2^53 would be rounded), else the
    strings as they are (``nan``, ``inf``, ``1e400`` too), as JSON Lines numbers are read.

    >>> typed(pa.array(["9007199254740993", "0.5"])).type, typed(pa.array(["1", "2.5"])).type
    (DataType(string), DataType(double))
    """
    with contextlib.suppress(pa.ArrowInvalid):
        return values.cast(pa.int64())
    try:
        numbers = values.cast(pa.float64())
    except pa.ArrowInvalid:
        return values
    import pyarrow.compute as pc

    whole = pc.fill_null(pc.match_substring_regex(values, r"^[+-]?[0-9]+$"), False).to_numpy(zero_copy_only=False)
    x = numbers.to_numpy(zero_copy_only=False)
    nulls = values.is_null().to_numpy(zero_copy_only=False)
    exact = np.isfinite(x) & ~(whole & (np.abs(x) >= 2.0**53))  # from 2^53 on, float64 may have rounded it
    return numbers if (exact | nulls).all() else values
