"""Readers and writers: parquet and JSON Lines, files or stdin/stdout, atomic output.

Sources are read twice at most: once for the small columns (ids, rewards), then streamed
by record batch. Stdin is spooled to a temporary file first, because both passes need it
and a parquet footer sits at the end of the stream.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import polars as pl
import pyarrow as pa
import pyarrow.json as pajson
import pyarrow.parquet as pq

from .errors import InputError, UsageError

FORMATS = ("parquet", "jsonl")
SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl"}
STDIO = "-"
PARQUET_MAGIC = b"PAR1"


def format_from_name(path: str) -> str | None:
    """``parquet`` or ``jsonl`` from a file name's suffix, else None."""
    return SUFFIXES.get(Path(path).suffix.lower())


def _sniff(path: Path) -> str:
    with open(path, "rb") as f:
        head = f.read(4)
    return "parquet" if head == PARQUET_MAGIC else "jsonl"


@dataclass
class Source:
    """A readable rollout file: its display name, local path and format."""

    name: str
    path: Path
    format: str
    _table: pa.Table | None = field(default=None, repr=False)

    @property
    def schema(self) -> pa.Schema:
        if self.format == "parquet":
            return self._parquet().schema_arrow
        return self._jsonl().schema

    def read_columns(self, columns: list[str]) -> pa.Table:
        """The named columns of every row, as one table."""
        if self.format == "parquet":
            return self._guard(lambda: pq.read_table(self.path, columns=columns, pre_buffer=False))
        return self._jsonl().select(columns)

    def iter_batches(self, batch_rows: int, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
        """``columns`` (default: all), ``batch_rows`` rows at a time, in file order."""
        if self.format == "parquet":
            batches = self._parquet().iter_batches(batch_size=batch_rows, columns=columns)
            while True:
                batch = self._guard(lambda: next(batches, None))
                if batch is None:
                    return
                yield batch
        else:
            table = self._jsonl()
            yield from (table if columns is None else table.select(columns)).to_batches(max_chunksize=batch_rows)

    def _parquet(self) -> pq.ParquetFile:
        return self._guard(lambda: pq.ParquetFile(self.path, pre_buffer=False))

    def _jsonl(self) -> pa.Table:
        if self._table is None:
            self._table = self._guard(lambda: pajson.read_json(self.path))
        return self._table

    def _guard(self, read):
        try:
            return read()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
            raise InputError(f"{self.name}: not a readable {self.format} file ({_first_line(exc)})") from exc


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


@contextlib.contextmanager
def open_source(path: str, input_format: str | None = None) -> Iterator[Source]:
    """Open ``path`` (or ``-`` for stdin) as a :class:`Source`; the format comes from
    ``input_format``, else the suffix, else the file's first bytes (parquet's magic)."""
    if input_format is not None and input_format not in FORMATS:
        raise UsageError(f"unknown `input_format` {input_format!r} (valid: {', '.join(FORMATS)})")
    if path == STDIO:
        with tempfile.NamedTemporaryFile(prefix="grpo-stdin-") as spool:
            shutil.copyfileobj(sys.stdin.buffer, spool)
            spool.flush()
            spooled = Path(spool.name)
            yield Source("<stdin>", spooled, input_format or _sniff(spooled))
        return
    p = Path(path)
    if not p.exists():
        raise InputError(f"{path}: no such file")
    if p.is_dir():
        raise InputError(f"{path}: is a directory, expected a file")
    if not os.access(p, os.R_OK):
        raise InputError(f"{path}: permission denied")
    if p.stat().st_size == 0:
        raise InputError(f"{path}: empty file")
    yield Source(path, p, input_format or format_from_name(path) or _sniff(p))


class Sink:
    """Writes record batches to a temporary file, then moves it into place on :meth:`commit`.

    Use as a context manager: leaving it without a commit (an error, a signal) removes the
    temporary file, so a failed run leaves no partial output. For ``-`` the finished file is
    copied to stdout, so a failure half-way writes nothing to the pipe either.
    """

    def __init__(self, target: str, fmt: str, schema: pa.Schema):
        self.target = target
        self.format = fmt
        directory = None if target == STDIO else Path(target).resolve().parent
        fd, tmp = tempfile.mkstemp(prefix=f".{Path(target).name}.", suffix=".tmp", dir=directory)
        os.close(fd)
        self.tmp = Path(tmp)
        self._parquet = pq.ParquetWriter(self.tmp, schema) if fmt == "parquet" else None
        self._jsonl = open(self.tmp, "wb") if fmt == "jsonl" else None

    def write(self, batch: pa.RecordBatch) -> None:
        if self._parquet is not None:
            self._parquet.write_batch(batch)
        else:
            pl.from_arrow(batch).write_ndjson(self._jsonl)

    def _close(self) -> None:
        if self._parquet is not None:
            self._parquet.close()
        if self._jsonl is not None:
            self._jsonl.close()

    def commit(self) -> None:
        self._close()
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
            self._close()
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
        raise UsageError(f"cannot tell the format of {target!r} from its name; pass --output-format")
    return fmt


def check_target(target: str, source: str) -> None:
    """Refuse to overwrite the input file ``source``, or to write into a missing folder."""
    if target == STDIO:
        return
    t = Path(target)
    if t.exists() and os.path.samefile(source, t):
        raise UsageError(f"output {target!r} is the input file; choose another path")
    if not t.resolve().parent.is_dir():
        raise UsageError(f"output folder {str(t.parent)!r} does not exist")
    if t.is_dir():
        raise UsageError(f"output {target!r} is a directory")
