"""Readers and writers: parquet and JSON Lines, files, folders, globs or stdin/stdout.

A :class:`Source` is one or more files read as one dataset, in order. Sources are read
twice at most: once for the small columns (ids, rewards), then streamed by record batch.
Stdin is spooled to a temporary file first, because both passes need it and a parquet
footer sits at the end of the stream. Output goes to a temporary file beside the target
and is renamed into place only when the whole run succeeded.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import jsonl
from .parallel import default_threads, ordered_map
from .errors import InputError, OutputError, UsageError
from .schema import check_unique_names

FORMATS = ("parquet", "jsonl")
SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl"}
STDIO = "-"
BATCH_BYTES = 32 << 20  # uncompressed bytes per record batch when streaming
BATCH_ROWS = (1_024, 65_536)  # bounds on rows per batch
PARQUET_MAGIC = b"PAR1"
GLOB_CHARS = frozenset("*?[")


def format_from_name(path: str) -> str | None:
    """``parquet`` or ``jsonl`` from a file name's suffix, else None."""
    return SUFFIXES.get(Path(path).suffix.lower())


def _sniff(path: Path) -> str:
    with open(path, "rb") as f:
        head = f.read(4)
    return "parquet" if head == PARQUET_MAGIC else "jsonl"


@dataclass(frozen=True)
class Part:
    """One file of a source: the name messages use, and where it is."""

    name: str
    path: Path


