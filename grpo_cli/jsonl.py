"""JSON Lines, streamed: whole-line chunks parsed by pyarrow against one explicit schema.

Inferring types from the first rows (as polars and pyarrow's streaming reader do) turns a
column that is null early and numeric later into nulls, or fails on an integer column that
later holds 1.5. So a first pass parses every chunk and unifies the chunk schemas (null
widens to any type, integers to floats); later passes parse against that schema. When
pyarrow rejects a chunk, the chunk's lines are re-read with Python's ``json`` to name the
first bad line (this only runs on the error path).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterator

import pyarrow as pa
import pyarrow.json as pajson

from .errors import InputError

CHUNK_BYTES = 8 << 20


def line_chunks(open_file: Callable[[], BinaryIO], chunk_bytes: int | None = None) -> Iterator[tuple[int, bytes]]:
    """``(number of the first line, bytes)`` of consecutive chunks of whole lines (1-based) of
    the file that ``open_file()`` opens, about ``chunk_bytes`` each (default :data:`CHUNK_BYTES`;
    a longer line is one chunk)."""
    line, rest = 1, b""
    with open_file() as f:
        while data := f.read(chunk_bytes or CHUNK_BYTES):
            data = rest + data
            cut = data.rfind(b"\n") + 1
            chunk, rest = data[:cut], data[cut:]
            if chunk:
                yield line, chunk
                line += chunk.count(b"\n")
    if rest.strip():
        yield line, rest + b"\n"


def parse_chunk(chunk: bytes, first_line: int, name: str, schema: pa.Schema | None = None) -> pa.Table:
    """The rows of ``chunk``; with ``schema``, only its columns, converted to its types."""
    read = pajson.ReadOptions(use_threads=False, block_size=len(chunk) + 1)
    parse = pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore") if schema is not None else None
    try:
        return pajson.read_json(pa.BufferReader(chunk), read_options=read, parse_options=parse)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InputError(f"{name}: {locate_error(chunk, first_line, schema, exc)}") from None


@dataclass
class Scan:
    """What the first pass learns: the unified schema and the number of rows."""

    schema: pa.Schema
    rows: int


def scan(open_file: Callable[[], BinaryIO], name: str) -> Scan:
    """Parse every chunk of the file that ``open_file()`` opens and unify the chunk schemas (mixed types are an error)."""
    schema, rows = pa.schema([]), 0
    for first_line, chunk in line_chunks(open_file):
        table = parse_chunk(chunk, first_line, name)
        try:
            schema = pa.unify_schemas([schema, table.schema], promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise InputError(f"{name}: {locate_error(chunk, first_line, schema, exc)}") from None
        rows += table.num_rows
    return Scan(schema, rows)


def locate_error(chunk: bytes, first_line: int, schema: pa.Schema | None, exc: Exception) -> str:
    """``line N: what is wrong`` for the first bad line of ``chunk``, read with Python's json.

    ``schema`` gives the kinds earlier chunks established. If every line reads fine in
    Python, pyarrow's own message is returned with the chunk's line range.
    """
    kinds = {f.name: _kind_of_type(f.type) for f in schema} if schema is not None else {}
    for offset, raw in enumerate(chunk.split(b"\n")):
        if not raw.strip():
            continue
        problem = _line_problem(raw, kinds)
        if problem:
            return f"line {first_line + offset}: {problem}"
    last = first_line + chunk.count(b"\n") - 1
    return f"lines {first_line}-{last}: {str(exc).strip().splitlines()[0]}"


def _line_problem(raw: bytes, kinds: dict[str, str | None]) -> str | None:
    try:
        row = json.loads(raw, object_pairs_hook=_unique_keys)
    except (ValueError, UnicodeDecodeError) as exc:
        return f"not valid JSON ({exc})"
    if not isinstance(row, dict):
        return f"expected a JSON object, found {_kind(row)}"
    for key, value in row.items():
        kind, seen = _kind(value), kinds.get(key)
        if kind is None:
            continue
        if "mixed" in kind:
            return f"column {key!r} holds {kind}"
        if seen is None or seen == "list" and kind.startswith("list"):
            kinds[key] = kind
        elif seen != kind and not (kind == "list" and seen.startswith("list")):
            return f"column {key!r} holds {kind} where earlier lines hold {seen}"
    return None


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"duplicate column name {next(k for k in keys if keys.count(k) > 1)!r}")
    return dict(pairs)


def _kind(value) -> str | None:
    """The JSON kind of a value: number, string, boolean, object, list[<kind>] (``list``
    when empty: it fits any list); None for null."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    inner = {_kind(v) for v in value} - {None}
    if len(inner) > 1:
        return f"list of mixed kinds ({', '.join(sorted(inner))})"
    return f"list[{inner.pop()}]" if inner else "list"


def _kind_of_type(t: pa.DataType) -> str | None:
    if pa.types.is_null(t):
        return None
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return "number"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_timestamp(t):
        return "string"
    if pa.types.is_struct(t):
        return "object"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = _kind_of_type(t.value_type)
        return f"list[{inner}]" if inner else "list"
    return None
