"""JSON Lines, streamed: whole-line chunks parsed by pyarrow against one explicit schema; output
written by polars, each value as JSON can hold it (:func:`json_values`).

Inferring types from the first rows (as polars and pyarrow's streaming reader do) turns a
column that is null early and numeric later into nulls, or fails on an integer column that
later holds 1.5. So a first pass parses every chunk and unifies the chunk schemas (null
widens to any type, integers to floats); later passes parse against that schema. When
pyarrow rejects a chunk, the chunk's lines are re-read with Python's ``json`` to name the
first bad line (this only runs on the error path).

What JSON says is kept: a string stays a string (pyarrow guesses timestamps from date-like
strings; the schema says string instead), and an integer is never rounded: a column that
holds integers beyond 2^53 and fractions (float64 would round those integers), or integers
beyond int64 (which pyarrow reads as float64), is refused, naming the line. Lines may nest
at most :data:`MAX_DEPTH` levels (deeper ones crash the parser); the first pass checks the
raw bytes before pyarrow sees them.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import TYPE_CHECKING, BinaryIO, Callable, Collection, Iterator, cast

import numpy as np
import pyarrow as pa
import pyarrow.json as pajson

from ...errors import InputError, OutputError
from ...numerics import EXACT_INTEGERS, inexact_integers
from ...parallel import default_threads, ordered_map
from ...schema import contiguous
from . import Format, Scan

if TYPE_CHECKING:
    from ..discovery import Part
    from ..parquet_writer import Layout

CHUNK_BYTES = 8 << 20
MAX_DEPTH = 64  # levels of objects and lists in a line, the line's own object included
OPENS, CLOSES = ord("{"), ord("}")  # byte | 0x20 is one of them for { and [, or } and ] (and no other byte)
LONG_INTEGER = re.compile(rb"(?<![\w.+-])-?\d{16,}(?![\w.])")  # an integer literal of 16 digits or more (or such text in a string)


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
        table = pajson.read_json(pa.BufferReader(chunk), read_options=read, parse_options=parse)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InputError(f"{name}: {locate_error(chunk, first_line, schema, exc)}") from None
    for k, f in enumerate(table.schema):
        if _has_null_lists(f.type):
            table = table.set_column(k, f, pa.chunked_array([_null_lists_rebuilt(c) for c in table.column(k).chunks], f.type))
    return table


def _has_null_lists(t: pa.DataType) -> bool:
    """Whether ``t`` holds lists whose entries are all null (``list<null>``), at any depth."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.types.is_null(t.value_type) or _has_null_lists(t.value_type)
    return pa.types.is_struct(t) and any(_has_null_lists(f.type) for f in t)


def _null_lists_rebuilt(values: pa.Array) -> pa.Array:
    """``values`` with its lists of nulls rebuilt: pyarrow's JSON reader gives ``[null, null]``
    offsets that run past its one null entry, an array that no kernel can read or join."""
    t = values.type
    if not _has_null_lists(t):
        return values
    mask = values.is_null() if values.null_count else None
    if pa.types.is_struct(t):
        return pa.StructArray.from_arrays([_null_lists_rebuilt(c) for c in values.flatten()], fields=list(t), mask=mask)
    lists = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
    offsets = values.offsets
    if pa.types.is_null(t.value_type):
        entries = pa.nulls(offsets[-1].as_py())
    else:
        entries = _null_lists_rebuilt(values.values)
    return lists.from_arrays(offsets, entries, mask=mask)


