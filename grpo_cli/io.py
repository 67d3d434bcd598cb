"""Readers and writers: parquet and JSON Lines, files, folders, globs or stdin/stdout.

Inputs are local paths or URIs that pyarrow's filesystems understand (``s3://``, ``gs://``,
``hdfs://``, ``file://``), with the credentials of the user's environment; outputs are local.

A :class:`Source` is one or more files read as one dataset, in order. Sources are read
twice at most: once for the small columns (ids, rewards), then streamed by record batch.
Files may differ in ways that do not matter: the columns a run reads are cast to one type
(int and float: float; float32 and float64: float64) and must be in every file; the others
are carried as they are. Stdin, pipes and FIFOs are spooled to a temporary file first,
because both passes need them and a parquet footer sits at the end of the stream. Every
output of a run goes to a temporary file first, and all are moved into place together only
when the whole run succeeded (:class:`Outputs`).
"""

from __future__ import annotations

import contextlib
import fnmatch
import itertools
import os
import shutil
import stat
import sys
from dataclasses import dataclass, fields
from functools import cached_property
from pathlib import Path, PurePath, PurePosixPath
from typing import BinaryIO, Iterator, TypeVar
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from . import jsonl, writer
from .parallel import default_threads, ordered_map
from .errors import ColumnNotFoundError, InputError, Interrupted, OutputError, RowError, UsageError
from .schema import check_unique_names, inexact_integer
from .writer import Layout, RowGroupWriter

FORMATS = ("parquet", "jsonl")
SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl"}
UNSUPPORTED = {".csv": "CSV", ".tsv": "TSV"}  # formats we name rather than misread
STDIO = "-"
BATCH_BYTES = 32 << 20  # uncompressed bytes per record batch when streaming
BATCH_ROWS = (1_024, 1 << 20)  # bounds on rows per batch
PARQUET_MAGIC = b"PAR1"
SNIFF_BYTES = 4096  # enough to see past blank lines to a JSON Lines file's first brace
GLOB_CHARS = frozenset("*?[")
SKIPPED_PREFIXES = (".", "_")  # names a folder walk skips: hidden files, Spark's _SUCCESS and _temporary/
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"  # the folder value Hive and Spark write for null
LOCAL = pafs.LocalFileSystem()

Data = TypeVar("Data", pa.RecordBatch, pa.Table)


def format_from_name(path: str) -> str | None:
    """``parquet`` or ``jsonl`` from a file name's suffix, else None."""
    return SUFFIXES.get(Path(path).suffix.lower())


def is_uri(given: str) -> bool:
    """Whether ``given`` names a file by URI (``s3://bucket/key``) rather than a local path."""
    return "://" in given


@dataclass(frozen=True)
class Part:
    """One file of a source: the name messages use, where it is (a path on ``filesystem``),
    and its path below the folder it was found in (a folder input, a glob's fixed leading
    folders, or a named file's own folder): hive partitions and `output_dir` sub-paths come
    from ``relative``."""

    name: str
    path: str
    relative: PurePath
    filesystem: pafs.FileSystem

    @property
    def local(self) -> bool:
        return isinstance(self.filesystem, pafs.LocalFileSystem)

    def open(self):
        """The file as a binary stream."""
        return self.filesystem.open_input_stream(self.path)

    @property
    def partition_values(self) -> dict[str, str | None]:
        """The ``key=value`` folders of ``relative`` (values URL-decoded; Hive's null is None)."""
        values: dict[str, str | None] = {}
        for folder in self.relative.parent.parts:
            key, equals, value = folder.partition("=")
            if key and equals:
                values[key] = None if value == HIVE_NULL else unquote(value)
        return values


