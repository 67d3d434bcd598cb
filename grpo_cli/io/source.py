"""Sources: rollouts read as one dataset, in order, whatever holds them (files in one of the
:mod:`~grpo_cli.io.formats`, or Arrow data in memory, :mod:`~grpo_cli.io.memory`).

A :class:`Source` is read twice at most: once for the small columns (ids, rewards), then
streamed by record batch. Its parts may differ in ways that do not matter (see
:mod:`~grpo_cli.io.unify`).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path, PurePath
from typing import Iterator

import numpy as np
import pyarrow as pa

from ..errors import ColumnNotFoundError, InputError, RowError, UsageError
from ..schema import check_unique_names, contiguous
from . import formats
from .discovery import LOCAL, STDIO, Part, expand_inputs, is_special, is_uri, spooled
from .formats import Reader, Scan
from .parquet_writer import Layout, layout
from .unify import Data, conform, typed, unified_columns
from .writes import Writes

BATCH_BYTES = 32 << 20  # uncompressed bytes per record batch when streaming (half that when the rows are written)
IN_FLIGHT_BYTES = 128 << 20  # uncompressed bytes of the batches a run's threads work on at once
BATCH_ROWS = (1, 1 << 20)  # bounds on rows per batch (rows of a long response's tokens: a few a batch)


@dataclass
class Source:
    """Rollouts read as one dataset, in order: a display name, the parts (files), their format
    (its name; :attr:`reader` reads them). With ``hive``, each file's partition folders are
    columns too. ``folders``: the folder inputs (read with their sub-folders)."""

    name: str
    parts: list[Part]
    format: str
    hive: bool = False
    folders: tuple[Path, ...] = ()
    reader: Reader = field(default=None, repr=False)  # type: ignore[assignment]  # default: the format's

    def __post_init__(self) -> None:
        if self.reader is None:
            self.reader = formats.named(self.format)

    def __getstate__(self) -> dict:
        """What names the files, not what was read of them (footers do not pickle): a copy
        sent to another process reads them again where it is used."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @cached_property
    def scans(self) -> list[Scan]:
        """What each part holds, learnt once (see :class:`~grpo_cli.io.formats.Scan`); each
        file's fingerprint is taken first, so a change while it is read is seen too."""
        self.fingerprints  # noqa: B018  (taken now, before the first read)
        return self.reader.scans(self.parts)

    @cached_property
    def fingerprints(self) -> list[tuple | None]:
        """Each file's size, modification time and identity when the run first read it (a
        part in memory has none)."""
        return [_fingerprint(part) for part in self.parts]

    def check_unchanged(self, k: int) -> None:
        """Refuse part ``k`` if it changed since the run first read it: a later pass would pair
        its rows with what the first pass read of the old file."""
        if self.fingerprints[k] is not None and _fingerprint(self.parts[k]) != self.fingerprints[k]:
            raise InputError(f"{self.parts[k].name}: changed while this run read it (its size, time or identity); rerun once it is written")

    @cached_property
    def stored_schemas(self) -> list[pa.Schema]:
        """Each part's columns as its file stores them (names must be unique)."""
        schemas = [scan.schema for scan in self.scans]
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
            raise UsageError("`hive` reads the key=value folders below a folder or glob input as columns, and no input file is in one; drop `hive`")
        typed_values = {key: typed(pa.array([values.get(key) for values in found], pa.string())) for key in keys}
        return [{key: typed_values[key][k] for key in values} for k, values in enumerate(found)]

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
        """Each column of any part (partition columns last), unified (see
        :func:`~grpo_cli.io.unify.unified_columns`)."""
        return unified_columns(self.parts, self.part_schemas, {key for partitions in self.partitions for key in partitions})

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
        return np.array([scan.rows for scan in self.scans], dtype=np.int64)

    @cached_property
    def bytes_per_row(self) -> int:
        """Bytes per row once read (parquet: from the footers, strings stored with a dictionary
        counted in full, see :func:`~grpo_cli.io.formats.parquet.group_bytes`; JSON Lines: the
        text's size)."""
        return max(1, sum(scan.nbytes for scan in self.scans) // max(1, int(self.row_counts.sum())))

    def batch_rows(self, threads: int = 1, *, written: bool = False) -> int:
        """Rows per streamed batch: about :data:`BATCH_BYTES` of uncompressed data (half that if
        the rows are ``written``: the writer holds row groups besides), less where ``threads``
        batches at once would hold more than :data:`IN_FLIGHT_BYTES`, within :data:`BATCH_ROWS`."""
        batch_bytes = BATCH_BYTES // 2 if written else BATCH_BYTES
        return int(np.clip(min(batch_bytes, IN_FLIGHT_BYTES // threads) // self.bytes_per_row, *BATCH_ROWS))

    def layout(self, compression: str | None = None) -> Layout:
        """How parquet output of these rows is written: ``compression``, else the codec of the
        first input's first column; row groups as large as the inputs' largest (see
        :mod:`grpo_cli.io.parquet_writer`)."""
        largest = max((scan.row_group_rows for scan in self.scans if scan.row_group_rows is not None), default=None)
        return layout(compression, self.scans[0].codec, largest, self.bytes_per_row)

    @cached_property
    def pieces(self) -> tuple[str, np.ndarray]:
        """What the data is stored in, for progress (parquet: row groups; JSON Lines: files),
        and where each piece ends (cumulative rows)."""
        return self.reader.piece, np.cumsum([rows for scan in self.scans for rows in scan.pieces])

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
        self.check_unchanged(k)
        try:
            table = self._with_partitions(k, self.reader.read(self.parts[k], self._stored(k, columns)), columns)
            return conform(table, self.read_schema(columns), self.parts[k].name)
        except RowError as exc:
            raise RowError(int(self.row_counts[:k].sum()) + exc.row, exc.detail) from None

    def iter_batches(
        self, batch_rows: int, columns: list[str] | None = None, only: int | None = None, held: pa.Table | None = None, threads: int = 1
    ) -> Iterator[tuple[int, pa.RecordBatch]]:
        """``(part index, batch)``: ``columns`` (default: all), at most ``batch_rows`` rows per
        batch, in file order (``only``: of that part alone), read on up to ``threads`` threads
        where the format can; a batch never spans two files. A batch holds its part's columns
        as stored, partition columns last (:func:`conform` gives them the unified types); every
        part must hold ``columns``.

        ``held``: columns of every row already in memory (a first pass's ids and rewards, in
        their unified types). A part that stores one of them in that type takes it from there
        rather than reading it again; a part with nothing else to read is not opened."""
        if columns is not None:
            self.read_schema(columns)
        starts = np.cumsum(self.row_counts) - self.row_counts
        for k, part in enumerate(self.parts):
            if only is not None and k != only:
                continue
            self.check_unchanged(k)
            stored = self._stored(k, columns)
            kept = [f.name for f in stored if held is not None and f.name in held.column_names and held.schema.field(f.name).type.equals(f.type)]
            read = pa.schema([f for f in stored if f.name not in kept])
            if not kept or held is None:
                batches = self.reader.batches(part, batch_rows, read, threads)
            else:
                rows = held.select(kept).slice(int(starts[k]), int(self.row_counts[k]))
                batches = _with_held(self.reader.batches(part, batch_rows, read, threads) if len(read) else None, rows, stored, batch_rows)
            yield from ((k, self._with_partitions(k, batch, columns)) for batch in batches)

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


def _fingerprint(part: Part) -> tuple | None:
    """A file's size, modification time and identity (device and inode where local); ``None``
    for data in memory or a stream read once."""
    if part.filesystem is None:
        return None
    if part.local:
        try:
            st = os.stat(part.path)
        except OSError:
            return ("gone",)
        return st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino
    info = part.files.get_file_info(part.path)
    return info.size, info.mtime_ns


def _with_held(read: Iterator[pa.RecordBatch] | None, held: pa.Table, schema: pa.Schema, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """Batches with ``schema``'s columns: those ``read``, the others sliced from ``held`` (the
    same rows, in order); with nothing ``read``, ``held`` alone in batches of ``batch_rows``."""
    start = 0
    for batch in read if read is not None else [None] * -(-held.num_rows // batch_rows):
        size = batch.num_rows if batch is not None else min(batch_rows, held.num_rows - start)
        rows, start = held.slice(start, size), start + size
        yield pa.RecordBatch.from_arrays(
            [batch.column(f.name) if batch is not None and f.name in batch.schema.names else contiguous(rows.column(f.name)) for f in schema],
            schema=schema,
        )


@contextlib.contextmanager
def open_source(inputs: str | list[str], input_format: str | None = None, *, hive: bool = False, writes: Writes = Writes()) -> Iterator[Source]:
    """Open files, folders or globs (or ``-`` for stdin) as one :class:`Source`; the format
    comes from ``input_format``, else the suffix, else the file's first bytes. With ``hive``,
    the ``key=value`` folders below a folder or glob input are columns too. Every path the run
    ``writes`` is checked as soon as the input files are listed, before any of them is read
    (:meth:`Writes.check`). Stdin, pipes and FIFOs (``<(cmd)``, ``mkfifo``) are spooled then
    (:func:`~grpo_cli.io.discovery.spooled`)."""
    inputs = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    inputs = [str(i) for i in inputs]
    formats.check_name(input_format, "input_format")
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
        parts = [spooled(spools, part) if part.local and (part.path == STDIO or is_special(part.path)) else part for part in listed]
        yield with_rows(Source(name, parts, _common_format(parts, input_format), hive, folders))


def _common_format(parts: list[Part], input_format: str | None) -> str:
    if input_format is not None:
        return input_format
    found = {part.name: formats.detect(part) for part in parts}
    if len(set(found.values())) > 1:
        first = {fmt: name for name, fmt in reversed(found.items())}
        mixed = " but ".join(f"{name} is {fmt}" for fmt, name in first.items())
        raise UsageError(f"inputs mix formats: {mixed}; convert them to one format")
    return next(iter(found.values()))


def with_rows(source: Source) -> Source:
    """``source``, if every one of its parts has rows."""
    empty = next((part for part, rows in zip(source.parts, source.row_counts) if rows == 0), None)
    if empty is not None:
        raise InputError(f"{empty.name}: no rows")
    return source