def scan(open_file: Callable[[], BinaryIO], name: str) -> tuple[pa.Schema, int]:
    """The schema and rows of the file that ``open_file()`` opens: every chunk parsed, the chunk
    schemas unified (mixed types are an error), date-like strings as strings; a line nested
    deeper than :data:`MAX_DEPTH`, or an integer that float64 would round, is refused (see the
    module docstring)."""
    schema, rows = pa.schema([]), 0
    wide: dict[tuple[str, ...], tuple[int, int]] = {}  # (column, *leaf path): (line, value) of its first integer beyond 2^53
    for first_line, chunk in line_chunks(open_file):
        check_utf8(chunk, first_line, name)
        check_depth(chunk, first_line, name)
        table = parse_chunk(chunk, first_line, name)
        check_one_per_line(table.num_rows, chunk, first_line, name)
        _check_rounded(table, chunk, first_line, name)
        wide.update(_wide_integers(table, chunk, first_line, skip=wide.keys()))
        try:
            schema = pa.unify_schemas([schema, _strings(table.schema)], promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise InputError(f"{name}: {locate_error(chunk, first_line, schema, exc)}") from None
        rows += table.num_rows
    _check_widened(schema, wide, name)
    return schema, rows


def check_utf8(chunk: bytes, first_line: int, name: str) -> None:
    """Refuse the first line of ``chunk`` that is not UTF-8, as JSON text must be: its
    strings would reach parquet as bytes no reader accepts."""
    try:
        chunk.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = chunk.rfind(b"\n", 0, exc.start) + 1
        line = first_line + chunk.count(b"\n", 0, exc.start)
        raise InputError(f"{name}: line {line}: not UTF-8 at byte {exc.start - line_start + 1} (JSON text is UTF-8)") from None


FILLED_LINE = re.compile(rb"^[ \t\r]*[^ \t\r\n]", re.MULTILINE)  # a line with something on it


def check_one_per_line(rows: int, chunk: bytes, first_line: int, name: str) -> None:
    """Refuse a line that holds two JSON objects (the parser reads them as two rows, and every
    later line number would be off): a chunk has as many rows as lines with something on them."""
    if rows == len(FILLED_LINE.findall(chunk)):
        return
    for k, line in enumerate(chunk.split(b"\n")):  # only on the way to the error
        with contextlib.suppress(pa.ArrowInvalid):
            if line.strip() and pajson.read_json(pa.BufferReader(line)).num_rows > 1:
                raise InputError(f"{name}: line {first_line + k}: two JSON objects on one line; JSON Lines holds one per line")


def check_depth(chunk: bytes, first_line: int, name: str) -> None:
    """Refuse the first line of ``chunk`` that nests deeper than :data:`MAX_DEPTH` levels,
    counting the brackets outside strings (a quote escaped by an odd run of backslashes does
    not end a string). Vectorized over the chunk's bytes; the exact count runs only where a
    line opens more than :data:`MAX_DEPTH` brackets at all."""
    data = np.frombuffer(chunk, dtype=np.uint8)
    folded = data | 0x20
    opens = np.flatnonzero(folded == OPENS)
    ends = np.flatnonzero(data == ord("\n"))
    if np.bincount(np.searchsorted(ends, opens)).max(initial=0) <= MAX_DEPTH:  # no line opens more levels than that
        return
    closes = np.flatnonzero(folded == CLOSES)
    order = np.argsort(np.concatenate([opens, closes]), kind="stable")
    at = np.concatenate([opens, closes])[order]
    step = np.concatenate([np.ones(len(opens), np.int64), -np.ones(len(closes), np.int64)])[order]
    line = np.searchsorted(ends, at)  # each bracket's line, 0-based in the chunk
    quotes = np.flatnonzero(data == ord('"'))
    quotes = quotes[~_escaped(data, quotes)]
    starts = np.concatenate([[0], ends + 1])[line]
    outside = (np.searchsorted(quotes, at) - np.searchsorted(quotes, starts)) % 2 == 0
    at, line, step = at[outside], line[outside], step[outside]
    depth = np.cumsum(step)
    first = np.flatnonzero(np.diff(line, prepend=-1))  # each line's first bracket
    level = depth - np.repeat((depth - step)[first], np.diff(np.append(first, len(at))))
    deep = np.flatnonzero(level > MAX_DEPTH)
    if len(deep):
        raise InputError(f"{name}: line {first_line + int(line[deep[0]])}: nested deeper than {MAX_DEPTH} levels, the most JSON Lines input may nest")


def _escaped(data: np.ndarray, quotes: np.ndarray) -> np.ndarray:
    """Which of the ``quotes`` (positions in ``data``) follow an odd run of backslashes."""
    slashes = np.flatnonzero(data == ord("\\"))
    if not len(slashes):
        return np.zeros(len(quotes), dtype=bool)
    run_start = np.maximum.accumulate(np.where(np.diff(slashes, prepend=-2) != 1, np.arange(len(slashes)), 0))
    last = np.searchsorted(slashes, quotes - 1, side="right") - 1  # the last backslash at or before each quote's byte before
    k = np.maximum(last, 0)
    run = np.where((last >= 0) & (slashes[k] == quotes - 1), k - run_start[k] + 1, 0)
    return run % 2 == 1


def leaves(column: pa.Array | pa.ChunkedArray) -> Iterator[tuple[tuple[str, ...], pa.Array, Callable[[np.ndarray], np.ndarray]]]:
    """Every array of plain values inside ``column``, at any depth (struct fields; entries of
    lists, large lists, fixed-size lists and maps; dictionary values), with its path (field
    names, ``[]`` for entries) and a function from positions in it to the rows of ``column``
    that hold them."""
    if isinstance(column, pa.ChunkedArray):
        column = contiguous(column)
    yield from _leaves(column, (), lambda positions: positions)


def _leaves(values: pa.Array, path: tuple[str, ...], rows: Callable[[np.ndarray], np.ndarray]) -> Iterator:
    t = values.type
    if pa.types.is_dictionary(t):
        yield from _leaves(values.dictionary_decode(), path, rows)
    elif pa.types.is_struct(t):
        for f, child in zip(t, values.flatten()):
            yield from _leaves(child, (*path, f.name), rows)
    elif pa.types.is_map(t):
        yield from _leaves(values.view(pa.list_(pa.struct([t.key_field, t.item_field]))), path, rows)
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        if pa.types.is_null(t.value_type):
            return  # entries that are all null (pyarrow's JSON reader gives such lists offsets that cannot be flattened)
        import pyarrow.compute as pc

        def parents(positions: np.ndarray, lists: pa.Array = values) -> np.ndarray:
            return rows(pc.list_parent_indices(lists).to_numpy()[positions])

        yield from _leaves(pc.list_flatten(values), (*path, "[]"), parents)
    else:
        yield path, values, rows


def _wide_integers(table: pa.Table, chunk: bytes, first_line: int, skip: Collection[tuple[str, ...]]) -> dict[tuple[str, ...], tuple[int, int]]:
    """``(column, *leaf path)``: ``(line, value)`` of the first integer beyond 2^53 in each
    integer leaf of ``table`` that holds one (a later float there would round it), but
    those in ``skip``."""
    found = {}
    for name, column in zip(table.column_names, table.columns):
        for path, values, rows in leaves(column):
            key = (name, *path)
            if pa.types.is_integer(values.type) and key not in skip:
                ints = values.fill_null(0).to_numpy()
                beyond = np.flatnonzero(inexact_integers(ints))
                if len(beyond):
                    found[key] = (first_line + _rows(chunk)[int(rows(beyond[:1])[0])][0], int(ints[beyond[0]]))
    return found


def _check_widened(schema: pa.Schema, wide: dict[tuple[str, ...], tuple[int, int]], name: str) -> None:
    """Refuse the first integer beyond 2^53 whose leaf the unified ``schema`` made float64."""
    floats = {(f.name, *path) for f in schema for path, values, _ in leaves(pa.array([], f.type)) if pa.types.is_floating(values.type)}
    rounded = sorted((line, key[0], value) for key, (line, value) in wide.items() if key in floats)
    if rounded:
        raise _rounded_error(name, *rounded[0])


def _check_rounded(table: pa.Table, chunk: bytes, first_line: int, name: str) -> None:
    """Refuse an integer beyond 2^53 (or beyond int64) that pyarrow read into a float64 leaf of
    this chunk: it is rounded. Only the rows whose float there is that large are looked at
    closer (their lines, if they hold a long integer literal, read with Python's ``json``)."""
    suspects = []
    for column_name, column in zip(table.column_names, table.columns):
        for path, values, rows in leaves(column):
            if pa.types.is_floating(values.type):
                big = np.flatnonzero(np.abs(values.to_numpy(zero_copy_only=False)) >= EXACT_INTEGERS)
                suspects += [(int(row), column_name, path) for row in np.unique(rows(big))]
    lines = _rows(chunk) if suspects else []
    for row, column, path in sorted(suspects):
        k, raw = lines[row]
        if LONG_INTEGER.search(raw):
            value = next((v for v in _at(json.loads(raw)[column], path) if _is_int(v) and abs(v) > EXACT_INTEGERS), None)
            if value is not None:
                raise _rounded_error(name, first_line + k, column, value)


def _at(value, path: tuple[str, ...]) -> Iterator:
    """The values at ``path`` (field names, ``[]`` for entries) in a parsed JSON value."""
    if not path:
        yield value
    elif path[0] == "[]" and isinstance(value, list):
        for item in value:
            yield from _at(item, path[1:])
    elif isinstance(value, dict) and path[0] in value:
        yield from _at(value[path[0]], path[1:])


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _rows(chunk: bytes) -> list[tuple[int, bytes]]:
    """Each row of ``chunk``: its line's index in the chunk (blank lines hold no row), and the line."""
    return [(k, raw) for k, raw in enumerate(chunk.split(b"\n")) if raw.strip()]


def _rounded_error(name: str, line: int, column: str, value: int) -> InputError:
    return InputError(
        f"{name}: line {line}: column {column!r} holds the integer {value}, which float64 would round "
        "(the column holds fractions too, or the integer is beyond int64); write such numbers as JSON strings"
    )


def _strings(schema: pa.Schema) -> pa.Schema:
    """``schema`` with each timestamp (pyarrow's guess for a date-like JSON string) a string."""
    return pa.schema([f.with_type(_string_type(f.type)) for f in schema], metadata=schema.metadata)


def _string_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_string_type(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_string_type(t.value_type)))
    return t


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
    inner = {kind for kind in map(_kind, value) if kind is not None}
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
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_struct(t):
        return "object"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = _kind_of_type(t.value_type)
        return f"list[{inner}]" if inner else "list"
    return None