@dataclass
class Source:
    """Rollout files read as one dataset, in order: a display name, the files, their format.
    With ``hive``, each file's partition folders are columns too. ``folders``: the folder
    inputs (read with their sub-folders)."""

    name: str
    parts: list[Part]
    format: str
    hive: bool = False
    folders: tuple[Path, ...] = ()

    def __getstate__(self) -> dict:
        """What names the files, not what was read of them (footers do not pickle): a copy
        sent to another process reads them again where it is used."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @cached_property
    def stored_schemas(self) -> list[pa.Schema]:
        """Each part's columns as its file stores them (names must be unique)."""
        if self.format == "jsonl":
            schemas = [scan.schema for scan in self._jsonl_scans]
        else:
            schemas = [meta.schema.to_arrow_schema() for meta in self._parquet_metadata]
        for part, schema in zip(self.parts, schemas):
            check_unique_names(schema, part.name)
        return schemas

    @cached_property
    def partitions(self) -> list[dict[str, pa.Scalar]]:
        """With ``hive``: each part's partition values, each key typed over all parts (int64
        if every value is an integer, else float64 if every value is a number, else string)."""
        if not self.hive:
            return [{} for _ in self.parts]
        found = [part.partition_values for part in self.parts]
        keys = list(dict.fromkeys(key for values in found for key in values))
        if not keys:
            raise UsageError("`hive` reads the key=value folders below a folder or glob input as columns, "
                             "and no input file is in one; drop `hive`")
        typed = {key: _typed(pa.array([values.get(key) for values in found], pa.string())) for key in keys}
        return [{key: typed[key][k] for key in values} for k, values in enumerate(found)]

    @cached_property
    def part_schemas(self) -> list[pa.Schema]:
        """Each part's columns: the stored ones, then its partition columns."""
        schemas = []
        for part, stored, partitions in zip(self.parts, self.stored_schemas, self.partitions):
            clash = next((key for key in partitions if stored.get_field_index(key) >= 0), None)
            if clash is not None:
                raise InputError(f"{part.name}: column {clash!r} is both in the file and a partition folder; rename one, or drop `hive`")
            extra = [pa.field(key, value.type) for key, value in partitions.items()]
            schemas.append(pa.schema([*stored, *extra], metadata=stored.metadata))
        return schemas

    @cached_property
    def _columns(self) -> dict[str, tuple[pa.Field, str | None]]:
        """Each column of any part, in order of first appearance (partition columns last): its
        field in the type that holds every part's values, or its first field and why no type does."""
        keys = {key for partitions in self.partitions for key in partitions}
        fields = [(part, field) for part, schema in zip(self.parts, self.part_schemas) for field in schema]
        seen: dict[str, dict[pa.DataType, tuple[Part, pa.Field]]] = {}
        for part, field in sorted(fields, key=lambda item: item[1].name in keys):
            seen.setdefault(field.name, {}).setdefault(field.type, (part, field))
        return {name: _unified(list(types.values())) for name, types in seen.items()}

    @cached_property
    def schema(self) -> pa.Schema:
        """Every column of any part, in order of first appearance (partition columns last),
        each in the type that holds every part's values (int and float: float; float32 and
        float64: float64). A column whose types do not unify shows its first type here, and
        reading it is refused."""
        return pa.schema([field for field, _ in self._columns.values()], metadata=self.part_schemas[0].metadata)

    def read_schema(self, columns: list[str]) -> pa.Schema:
        """``columns`` as a run reads them, each in its unified type: every part must hold
        them, in types that unify."""
        for name in columns:
            lacking = next((part for part, schema in zip(self.parts, self.part_schemas) if schema.get_field_index(name) < 0), None)
            if lacking is not None:
                raise ColumnNotFoundError(f"{lacking.name}: no column {name!r}, which this run reads (other input files have it)")
            if self._columns[name][1] is not None:
                raise InputError(f"{self._columns[name][1]}, and no one type holds both")
        return pa.schema([self._columns[name][0] for name in columns])

    @cached_property
    def output_schema(self) -> pa.Schema:
        """Every column as one output holds it: in its unified type (null in rows of a part
        that lacks it). A column whose types do not unify is refused."""
        conflict = next((conflict for _, conflict in self._columns.values() if conflict is not None), None)
        if conflict is not None:
            raise InputError(f"{conflict}, which one output cannot hold (`output_dir` writes one output per input file)")
        return self.schema

    @cached_property
    def row_counts(self) -> np.ndarray:
        """Rows in each part."""
        if self.format == "jsonl":
            return np.array([scan.rows for scan in self._jsonl_scans], dtype=np.int64)
        return np.array([meta.num_rows for meta in self._parquet_metadata], dtype=np.int64)

    @cached_property
    def _parquet_metadata(self) -> list[pq.FileMetaData]:
        """Each part's footer, read once (schema and row count both come from it)."""
        def footer(part: Part) -> pq.FileMetaData:
            return self._guard(part, lambda: pq.read_metadata(part.path, filesystem=part.filesystem))

        return list(ordered_map(footer, self.parts, default_threads()))

    @cached_property
    def _jsonl_scans(self) -> list[jsonl.Scan]:
        """Each part's first pass: its schema (types unified over its lines) and rows."""
        return [self._guard(part, lambda: jsonl.scan(part.open, part.name)) for part in self.parts]

    @cached_property
    def _row_groups(self) -> list[pq.RowGroupMetaData]:
        """Every parquet row group of every part, in order."""
        return [meta.row_group(i) for meta in self._parquet_metadata for i in range(meta.num_row_groups)]

    @cached_property
    def bytes_per_row(self) -> int:
        """Uncompressed bytes per row (from the parquet footers, or the JSON Lines text size)."""
        if self.format == "parquet":
            size = sum(group.total_byte_size for group in self._row_groups)
        else:
            size = sum(part.filesystem.get_file_info(part.path).size for part in self.parts)
        return max(1, size // max(1, int(self.row_counts.sum())))

    @cached_property
    def batch_rows(self) -> int:
        """Rows per streamed batch: about :data:`BATCH_BYTES` of uncompressed data, within
        :data:`BATCH_ROWS`."""
        return int(np.clip(BATCH_BYTES // self.bytes_per_row, *BATCH_ROWS))

    def layout(self, compression: str | None = None) -> Layout:
        """How parquet output of these rows is written: ``compression``, else the codec of the
        first input's first column; row groups as large as the inputs' largest (see
        :mod:`grpo_cli.writer`)."""
        groups = self._row_groups if self.format == "parquet" else []
        codec = groups[0].column(0).compression.lower() if groups and groups[0].num_columns else None
        largest = max((group.num_rows for group in groups), default=None)
        return writer.layout(compression, codec, largest, self.bytes_per_row)

    @cached_property
    def pieces(self) -> tuple[str, np.ndarray]:
        """What the data is stored in, for progress, and where each piece ends (cumulative
        rows): parquet row groups, or files."""
        if self.format == "parquet":
            return "row groups", np.cumsum([group.num_rows for group in self._row_groups])
        return "files", np.cumsum(self.row_counts)

    def locate(self, row: int) -> str:
        """``file: row r`` for the dataset's row ``row`` (0-based within its file)."""
        if len(self.parts) == 1:
            return f"{self.name}: row {row}"
        ends = np.cumsum(self.row_counts)
        k = int(np.searchsorted(ends, row, side="right"))
        return f"{self.parts[k].name}: row {row - int(ends[k] - self.row_counts[k])}"

    def read_columns(self, columns: list[str]) -> pa.Table:
        """The named columns of every row, in their unified types, as one table."""
        return pa.concat_tables([self.read_part_columns(k, columns) for k in range(len(self.parts))])

    def read_part_columns(self, k: int, columns: list[str]) -> pa.Table:
        """The named columns of part ``k``, in their unified types; a value that its unified
        type cannot hold raises :class:`RowError` with its row in the dataset."""
        try:
            return conform(self._part_table(k, columns), self.read_schema(columns), self.parts[k].name)
        except RowError as exc:
            raise RowError(int(self.row_counts[:k].sum()) + exc.row, exc.detail) from None

    def iter_batches(self, batch_rows: int, columns: list[str] | None = None, only: int | None = None,
                     held: pa.Table | None = None) -> Iterator[tuple[int, pa.RecordBatch]]:
        """``(part index, batch)``: ``columns`` (default: all), at most ``batch_rows`` rows per
        batch, in file order (``only``: of that part alone); a batch never spans two files. A
        batch holds its part's columns as stored, partition columns last (:func:`conform` gives
        them the unified types); every part must hold ``columns``.

        ``held``: columns of every row already in memory (a first pass's ids and rewards, in
        their unified types). A part that stores one of them in that type takes it from there
        rather than reading it again; a part with nothing else to read is not opened."""
        if columns is not None:
            self.read_schema(columns)
        starts = np.cumsum(self.row_counts) - self.row_counts
        for k, part in enumerate(self.parts):
            if only is not None and k != only:
                continue
            stored = self._stored(k, columns)
            kept = [f.name for f in stored if held is not None and f.name in held.column_names and held.schema.field(f.name).type.equals(f.type)]
            read = pa.schema([f for f in stored if f.name not in kept])
            if not kept:
                batches = self._stored_batches(part, batch_rows, read)
            else:
                rows = held.select(kept).slice(int(starts[k]), int(self.row_counts[k]))
                batches = _with_held(self._stored_batches(part, batch_rows, read) if len(read) else None, rows, stored, batch_rows)
            yield from ((k, self._with_partitions(k, batch, columns)) for batch in batches)

    def _stored_batches(self, part: Part, batch_rows: int, stored: pa.Schema) -> Iterator[pa.RecordBatch]:
        if self.format == "parquet":
            return self._parquet_batches(part, batch_rows, stored.names)
        return self._jsonl_batches(part, batch_rows, stored)

    def _stored(self, k: int, columns: list[str] | None) -> pa.Schema:
        """The stored columns of part ``k`` among ``columns`` (default: all)."""
        stored = self.stored_schemas[k]
        return stored if columns is None else pa.schema([stored.field(c) for c in columns if stored.get_field_index(c) >= 0])

    def _with_partitions(self, k: int, data: Data, columns: list[str] | None) -> Data:
        """``data`` of part ``k`` with its partition columns among ``columns`` (default: all)."""
        for key, value in self.partitions[k].items():
            if columns is None or key in columns:
                data = data.append_column(pa.field(key, value.type), pa.repeat(value, data.num_rows))
        return data

    def _part_table(self, k: int, columns: list[str]) -> pa.Table:
        """The named columns of part ``k`` as one table, as stored. Local parquet is read
        without pre-buffering (3.5x faster here); object storage with it (fewer requests)."""
        part, stored = self.parts[k], self._stored(k, columns)
        if self.format == "parquet":
            table = self._guard(part, lambda: pq.ParquetFile(part.path, filesystem=part.filesystem, pre_buffer=not part.local).read(columns=stored.names))
        else:
            table = pa.Table.from_batches(list(self._jsonl_batches(part, 1 << 20, stored)), schema=stored)
        return self._with_partitions(k, table, columns)

    def _parquet_batches(self, part: Part, batch_rows: int, columns: list[str]) -> Iterator[pa.RecordBatch]:
        batches = self._guard(part, lambda: pq.ParquetFile(part.path, filesystem=part.filesystem, pre_buffer=not part.local).iter_batches(batch_size=batch_rows, columns=columns))
        while (batch := self._guard(part, lambda: next(batches, None))) is not None:
            yield batch

    def _jsonl_batches(self, part: Part, batch_rows: int, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        def parse(item: tuple[int, bytes]) -> pa.Table:
            return jsonl.parse_chunk(item[1], item[0], part.name, schema)

        for table in ordered_map(parse, jsonl.line_chunks(part.open), default_threads()):
            yield from table.to_batches(max_chunksize=batch_rows)

    def _guard(self, part: Part, read):
        try:
            return read()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
            raise InputError(f"{part.name}: not a readable {self.format} file ({_first_line(exc)})") from None


def _with_held(read: Iterator[pa.RecordBatch] | None, held: pa.Table, schema: pa.Schema, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """Batches with ``schema``'s columns: those ``read``, the others sliced from ``held`` (the
    same rows, in order); with nothing ``read``, ``held`` alone in batches of ``batch_rows``."""
    start = 0
    for batch in read if read is not None else [None] * -(-held.num_rows // batch_rows):
        size = batch.num_rows if batch is not None else min(batch_rows, held.num_rows - start)
        rows, start = held.slice(start, size), start + size
        yield pa.RecordBatch.from_arrays([batch.column(f.name) if batch is not None and f.name in batch.schema.names
                                          else _contiguous(rows.column(f.name)) for f in schema], schema=schema)


def _contiguous(column: pa.ChunkedArray) -> pa.Array:
    """``column`` as one array: its chunk if it has one (``combine_chunks`` would copy it)."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def conform(data: Data, schema: pa.Schema, name: str) -> Data:
    """``data`` (of file ``name``) with the columns of ``schema``, in its order and types; a
    column that ``data`` lacks is null. An integer that float64 (its type in other files)
    would round raises :class:`RowError` with its row in ``data``."""
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
        raise InputError(f"{name}: column {field.name!r} ({column.type}) does not fit {field.type}, its type in other files ({_first_line(exc)})") from None


def _unified(fields: list[tuple[Part, pa.Field]]) -> tuple[pa.Field, str | None]:
    """One field for a column that parts hold as ``fields`` (each distinct type, with the first
    part holding it), or the first field and why no type holds them all."""
    (first_part, first), *others = fields
    unified = first
    for part, field in others:
        try:
            unified = pa.unify_schemas([pa.schema([_decoded(unified)]), pa.schema([_decoded(field)])], promote_options="permissive").field(0)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return first, f"{part.name}: column {first.name!r} is {field.type} but {first.type} in {first_part.name}"
    return unified, None


def _decoded(field: pa.Field) -> pa.Field:
    """A dictionary-encoded field as its values' type (files may differ in the encoding)."""
    return field.with_type(field.type.value_type) if pa.types.is_dictionary(field.type) else field


def _typed(values: pa.Array) -> pa.Array:
    """Partition values (strings): int64 if all are integers, else float64 if all are numbers."""
    for numbers in (pa.int64(), pa.float64()):
        with contextlib.suppress(pa.ArrowInvalid):
            return values.cast(numbers)
    return values


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def expand_inputs(inputs: list[str]) -> list[Part]:
    """The files that ``inputs`` name (local paths or URIs), each input's sorted by path: a
    file as given; a folder's rollout files at any depth (see :func:`_walk`); a glob pattern's
    matches (``**`` matches any depth of folders). Each must be a readable, non-empty file."""
    return [part for given in inputs for part in _expand(given)]


def _expand(given: str) -> list[Part]:
    head, query = given.partition("?")[0::2] if is_uri(given) else (given, "")
    names = head.split("/")
    wild = next((k for k, name in enumerate(names) if GLOB_CHARS & set(name)), None)
    if wild is not None and (is_uri(given) or not os.path.exists(given)):  # a local file may have [ in its name
        fixed = "/".join(names[:wild]) or ("/" if head.startswith("/") else "")
        filesystem, base = _filesystem(f"{fixed}?{query}" if query else fixed)
        found = _guarded(given, lambda: _glob(filesystem, base or ".", names[wild:]))
        if not found:
            raise InputError(f"{given}: no files match")
        return _parts(fixed, found, filesystem)
    filesystem, path = _filesystem(given)
    info = _guarded(given, lambda: filesystem.get_file_info(path))
    if info.type == pafs.FileType.Directory:
        found = _guarded(given, lambda: _walk(filesystem, path))
        if not found:
            raise InputError(f"{given}: is a directory with no {', '.join(SUFFIXES)} files")
        return _parts(head, found, filesystem)
    part = Part(given, path, PurePath(PurePath(path).name), filesystem)
    _check_readable(part, info)
    return [part]


def _parts(fixed: str, found: dict[PurePath, pafs.FileInfo], filesystem: pafs.FileSystem) -> list[Part]:
    """The files ``found`` below the input folder ``fixed``, each checked readable."""
    parts = [Part(_joined(fixed, relative), info.path, relative, filesystem) for relative, info in found.items()]
    for part, info in zip(parts, found.values()):
        _check_readable(part, info)
    return parts


def _filesystem(given: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem that holds ``given`` and its path there (a local path is itself)."""
    if not is_uri(given):
        return LOCAL, given
    return _guarded(given, lambda: pafs.FileSystem.from_uri(given))


def _guarded(given: str, call):
    """``call()``, a filesystem failing (no credentials, no such bucket) in one line."""
    try:
        return call()
    except (OSError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InputError(f"{given}: cannot read ({_first_line(exc)})") from None


def _joined(fixed: str, relative: PurePath) -> str:
    """The name of the file at ``relative`` below the input folder ``fixed``, written as it was."""
    if is_uri(fixed):
        return f"{fixed.rstrip('/')}/{relative.as_posix()}"
    return str(Path(fixed) / relative)


def _listing(filesystem: pafs.FileSystem, folder: str, *, recursive: bool = False) -> dict[PurePath, pafs.FileInfo]:
    """What ``folder`` holds (at any depth if ``recursive``), by path below it."""
    infos = filesystem.get_file_info(pafs.FileSelector(folder, recursive=recursive, allow_not_found=True))
    return {PurePath(PurePosixPath(info.path).relative_to(PurePosixPath(folder))): info for info in infos}


def _walk(filesystem: pafs.FileSystem, folder: str) -> dict[PurePath, pafs.FileInfo]:
    """The rollout files below ``folder`` at any depth, by path below it, sorted. A name that
    starts with . or _ (hidden files, Spark's _SUCCESS and _temporary/) is skipped, and so is
    everything below it."""
    found = _listing(filesystem, folder, recursive=True)
    return {q: found[q] for q in sorted(found) if found[q].type == pafs.FileType.File and format_from_name(q.name)
            and not any(name.startswith(SKIPPED_PREFIXES) for name in q.parts)}


def _glob(filesystem: pafs.FileSystem, folder: str, pattern: list[str]) -> dict[PurePath, pafs.FileInfo]:
    """The files below ``folder`` whose path below it matches ``pattern``, by that path, sorted.

    Each name of ``pattern`` matches one folder level (``*``, ``?``, ``[...]``), ``**`` any
    depth of folders; as in the shell, a wildcard matches a name starting with . only if it
    starts with . too, and ``**`` does not enter hidden folders."""
    found = {PurePath(): pafs.FileInfo(folder, pafs.FileType.Directory)}
    for name in pattern:
        folders = [q for q, info in found.items() if info.type == pafs.FileType.Directory]
        if name == "**":
            found = {q: found[q] for q in folders} | {
                q / r: info for q in folders for r, info in _listing(filesystem, found[q].path, recursive=True).items()
                if not any(part.startswith(".") for part in r.parts)}
        else:
            found = {q / r: info for q in folders for r, info in _listing(filesystem, found[q].path).items()
                     if fnmatch.fnmatchcase(r.name, name) and (name.startswith(".") or not r.name.startswith("."))}
    return {q: found[q] for q in sorted(found) if found[q].type == pafs.FileType.File}


def _check_readable(part: Part, info: pafs.FileInfo) -> None:
    """A file that exists, is not a folder, is readable (on the local filesystem, ``file://``
    included, checked here; elsewhere when read) and is not empty."""
    if info.type == pafs.FileType.NotFound:
        raise InputError(f"{part.name}: no such file")
    if info.type == pafs.FileType.Directory:
        raise InputError(f"{part.name}: is a directory, expected a file")
    if part.local and not os.access(info.path, os.R_OK):
        raise InputError(f"{part.name}: permission denied")
    if info.size == 0:
        raise InputError(f"{part.name}: empty file")


def _format_of(part: Part) -> str:
    """A file's format from its suffix, else from its first bytes: parquet's magic, or the
    brace that opens a JSON Lines row (formats we do not read are named, not misread)."""
    suffix = Path(part.name).suffix.lower()
    if suffix in UNSUPPORTED:
        raise InputError(f"{part.name}: {UNSUPPORTED[suffix]} is not supported; convert it to parquet or JSON Lines "
                         "(or pass `input_format` if it holds one of them)")
    if suffix in SUFFIXES:
        return SUFFIXES[suffix]
    with part.open() as f:
        head = f.read(SNIFF_BYTES)
    if head.startswith(PARQUET_MAGIC):
        return "parquet"
    if head.lstrip()[:1] in (b"{", b""):
        return "jsonl"
    raise InputError(f"{part.name}: neither parquet nor JSON Lines (it begins {head[:24]!r}); pass `input_format` if it is one")


def _common_format(parts: list[Part], input_format: str | None) -> str:
    if input_format is not None:
        return input_format
    formats = {part.name: _format_of(part) for part in parts}
    if len(set(formats.values())) > 1:
        first = {fmt: name for name, fmt in reversed(formats.items())}
        mixed = " but ".join(f"{name} is {fmt}" for fmt, name in first.items())
        raise UsageError(f"inputs mix formats: {mixed}; convert them to one format")
    return next(iter(formats.values()))


def resolve_output_format(target: str, explicit: str | None, input_format: str) -> str:
    """The output format: ``explicit``, else the target's suffix, else the input's format.
    Binary parquet is not written to a terminal (as ``gzip`` refuses to)."""
    if explicit is not None:
        fmt = explicit
    elif target == STDIO:
        fmt = input_format
    else:
        fmt = format_from_name(target)
    if fmt is None:
        raise UsageError(f"cannot tell the format of {target!r} from its name; pass `output_format`")
    if target == STDIO and fmt == "parquet" and sys.stdout.isatty():
        raise UsageError("parquet is binary and stdout is a terminal; redirect or pipe it, or pass `output_format` jsonl")
    return fmt


@dataclass(frozen=True)
class Writes:
    """Every path a run writes, as given: the annotated rows to ``output`` (``-``: stdout), or
    one file per input into ``output_dir`` (in ``output_format``, if given); the figures to
    ``summary_json``. :func:`open_source` checks them (:meth:`check`) as soon as the inputs are
    listed, before any of them is read."""

    output: str | None = None
    output_dir: str | None = None
    output_format: str | None = None
    summary_json: str | None = None

    def targets(self, parts: list[Part]) -> list[str]:
        """Where the rows go: ``[output]``, or one file per part under ``output_dir`` at its path
        below its folder or glob (:attr:`Part.relative`), with the suffix of ``output_format``
        if that differs; none without either. Names and options decide, never what a file holds."""
        if self.output_dir is None:
            return [self.output] if self.output is not None else []
        return [str(Path(self.output_dir) / _renamed(part.relative, self.output_format)) for part in parts]

    def check(self, parts: list[Part], folders: tuple[Path, ...]) -> None:
        """Refuse what the run cannot write, given the input files as listed (``parts``, not
        yet read; ``-``: stdin) and the folder inputs: a URI, a missing folder, an unknown
        format, an ``output_dir`` that is a file (or given with stdin), two inputs written to
        one file, and each path that :func:`_check_written` refuses."""
        if self.output is not None and self.output_dir is not None:
            raise UsageError("pass either `output` or `output_dir`, not both")
        given = {"output": self.output, "output_dir": self.output_dir, "summary_json": self.summary_json}
        uri = next((name for name, path in given.items() if path and is_uri(path)), None)
        if uri is not None:
            raise UsageError(f"`{uri}` is a URI; outputs are written to local paths (inputs may be URIs)")
        if self.output_format is not None and self.output_format not in FORMATS:
            raise UsageError(f"unknown `output_format` {self.output_format!r} (valid: {', '.join(FORMATS)})")
        if STDIO in (self.output, self.summary_json):
            stdout()  # refused if closed
        for what, path in (("output", self.output), ("`summary_json`", self.summary_json)):
            if path not in (None, STDIO) and not Path(path).resolve().parent.is_dir():
                raise UsageError(f"{what} folder {str(Path(path).parent)!r} does not exist")
        targets = self.targets(parts)
        if self.output_dir is not None:
            if any(part.path == STDIO for part in parts):
                raise UsageError("`output_dir` needs named input files, not stdin")
            if Path(self.output_dir).exists() and not Path(self.output_dir).is_dir():
                raise UsageError(f"`output_dir` {self.output_dir!r} is a file, not a folder")
            _check_distinct(parts, targets)
        written = [("output", target) for target in targets]
        if self.summary_json is not None:
            written.append(("`summary_json`", self.summary_json))
        _check_written(parts, folders, written)


def _check_written(parts: list[Part], folders: tuple[Path, ...], written: list[tuple[str, str]]) -> None:
    """Refuse a path the run writes (``(what, path)``) that is an input file (also through a
    symlink or a hard link, or the file stdin reads), a folder, or inside a folder input (a
    later run on it would read it as input); and two that are one file, or both stdout. A
    character device (``/dev/null``, a terminal) is written through, never replaced: it may be
    named twice, and be read too."""
    inputs = {_identity(part.path) for part in parts if part.local}
    seen: dict[object, tuple[str, str]] = {}
    for what, path in written:
        device = _is_device(path)
        key = path if path == STDIO else _identity(path)
        if key in inputs and not device:
            raise UsageError(f"{what} {path!r} is an input file; choose another path")
        if path != STDIO:
            _check_target(what, path, folders)
        if key in seen and not device:
            if path == STDIO:
                raise UsageError("the rows and the summary JSON cannot both go to stdout; write `summary_json` to a file")
            raise UsageError(f"{seen[key][0]} {seen[key][1]!r} and {what} {path!r} are one file; write them to different paths")
        seen[key] = (what, path)


def _check_target(what: str, path: str, folders: tuple[Path, ...]) -> None:
    t = Path(path)
    if t.is_dir():
        hint = " (for one output per input, use `output_dir`)" if what == "output" else ""
        raise UsageError(f"{what} {path!r} is a directory{hint}")
    folder = next((f for f in folders if t.resolve().is_relative_to(f.resolve())), None)
    if folder is not None:
        raise UsageError(f"{what} {path!r} is inside input folder {str(folder)!r}, whose sub-folders are read too: "
                         "a later run would read it as input; write it outside")


def _identity(path: str) -> object:
    """What makes two paths one file: its device and inode if it exists (``-``: those of what
    stdin reads), else where it resolves to."""
    try:
        found = os.fstat(stdin().fileno()) if path == STDIO else os.stat(path)
    except OSError:
        return os.path.realpath(path)
    return found.st_dev, found.st_ino


def _is_device(path: str) -> bool:
    """Whether ``path`` (not stdout) is a character device (``/dev/null``, a terminal), after symlinks."""
    try:
        return path != STDIO and stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False


def _check_distinct(parts: list[Part], targets: list[str]) -> None:
    """Two inputs must not be written to one output file."""
    writer: dict[str, Part] = {}
    for part, target in zip(parts, targets):
        first = writer.setdefault(target, part)
        if first is not part:
            raise UsageError(f"`output_dir` would write both {first.name} and {part.name} to {target}; "
                             "run them separately, or pass the folder that holds both")


def _renamed(path: PurePath, fmt: str | None) -> PurePath:
    """``path`` with the suffix of format ``fmt`` if it has another (``None``: as it is)."""
    return path if fmt is None or format_from_name(path.name) == fmt else path.with_name(f"{path.stem}.{fmt}")


@contextlib.contextmanager
def open_source(inputs: str | list[str], input_format: str | None = None, *, hive: bool = False,
                writes: Writes = Writes()) -> Iterator[Source]:
    """Open files, folders or globs (or ``-`` for stdin) as one :class:`Source`; the format
    comes from ``input_format``, else the suffix, else the file's first bytes. With ``hive``,
    the ``key=value`` folders below a folder or glob input are columns too. Every path the run
    ``writes`` is checked as soon as the input files are listed, before any of them is read
    (:meth:`Writes.check`). Stdin, pipes and FIFOs (``<(cmd)``, ``mkfifo``) are spooled then
    (:func:`_spooled`)."""
    inputs = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    inputs = [str(i) for i in inputs]
    if input_format is not None and input_format not in FORMATS:
        raise UsageError(f"unknown `input_format` {input_format!r} (valid: {', '.join(FORMATS)})")
    if not inputs:
        raise UsageError("no input given")
    if STDIO in inputs and len(inputs) > 1:
        raise UsageError("- (stdin) cannot be combined with other inputs")
    if inputs == [STDIO]:
        name, listed = "<stdin>", [Part("<stdin>", STDIO, PurePath("<stdin>"), LOCAL)]
    else:
        listed = expand_inputs(inputs)
        name = inputs[0] if len(inputs) == 1 else f"{len(listed)} files"
    folders = tuple(Path(i) for i in inputs if i != STDIO and not is_uri(i) and Path(i).is_dir())
    writes.check(listed, folders)
    with contextlib.ExitStack() as spools:
        parts = [_spooled(spools, part) if part.local and (part.path == STDIO or _is_special(part.path)) else part for part in listed]
        yield _with_rows(Source(name, parts, _common_format(parts, input_format), hive, folders))


def _spooled(spools: contextlib.ExitStack, part: Part) -> Part:
    """``part`` (stdin, a pipe or a FIFO) copied to a temporary file that ``spools`` removes:
    both passes need the data, and a parquet footer sits at the end of the stream."""
    import tempfile  # here, not at the top: a run on named files makes no temporary file (importing it: 1.4 ms)

    spool = spools.enter_context(tempfile.NamedTemporaryFile(prefix="grpo-spool-"))
    try:
        with contextlib.nullcontext(stdin()) if part.path == STDIO else open(part.path, "rb") as stream:
            shutil.copyfileobj(stream, spool)
        spool.flush()
    except OSError as exc:
        raise InputError(f"{part.name}: cannot read ({exc.strerror or exc})") from None
    if spool.tell() == 0:
        raise InputError(f"{part.name}: empty input")
    return Part(part.name, spool.name, part.relative, LOCAL)


def stdin() -> BinaryIO:
    """Binary stdin; a closed one (``<&-``: Python found no descriptor 0 at start) is refused."""
    if sys.stdin is None:
        raise InputError("<stdin>: not open (stdin is closed); pipe the rollouts in, or name the file")
    return sys.stdin.buffer


def stdout() -> BinaryIO:
    """Binary stdout; a closed one (``>&-``: Python found no descriptor 1 at start) is refused."""
    if sys.stdout is None:
        raise OutputError("<stdout>: not open (stdout is closed); redirect it, or write to a file")
    return sys.stdout.buffer


@contextlib.contextmanager
def open_table(table: pa.Table, name: str = "<frame>", *, writes: Writes = Writes()) -> Iterator[Source]:
    """An in-memory table as a :class:`Source` named ``name``: spooled to a temporary parquet
    file (uncompressed), as stdin is, so every command reads it as it reads files; ``writes``
    are checked as :func:`open_source` checks them."""
    import tempfile

    with tempfile.NamedTemporaryFile(prefix="grpo-frame-", suffix=".parquet") as spool:
        part = Part(name, spool.name, PurePath(name), LOCAL)
        writes.check([part], ())
        pq.write_table(table, spool.name, compression="none")
        yield _with_rows(Source(name, [part], "parquet", False))


def _with_rows(source: Source) -> Source:
    """``source``, if every one of its files has rows."""
    empty = next((part for part, rows in zip(source.parts, source.row_counts) if rows == 0), None)
    if empty is not None:
        raise InputError(f"{empty.name}: no rows")
    return source


def write_jsonl(batch: pa.RecordBatch, file) -> None:
    """Write rows (as :func:`json_batch` makes them) as JSON Lines."""
    import polars as pl  # only for JSON Lines output (importing it costs ~0.15 s)

    pl.from_arrow(batch).write_ndjson(file)


def json_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with each column as :func:`json_values` makes it."""
    return pa.RecordBatch.from_arrays([json_values(column) for column in batch.columns], names=batch.schema.names)


INTERVAL_FIELDS = np.dtype([("months", "<i4"), ("days", "<i4"), ("nanoseconds", "<i8")])  # Arrow's month_day_nano layout


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
        return pa.StructArray.from_arrays([pa.array(fields[name]) for name in INTERVAL_FIELDS.names], INTERVAL_FIELDS.names,
                                          mask=_nulls(values))
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


COPY_BYTES = 1 << 20  # bytes per write when copying into stdout, a device or a FIFO


class Staged:
    """One output on its way to ``target`` (``-``: stdout), written to a temporary file first.

    A regular file (or a new one) gets its temporary file beside it (beside the file a symlink
    points to), and :meth:`commit` renames it into place: atomic, and a symlink stays, pointing
    at the new file. Stdout, a device or a FIFO gets it in the temporary folder, and
    :meth:`commit` copies it in, as ``cp`` does: such a target is never replaced. :meth:`discard`
    removes the temporary file and the folders made for the target. Given ``outputs``, it is
    held there before its temporary file exists, so an interrupt at any point leaves none.
    """

    def __init__(self, target: str, outputs: Outputs | None = None):
        self.target = target
        self.place: Path | None = None  # what the rename replaces; None: copied in
        self.tmp: Path | None = None
        self.made: list[Path] = []  # folders made for the target, deepest first
        self.copied = 0  # bytes copied in so far
        if outputs is not None:
            outputs.add(self)
        try:
            with self._os_errors():
                self._make()
                self._open()
        except BaseException:
            self.discard()
            raise

    def _make(self) -> None:
        """Make the target's folders and the temporary file, its name recorded before it exists."""
        if self.target == STDIO or _is_special(self.target):
            import tempfile

            folder = Path(tempfile.gettempdir())
        else:
            self.place = Path(os.path.realpath(self.target))
            folder = self.place.parent
            self.made = _make_folders(folder)
        self.tmp = folder / f".{Path(self.target).name}.{os.urandom(6).hex()}.tmp"  # not `secrets`: it imports hashlib, 5 ms
        os.close(os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))

    def _open(self) -> None:
        """Open the temporary file for writing (a :class:`Sink` does)."""

    @property
    def shown(self) -> str:
        """The target as messages name it."""
        return "<stdout>" if self.target == STDIO else self.target

    @contextlib.contextmanager
    def _os_errors(self) -> Iterator[None]:
        """A failing write (disk full, no permission) becomes one clear :class:`OutputError`;
        a closed pipe stays a BrokenPipeError, which the CLI ends quietly."""
        try:
            yield
        except BrokenPipeError:
            raise
        except OSError as exc:
            done = "the output is incomplete" if self.copied else "nothing was written"
            raise OutputError(f"{self.shown}: cannot write ({exc.strerror or exc}); {done}") from None

    def write_text(self, text: str) -> None:
        with self._os_errors():
            self.tmp.write_text(text)

    def close(self) -> None:
        """Finish the temporary file (the target is untouched until :meth:`commit`)."""

    def commit(self) -> None:
        """Move the finished temporary file into place (see the class)."""
        self.close()
        with self._os_errors():
            if self.place is None:
                self._copy_in()
            else:
                # the temporary file is private (0600); give it the mode a plain open() would.
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(self.tmp, 0o666 & ~umask)
                os.replace(self.tmp, self.place)
        self.made = []

    def _copy_in(self) -> None:
        """Copy the temporary file into stdout, the device or the FIFO; an interrupt once the
        copy has begun says that the output is incomplete."""
        into = stdout().fileno() if self.target == STDIO else self.target
        with open(self.tmp, "rb") as finished, open(into, "wb", buffering=0, closefd=self.target != STDIO) as out:
            try:
                while chunk := finished.read(COPY_BYTES):
                    view = memoryview(chunk)
                    while view:
                        written = out.write(view)
                        self.copied += written
                        view = view[written:]
            except Interrupted as exc:
                where = "stdout" if self.target == STDIO else self.target
                raise exc.saying(f" while copying to {where}; the output is incomplete") from None

    def discard(self) -> None:
        """Remove the temporary file and the folders made for the target (if still empty)."""
        with contextlib.suppress(Exception):
            self.close()
        if self.tmp is not None:
            self.tmp.unlink(missing_ok=True)
        for folder in self.made:
            with contextlib.suppress(OSError):
                folder.rmdir()


class Sink(Staged):
    """Writes record batches, in format ``fmt``, to a staged output (see :class:`Staged`);
    parquet as ``layout`` says (:mod:`grpo_cli.writer`), encoded on up to ``threads`` threads."""

    def __init__(self, target: str, fmt: str, schema: pa.Schema, layout: Layout = Layout(), outputs: Outputs | None = None,
                 threads: int = 1):
        self.format = fmt
        self.threads = threads
        self.schema = schema
        self.layout = layout
        self.rows = 0
        self._parquet = self._jsonl = None
        super().__init__(target, outputs)

    def _open(self) -> None:
        self._parquet = RowGroupWriter(str(self.tmp), self.schema, self.layout, self.threads) if self.format == "parquet" else None
        self._jsonl = open(self.tmp, "wb") if self.format == "jsonl" else None

    def write(self, batch: pa.RecordBatch) -> None:
        with self._os_errors():
            if self._parquet is not None:
                self._parquet.write_batch(batch)
            else:
                batch = json_batch(batch)
                self._check_json_numbers(batch)
                write_jsonl(batch, self._jsonl)
        self.rows += batch.num_rows

    def _check_json_numbers(self, batch: pa.RecordBatch) -> None:
        """JSON has no NaN or infinity: refuse them, at any depth, rather than write null in
        their place."""
        import pyarrow.compute as pc

        for name, column in zip(batch.schema.names, batch.columns):
            first: list[int] = []  # each float leaf's first row with NaN or infinity
            for _, values, rows in jsonl.leaves(column):
                if pa.types.is_floating(values.type):
                    bad = pc.invert(pc.fill_null(pc.is_finite(values), True)).to_numpy(zero_copy_only=False)
                    first += rows(np.flatnonzero(bad)[:1]).tolist()
            if first:
                raise InputError(f"{self.target}: row {self.rows + min(first)}: column {name!r} holds NaN or infinity, "
                                 "which JSON Lines cannot hold; write parquet instead")

    def close(self) -> None:
        writer, handle, self._parquet, self._jsonl = self._parquet, self._jsonl, None, None
        with self._os_errors():
            if writer is not None:
                writer.close()
            if handle is not None:
                handle.close()


class Outputs:
    """Every file a run writes, committed together. Each is staged first (:class:`Staged`,
    :class:`Sink`); :meth:`commit` copies the streamed ones in first (stdout, devices, FIFOs:
    a full disk or a closed pipe can stop them half-way), then renames the others into place,
    so a copy that fails leaves every file target as it was.

    Use as a context manager: leaving it removes every temporary file, and an interrupt that
    came before the commit began says that no output was written.
    """

    def __init__(self) -> None:
        self.staged: list[Staged] = []
        self.committing = False

    def add(self, staged: Staged) -> None:
        self.staged.append(staged)

    def commit(self) -> None:
        self.committing = True  # from here on, an interrupt never says that nothing was written
        for done, staged in enumerate(sorted(self.staged, key=lambda s: s.place is not None)):
            try:
                staged.commit()
            except Interrupted as exc:
                if done:
                    raise exc.saying(" while moving the outputs into place; the output is incomplete") from None
                raise

    def __enter__(self) -> Outputs:
        self.committing = False
        return self

    def __exit__(self, kind, exc, traceback) -> None:
        staged, self.staged = self.staged, []
        for s in reversed(staged):  # the last first: the folders an earlier one made are empty by then
            s.discard()
        if isinstance(exc, Interrupted) and not self.committing:
            raise exc.saying("; no output written") from None


def _is_special(path: str) -> bool:
    """Whether ``path`` is a pipe, a FIFO, a device or a socket (after symlinks): read once,
    in order, as an input; written into, never replaced, as an output."""
    return os.path.exists(path) and not (os.path.isfile(path) or os.path.isdir(path))


def _make_folders(folder: Path) -> list[Path]:
    """Make ``folder`` and its missing parents; return those made, deepest first."""
    missing = list(itertools.takewhile(lambda f: not f.exists(), (folder, *folder.parents)))
    for f in reversed(missing):
        f.mkdir(exist_ok=True)
    return missing
