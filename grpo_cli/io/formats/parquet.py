"""Parquet: footers for the schema and row counts, record batches streamed by pyarrow, output by
:class:`~grpo_cli.io.parquet_writer.RowGroupWriter`. A page that carries a CRC32 checksum
(written with pyarrow's ``write_page_checksum=True``, or Spark's, DuckDB's) is verified as it
is read; a page without one is read as it is."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Callable, Iterator, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from ...errors import InputError
from ...parallel import at_once, default_threads, ordered_map, runs
from ..parquet_writer import Layout, RowGroupWriter, leaf_count
from . import Format, Scan

if TYPE_CHECKING:
    from ..discovery import Part

MAGIC = b"PAR1"
STREAM_BUFFER_BYTES = 1 << 20  # a streamed local file is read a buffer at a time, never a whole column chunk
READ_BYTES_PER_THREAD = 32 << 20  # uncompressed bytes of the row groups read at once, per thread
READ_BYTES = 128 << 20  # ... and in all, whatever the threads
PROBE_ROWS = 1_024  # rows decoded to learn the size of strings stored with a dictionary (see plain_extra)
CHECKSUM_FAILED = "CRC checksum verification failed"  # pyarrow's message for a page whose checksum does not match

T = TypeVar("T")


class Parquet(Format):
    name = title = "parquet"
    suffixes = (".parquet", ".pq")
    piece = "row groups"
    order = 0
    binary = True

    def sniff(self, head: bytes) -> bool:
        return head.startswith(MAGIC)

    def scan(self, part: Part) -> Scan:
        """From the footer: the schema, the rows of each row group and their bytes once read
        (:func:`group_bytes`)."""
        meta = pq.read_metadata(part.path, filesystem=part.filesystem)
        groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
        codec = groups[0].column(0).compression.lower() if groups and groups[0].num_columns else None
        pieces = tuple(group.num_rows for group in groups)
        return Scan(meta.schema.to_arrow_schema(), meta.num_rows, pieces, sum(group_bytes(part, meta)), codec, max(pieces, default=None))

    def scans(self, parts: list[Part]) -> list[Scan]:
        """The footers, read on threads (object storage answers each after a round trip)."""
        return list(ordered_map(lambda part: self.guarded(part, partial(self.scan, part)), parts, default_threads()))

    def guarded(self, part: Part, read: Callable[[], T]) -> T:
        """``read()`` as every format's (:meth:`Reader.guarded`), and a page whose checksum
        does not match in one line naming its row group and column."""
        return super().guarded(part, partial(_verified, part, read))

    def read(self, part: Part, columns: pa.Schema) -> pa.Table:
        """Read whole. Local files are read without pre-buffering (faster); object storage
        with it (fewer requests)."""
        return self.guarded(part, lambda: _file(part).read(columns=columns.names))

    def batches(self, part: Part, batch_rows: int, columns: pa.Schema, threads: int = 1) -> Iterator[pa.RecordBatch]:
        """In order. A local file's row groups are cut, in order, into runs of about
        ``batch_rows`` rows (a larger row group a run of its own: :func:`~grpo_cli.parallel.runs`);
        where two or more runs fit in ``threads`` times :data:`READ_BYTES_PER_THREAD`, at most
        :data:`READ_BYTES` (uncompressed), that many are read at once, each on a thread of its
        own, its batches spanning its row groups; else the file is streamed. Either way a local
        file is read through a buffer of :data:`STREAM_BUFFER_BYTES` per column: memory holds
        the batches, not each row group's column chunks (a row group can be larger than memory)."""
        return self.guarded_batches(part, lambda: _batches(part, batch_rows, columns.names, threads))

    def writer(self, path: str, target: str, schema: pa.Schema, layout: Layout, threads: int) -> RowGroupWriter:
        return RowGroupWriter(path, schema, layout, threads)


def _file(part: Part, buffer_size: int = 0, metadata: pq.FileMetaData | None = None) -> pq.ParquetFile:
    """``part`` opened (with its footer ``metadata`` if already read); a local file read
    through ``buffer_size`` bytes per column (0: each column chunk at once), object storage
    pre-buffered (its reads coalesced)."""
    local = part.local
    return pq.ParquetFile(
        part.path,
        metadata=metadata,
        filesystem=part.filesystem,
        pre_buffer=not local,
        buffer_size=buffer_size if local else 0,
        page_checksum_verification=True,
    )