class JsonLines(Format):
    name = "jsonl"
    title = "JSON Lines"
    suffixes = (".jsonl", ".ndjson")
    order = 1

    def sniff(self, head: bytes) -> bool:
        """The brace that opens a row (after blank lines), or nothing but blank lines."""
        return head.lstrip()[:1] in (b"{", b"")

    def scan(self, part: Part) -> Scan:
        """A first pass over every line (:func:`scan`); the file's size is its bytes."""
        schema, rows = scan(part.open, part.name)
        return Scan(schema, rows, (rows,), part.files.get_file_info(part.path).size)

    def read(self, part: Part, columns: pa.Schema) -> pa.Table:
        return pa.Table.from_batches(list(self.batches(part, 1 << 20, columns, default_threads())), schema=columns)

    def batches(self, part: Part, batch_rows: int, columns: pa.Schema, threads: int = 1) -> Iterator[pa.RecordBatch]:
        """Chunks of whole lines parsed against ``columns`` on up to ``threads`` threads."""

        def parse(item: tuple[int, bytes]) -> pa.Table:
            return parse_chunk(item[1], item[0], part.name, columns)

        for table in ordered_map(parse, line_chunks(part.open), threads):
            yield from table.to_batches(max_chunksize=batch_rows)

    def writer(self, path: str, target: str, schema: pa.Schema, layout: Layout, threads: int) -> LinesWriter:
        return LinesWriter(path, target)