@dataclass
class Source:
    """Rollout files read as one dataset, in order: a display name, the files, their format."""

    name: str
    parts: list[Part]
    format: str

    @cached_property
    def schema(self) -> pa.Schema:
        """The columns every part holds (parts must agree; JSON Lines types are unified;
        names must be unique)."""
        if self.format == "jsonl":
            return self._jsonl_scans[-1][0]
        first, *rest = [(part, meta.schema.to_arrow_schema()) for part, meta in zip(self.parts, self._parquet_metadata)]
        for part, schema in rest:
            if not schema.equals(first[1]):
                raise InputError(f"{part.name}: columns differ from {first[0].name} ({_schema_difference(first[1], schema)})")
        check_unique_names(first[1], first[0].name)
        return first[1]

    @cached_property
    def row_counts(self) -> np.ndarray:
        """Rows in each part."""
        if self.format == "jsonl":
            return np.array([rows for _, rows in self._jsonl_scans], dtype=np.int64)
        return np.array([meta.num_rows for meta in self._parquet_metadata], dtype=np.int64)

    @cached_property
    def _parquet_metadata(self) -> list[pq.FileMetaData]:
        """Each part's footer, read once (schema and row count both come from it)."""
        return [self._guard(part, lambda: pq.read_metadata(part.path)) for part in self.parts]

    @cached_property
    def _row_groups(self) -> list[pq.RowGroupMetaData]:
        """Every parquet row group of every part, in order."""
        return [meta.row_group(i) for meta in self._parquet_metadata for i in range(meta.num_row_groups)]

    @cached_property
    def batch_rows(self) -> int:
        """Rows per streamed batch: about :data:`BATCH_BYTES` of uncompressed data (from the
        parquet footers, or the JSON Lines text size), within :data:`BATCH_ROWS`."""
        if self.format == "parquet":
            size = sum(group.total_byte_size for group in self._row_groups)
        else:
            size = sum(part.path.stat().st_size for part in self.parts)
        per_row = max(1, size // max(1, int(self.row_counts.sum())))
        return int(np.clip(BATCH_BYTES // per_row, *BATCH_ROWS))

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
        """The named columns of every row, as one table."""
        if self.format == "parquet":
            return pa.concat_tables([self._guard(part, lambda: pq.ParquetFile(part.path).read(columns=columns)) for part in self.parts])
        schema = pa.schema([self.schema.field(c) for c in columns])
        return pa.Table.from_batches([batch for _, batch in self.iter_batches(1 << 20, columns)], schema=schema)

    def iter_batches(self, batch_rows: int, columns: list[str] | None = None) -> Iterator[tuple[int, pa.RecordBatch]]:
        """``(part index, batch)``: ``columns`` (default: all), at most ``batch_rows`` rows per
        batch, in file order. A batch never spans two files."""
        for k, part in enumerate(self.parts):
            if self.format == "parquet":
                yield from ((k, b) for b in self._parquet_batches(part, batch_rows, columns))
            else:
                yield from ((k, b) for b in self._jsonl_batches(part, batch_rows, columns))

    def _parquet_batches(self, part: Part, batch_rows: int, columns: list[str] | None) -> Iterator[pa.RecordBatch]:
        batches = self._guard(part, lambda: pq.ParquetFile(part.path, pre_buffer=False).iter_batches(batch_size=batch_rows, columns=columns))
        while (batch := self._guard(part, lambda: next(batches, None))) is not None:
            yield batch

    def _jsonl_batches(self, part: Part, batch_rows: int, columns: list[str] | None) -> Iterator[pa.RecordBatch]:
        schema = self.schema if columns is None else pa.schema([self.schema.field(c) for c in columns])

        def parse(item: tuple[int, bytes]) -> pa.Table:
            return jsonl.parse_chunk(item[1], item[0], part.name, schema)

        for table in ordered_map(parse, jsonl.line_chunks(part.path), default_threads()):
            yield from table.to_batches(max_chunksize=batch_rows)

    @cached_property
    def _jsonl_scans(self) -> list[tuple[pa.Schema, int]]:
        """Per part: (schema unified over the parts so far, rows of the part)."""
        scans, schema = [], pa.schema([])
        for part in self.parts:
            found = self._guard(part, lambda: jsonl.scan(part.path, part.name))
            try:
                schema = pa.unify_schemas([schema, found.schema], promote_options="permissive")
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise InputError(f"{part.name}: column types differ from the files before it ({_first_line(exc)})") from None
            scans.append((schema, found.rows))
        return scans

    def _guard(self, part: Part, read):
        try:
            return read()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
            raise InputError(f"{part.name}: not a readable {self.format} file ({_first_line(exc)})") from None


def _schema_difference(a: pa.Schema, b: pa.Schema) -> str:
    if a.names != b.names:
        return f"columns {a.names} vs {b.names}"
    field = next(x for x, y in zip(a, b) if not x.equals(y))
    return f"column {field.name!r} is {field.type} vs {b.field(field.name).type}"


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def expand_inputs(inputs: list[str]) -> list[Part]:
    """The files that ``inputs`` name: files as given, a folder's rollout files (sorted by
    name), or a glob pattern's matches (sorted). Each must be a readable, non-empty file."""
    parts: list[Part] = []
    for given in inputs:
        p = Path(given)
        if p.is_dir():
            found = sorted(q for q in p.iterdir() if q.is_file() and format_from_name(q.name))
            if not found:
                raise InputError(f"{given}: is a directory with no {', '.join(SUFFIXES)} files")
            parts += [Part(str(q), q) for q in found]
        elif not p.exists() and GLOB_CHARS & set(given):
            found = sorted(Path(q) for q in glob.glob(given) if Path(q).is_file())
            if not found:
                raise InputError(f"{given}: no files match")
            parts += [Part(str(q), q) for q in found]
        else:
            parts.append(Part(given, p))
    for part in parts:
        _check_readable(part)
    return parts


def _check_readable(part: Part) -> None:
    if not part.path.exists():
        raise InputError(f"{part.name}: no such file")
    if part.path.is_dir():
        raise InputError(f"{part.name}: is a directory, expected a file")
    if not os.access(part.path, os.R_OK):
        raise InputError(f"{part.name}: permission denied")
    if part.path.stat().st_size == 0:
        raise InputError(f"{part.name}: empty file")


def _common_format(parts: list[Part], input_format: str | None) -> str:
    if input_format is not None:
        return input_format
    formats = {part.name: format_from_name(part.name) or _sniff(part.path) for part in parts}
    if len(set(formats.values())) > 1:
        first = {fmt: name for name, fmt in reversed(formats.items())}
        mixed = " but ".join(f"{name} is {fmt}" for fmt, name in first.items())
        raise UsageError(f"inputs mix formats: {mixed}; convert them to one format")
    return next(iter(formats.values()))


@contextlib.contextmanager
def open_source(inputs: str | list[str], input_format: str | None = None) -> Iterator[Source]:
    """Open files, folders or globs (or ``-`` for stdin) as one :class:`Source`; the format
    comes from ``input_format``, else the suffix, else the file's first bytes."""
    inputs = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    inputs = [str(i) for i in inputs]
    if input_format is not None and input_format not in FORMATS:
        raise UsageError(f"unknown `input_format` {input_format!r} (valid: {', '.join(FORMATS)})")
    if not inputs:
        raise UsageError("no input given")
    if STDIO in inputs:
        if len(inputs) > 1:
            raise UsageError("- (stdin) cannot be combined with other inputs")
        with tempfile.NamedTemporaryFile(prefix="grpo-stdin-") as spool:
            shutil.copyfileobj(sys.stdin.buffer, spool)
            spool.flush()
            part = Part("<stdin>", Path(spool.name))
            if part.path.stat().st_size == 0:
                raise InputError("<stdin>: empty input")
            yield _with_rows(Source(part.name, [part], input_format or _sniff(part.path)))
        return
    parts = expand_inputs(inputs)
    name = inputs[0] if len(inputs) == 1 else f"{len(parts)} files"
    yield _with_rows(Source(name, parts, _common_format(parts, input_format)))


def _with_rows(source: Source) -> Source:
    if not source.row_counts.sum():
        raise InputError(f"{source.name}: no rows")
    return source


def write_jsonl(batch: pa.RecordBatch | pa.Table, file) -> None:
    """Write rows as JSON Lines. float32 values (and lists of them) are written as float64:
    JSON readers parse numbers as float64, and the widened digits give back exactly the
    float32 value, so JSON Lines output computes the same numbers as the parquet it came from.
    """
    import polars as pl  # only for JSON Lines output (importing it costs ~0.15 s)

    schema = pa.schema([f.with_type(_widen_float32(f.type)) for f in batch.schema])
    pl.from_arrow(batch.cast(schema)).write_ndjson(file)


def _widen_float32(t: pa.DataType) -> pa.DataType:
    if pa.types.is_float32(t) or pa.types.is_float16(t):
        return pa.float64()
    if pa.types.is_list(t):
        return pa.list_(_widen_float32(t.value_type))
    if pa.types.is_large_list(t):
        return pa.large_list(_widen_float32(t.value_type))
    return t


class Sink:
    """Writes record batches to a temporary file, then moves it into place on :meth:`commit`.

    Use as a context manager: leaving it without a commit (an error, a signal) removes the
    temporary file, so a failed run leaves no partial output. For ``-`` the finished file is
    copied to stdout, so a failure half-way writes nothing to the pipe either.
    """

    def __init__(self, target: str, fmt: str, schema: pa.Schema):
        self.target = target
        self.format = fmt
        self.rows = 0
        self.tmp: Path | None = None
        self._parquet = self._jsonl = None
        directory = None if target == STDIO else Path(target).resolve().parent
        with self._os_errors():
            fd, tmp = tempfile.mkstemp(prefix=f".{Path(target).name}.", suffix=".tmp", dir=directory)
            os.close(fd)
            self.tmp = Path(tmp)
            try:
                self._parquet = pq.ParquetWriter(self.tmp, schema) if fmt == "parquet" else None
                self._jsonl = open(self.tmp, "wb") if fmt == "jsonl" else None
            except BaseException:
                self.tmp.unlink(missing_ok=True)
                raise

    @contextlib.contextmanager
    def _os_errors(self) -> Iterator[None]:
        """A failing write (disk full, no permission) becomes one clear :class:`OutputError`;
        a closed pipe stays a BrokenPipeError, which the CLI ends quietly."""
        try:
            yield
        except BrokenPipeError:
            raise
        except OSError as exc:
            where = "<stdout>" if self.target == STDIO else self.target
            raise OutputError(f"{where}: cannot write ({exc.strerror or exc}); nothing was written") from None

    def write(self, batch: pa.RecordBatch) -> None:
        with self._os_errors():
            if self._parquet is not None:
                self._parquet.write_batch(batch)
            else:
                self._check_json_numbers(batch)
                write_jsonl(batch, self._jsonl)
        self.rows += batch.num_rows

    def _check_json_numbers(self, batch: pa.RecordBatch) -> None:
        """JSON has no NaN or infinity: refuse them rather than write null in their place."""
        for name, column in zip(batch.schema.names, batch.columns):
            nested = pa.types.is_list(column.type) or pa.types.is_large_list(column.type)
            values = column.flatten() if nested else column
            if not pa.types.is_floating(values.type):
                continue
            bad = pc.invert(pc.fill_null(pc.is_finite(values), True)).to_numpy(zero_copy_only=False)
            if bad.any():
                token = int(np.flatnonzero(bad)[0])
                ends = np.cumsum(pc.fill_null(pc.list_value_length(column), 0).to_numpy()) if nested else None
                row = int(np.searchsorted(ends, token, side="right")) if nested else token
                raise InputError(
                    f"{self.target}: row {self.rows + row}: column {name!r} holds NaN or infinity, "
                    "which JSON Lines cannot hold; write parquet instead"
                )

    def close(self) -> None:
        """Finish the temporary file (the target is untouched until :meth:`commit`)."""
        writer, handle, self._parquet, self._jsonl = self._parquet, self._jsonl, None, None
        with self._os_errors():
            if writer is not None:
                writer.close()
            if handle is not None:
                handle.close()

    def commit(self) -> None:
        self.close()
        with self._os_errors():
            if self.target == STDIO:
                with open(self.tmp, "rb") as f:
                    shutil.copyfileobj(f, sys.stdout.buffer)
                sys.stdout.buffer.flush()
            else:
                # mkstemp makes the file private (0600); give it the mode a plain open() would.
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(self.tmp, 0o666 & ~umask)
                os.replace(self.tmp, self.target)

    def __enter__(self) -> "Sink":
        return self

    def __exit__(self, *exc) -> None:
        with contextlib.suppress(Exception):
            self.close()
        if self.tmp is not None:
            self.tmp.unlink(missing_ok=True)


def resolve_output_format(target: str, explicit: str | None, input_format: str) -> str:
    """The output format: ``explicit``, else the target's suffix, else the input's format."""
    if explicit is not None:
        if explicit not in FORMATS:
            raise UsageError(f"unknown `output_format` {explicit!r} (valid: {', '.join(FORMATS)})")
        return explicit
    if target == STDIO:
        return input_format
    fmt = format_from_name(target)
    if fmt is None:
        raise UsageError(f"cannot tell the format of {target!r} from its name; pass `output_format`")
    return fmt


def check_target(target: str, source: Source) -> None:
    """Refuse to overwrite an input file, or to write into a missing folder."""
    if target == STDIO:
        return
    t = Path(target)
    if t.exists() and any(os.path.samefile(part.path, t) for part in source.parts):
        raise UsageError(f"output {target!r} is an input file; choose another path")
    if t.is_dir():
        raise UsageError(f"output {target!r} is a directory (for one output per input, use `output_dir`)")
    if not t.resolve().parent.is_dir():
        raise UsageError(f"output folder {str(t.parent)!r} does not exist")


def output_targets(source: Source, output: str | None, output_dir: str | None, fmt_option: str | None) -> tuple[list[str], str]:
    """Where the annotated rows go, and in which format: ``[output]``, or one file per input
    in ``output_dir`` with the input's name (its suffix changed if the format is)."""
    if output is not None and output_dir is not None:
        raise UsageError("pass either `output` or `output_dir`, not both")
    if output_dir is None:
        targets = [output] if output is not None else []
        fmt = resolve_output_format(output, fmt_option, source.format) if output is not None else source.format
    else:
        if source.name == "<stdin>":
            raise UsageError("`output_dir` needs named input files, not stdin")
        if not Path(output_dir).is_dir():
            raise UsageError(f"output folder {output_dir!r} does not exist")
        fmt = fmt_option or source.format
        targets = [str(Path(output_dir) / _renamed(part.path.name, fmt)) for part in source.parts]
        if len(set(targets)) < len(targets):
            raise UsageError("two inputs have the same file name; `output_dir` would write both to one file")
    for target in targets:
        check_target(target, source)
    return targets, fmt


def _renamed(name: str, fmt: str) -> str:
    return name if format_from_name(name) == fmt else f"{Path(name).stem}.{fmt}"