def _batches(part: Part, batch_rows: int, names: list[str], threads: int) -> Iterator[pa.RecordBatch]:
    """The batches of :meth:`Parquet.batches`: runs of row groups read at once, or streamed
    (object storage is streamed, its row groups not sized: that would read its first rows).
    A run rather than a row group a thread: a file's small row groups would each be a batch,
    and a Python call, of their own (tried.csv)."""
    file = _file(part, STREAM_BUFFER_BYTES)
    meta = file.metadata
    at, cut = 1, []
    if part.local:
        rows = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        cut, sizes = runs(rows, -(-sum(rows) // batch_rows)), group_bytes(part, meta, names)
        largest = max((sum(sizes[g] for g in run) for run in cut), default=0)
        at = min(len(cut), at_once(threads, largest, READ_BYTES_PER_THREAD, READ_BYTES))
    if at <= 1:
        return file.iter_batches(batch_size=batch_rows, columns=names)

    def read(run: list[int]) -> list[pa.RecordBatch]:
        return list(_file(part, STREAM_BUFFER_BYTES, meta).iter_batches(batch_size=batch_rows, row_groups=run, columns=names))

    return (batch for batches in ordered_map(read, cut, at) for batch in batches)


def group_bytes(part: Part, meta: pq.FileMetaData, names: list[str] | None = None) -> list[int]:
    """Each row group's bytes once read: the footer's uncompressed bytes (of every column,
    whatever ``names`` reads), and :func:`plain_extra` per row for its columns among ``names``
    (default: all)."""
    extra = plain_extra(part, meta, names)
    groups = (meta.row_group(g) for g in range(meta.num_row_groups))
    return [group.total_byte_size + extra * group.num_rows for group in groups]


def plain_extra(part: Part, meta: pq.FileMetaData, names: list[str] | None = None) -> int:
    """Bytes per row that the footer's uncompressed sizes miss in the columns ``names``
    (default: all). A string or binary leaf stored with a dictionary counts each distinct
    value once there, but is read with every row's value in full (a column read as a
    dictionary excepted): for the columns that hold one, the first row group's first
    :data:`PROBE_ROWS` rows are decoded, and their bytes per row beyond the footer's are the
    answer (0 where no such column is read)."""
    if meta.num_row_groups == 0 or meta.row_group(0).num_rows == 0:
        return 0
    first = meta.row_group(0)
    probed, footer, leaf = [], 0, 0
    for field in meta.schema.to_arrow_schema():
        leaves = range(leaf, leaf + leaf_count(field.type))
        leaf = leaves.stop
        if names is not None and field.name not in names or pa.types.is_dictionary(field.type):
            continue
        if any(first.column(i).physical_type == "BYTE_ARRAY" and first.column(i).has_dictionary_page for i in leaves):
            probed.append(field.name)
            footer += sum(first.column(i).total_uncompressed_size for i in leaves)
    if not probed:
        return 0
    head = next(_file(part, STREAM_BUFFER_BYTES, meta).iter_batches(batch_size=PROBE_ROWS, row_groups=[0], columns=probed))
    return max(0, -(-head.nbytes // head.num_rows) - footer // first.num_rows)


def _verified(part: Part, read: Callable[[], T]) -> T:
    """``read()``; a page whose checksum does not match is an :class:`InputError`."""
    try:
        return read()
    except OSError as exc:
        if CHECKSUM_FAILED not in str(exc):
            raise
        raise InputError(f"{part.name}: {_damaged(part)}a page's checksum does not match its bytes (the file is damaged)") from None


def _damaged(part: Part) -> str:
    """Where ``part``'s first page with a checksum that does not match is, ``row group g,
    column 'c': `` (each column chunk read again on its own until one fails), else nothing."""
    file = _file(part)
    for g in range(file.num_row_groups):
        for name in file.schema_arrow.names:
            try:
                file.read_row_group(g, columns=[name])
            except OSError:
                return f"row group {g}, column {name!r}: "
    return ""


FORMAT = Parquet()