def _twice_named(t: pa.DataType) -> str | None:
    """A field name that a struct in ``t`` (at any depth) holds twice, if any."""
    if pa.types.is_struct(t):
        names = [t.field(i).name for i in range(t.num_fields)]
        twice = next((n for n in names if names.count(n) > 1), None)
        return twice if twice is not None else next((found for i in range(t.num_fields) if (found := _twice_named(t.field(i).type))), None)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_list_view(t):
        return _twice_named(t.value_type)
    if pa.types.is_map(t):
        return _twice_named(t.item_type)
    return None


EMPTY_NAME = "\x00grpo:empty\x00"  # the stand-in of a column named "" (polars would rename it)
EMPTY_KEY = b'"\\u0000grpo:empty\\u0000":'  # ... as polars writes it as a key


class LinesWriter:
    """Rows written as JSON Lines to ``path`` (on its way to ``target``, as messages name it),
    each column as :func:`json_values` makes it; NaN and infinity are refused."""

    def __init__(self, path: str, target: str):
        self.target = target
        self.rows = 0
        self.file = open(path, "ab")  # empty: see Format.writer

    def write_batch(self, batch: pa.RecordBatch) -> None:
        import polars as pl  # only for JSON Lines output: importing polars is slow

        names = batch.schema.names
        for field in batch.schema:
            if (twice := _twice_named(field.type)) is not None:
                raise OutputError(
                    f"{self.target}: column {field.name!r} holds a struct with two fields named {twice!r}, which a JSON object cannot; write parquet"
                )
        batch = pa.RecordBatch.from_arrays([json_values(column) for column in batch.columns], names=[n or EMPTY_NAME for n in names])
        self._check_numbers(batch)
        frame = cast(pl.DataFrame, pl.from_arrow(batch))  # a batch gives a frame
        if "" not in names:
            frame.write_ndjson(self.file)
        else:  # polars renames a column named "": written under a stand-in, the key put back (a key, never a value, is followed by ':')
            self.file.write(frame.write_ndjson().encode().replace(EMPTY_KEY, b'"":'))
        self.rows += batch.num_rows

    def _check_numbers(self, batch: pa.RecordBatch) -> None:
        """JSON has no NaN or infinity: refuse them, at any depth, rather than write null in
        their place."""
        import pyarrow.compute as pc

        for name, column in zip(batch.schema.names, batch.columns):
            first: list[int] = []  # each float leaf's first row with NaN or infinity
            for _, values, rows in leaves(column):
                if pa.types.is_floating(values.type):
                    bad = pc.invert(pc.fill_null(pc.is_finite(values), True)).to_numpy(zero_copy_only=False)
                    first += rows(np.flatnonzero(bad)[:1]).tolist()
            if first:
                raise InputError(
                    f"{self.target}: row {self.rows + min(first)}: column {name!r} holds NaN or infinity, "
                    "which JSON Lines cannot hold; write parquet instead"
                )

    def close(self) -> None:
        self.file.close()


INTERVAL_NAMES = ("months", "days", "nanoseconds")
INTERVAL_FIELDS = np.dtype(list(zip(INTERVAL_NAMES, ("<i4", "<i4", "<i8"))))  # Arrow's month_day_nano layout


def json_values(values: pa.Array) -> pa.Array:
    """``values`` as JSON Lines holds them, at any depth (struct fields; entries of lists, large
    lists, fixed-size lists, list views and maps; dictionary values): float16 and float32 as
    float64 (JSON readers parse float64, and the widened digits give back exactly the value, so
    JSON Lines output computes the same numbers as the parquet it came from); binary as its
    base64 text (JSON has no bytes); decimals as the text of their exact digits (JSON readers
    parse numbers as float64, which would round them); month-day-nanosecond intervals as
    objects of their ``months``, ``days`` and ``nanoseconds``; list views as lists; an extension
    type as its storage. Arrays with none of these are returned as they are."""
    t = values.type
    if isinstance(t, pa.BaseExtensionType):
        return json_values(values.storage)
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return values.cast(pa.float64())
    if pa.types.is_decimal(t):
        return values.cast(pa.string())
    if pa.types.is_interval(t):
        fields = np.frombuffer(values.buffers()[1], INTERVAL_FIELDS, len(values), values.offset * INTERVAL_FIELDS.itemsize)
        return pa.StructArray.from_arrays([pa.array(fields[name]) for name in INTERVAL_NAMES], INTERVAL_NAMES, mask=_nulls(values))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t):
        import polars as pl

        return pl.Series(values.cast(pa.large_binary())).bin.encode("base64").to_arrow()
    if pa.types.is_dictionary(t):
        written = json_values(values.dictionary)
        return values if written is values.dictionary else pa.DictionaryArray.from_arrays(values.indices, written)
    if pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return json_values(_as_list(values))
    if pa.types.is_struct(t):
        children = values.flatten()
        written = [json_values(child) for child in children]
        if all(new is old for new, old in zip(written, children)):
            return values
        return pa.StructArray.from_arrays(written, fields=[f.with_type(c.type) for f, c in zip(t, written)], mask=_nulls(values))
    if pa.types.is_map(t):
        keys, items = json_values(values.keys), json_values(values.items)
        if keys is values.keys and items is values.items:
            return values
        return pa.MapArray.from_arrays(values.offsets, keys, items, mask=_nulls(values))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        size = t.list_size if pa.types.is_fixed_size_list(t) else None
        entries = values.values.slice(values.offset * size, len(values) * size) if size else values.values
        written = json_values(entries)
        if written is entries:
            return values
        if size:
            return pa.FixedSizeListArray.from_arrays(written, size, mask=_nulls(values))
        return type(values).from_arrays(values.offsets, written, mask=_nulls(values))
    return values


def _as_list(views: pa.Array) -> pa.Array:
    """A list view (or large list view) array as the list (or large list) array of the same
    entries (pyarrow's cast between them gives invalid offsets)."""
    import pyarrow.compute as pc

    large = pa.types.is_large_list_view(views.type)
    lengths = pc.fill_null(pc.list_value_length(views), 0).to_numpy()
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]), pa.int64() if large else pa.int32())
    return (pa.LargeListArray if large else pa.ListArray).from_arrays(offsets, pc.list_flatten(views), mask=_nulls(views))


def _nulls(values: pa.Array) -> pa.Array | None:
    return values.is_null() if values.null_count else None


FORMAT = JsonLines()
