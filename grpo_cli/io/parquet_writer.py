"""Parquet output laid out for speed and size: whole row groups, each column encoded for its
values, the input's compression.

- Row groups hold :attr:`Layout.row_group_rows` rows: as many as the input's largest row
  group (parquet; JSON Lines: :data:`DEFAULT_ROW_GROUP_ROWS`), at most about
  :data:`ROW_GROUP_BYTES` of uncompressed data. Batches are buffered until a row group is
  full, and each row group is handed to pyarrow in chunks of :attr:`Layout.chunk_rows` rows
  from its start (:func:`chunked`), so neither the row groups nor their pages depend on the
  batch size or thread count.
- Each column (each leaf of a nested one) is encoded as its first :data:`SAMPLE_VALUES`
  values in the first row group suggest: integers that ascend (ids, steps) delta-encoded;
  strings and binary, and values that repeat (at most one in :data:`DISTINCT_SHARE` distinct:
  steps, rewards, advantages of binary rewards) in a dictionary; distinct floats (log-probs,
  advantages of continuous rewards) byte-stream-split, faster to write and smaller than plain
  once compressed. pyarrow's default writer tries a dictionary on every column and gives each
  up only after its dictionary page has filled, work that is thrown away.
- Compression: ``compression`` if given, else the input's codec, else snappy.
- Row groups are encoded on several threads at once (as many as fit in a budget of memory
  per thread, and in all), each row group's columns a few at a time where fewer row groups
  than threads fit (each few into a parquet file in memory), and joined in order
  (:mod:`grpo_cli.io.parquet_footer`): pyarrow's writer encodes one column after another on
  one thread, the slowest step of a run. The file is the same byte for byte.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import UsageError
from ..parallel import at_once, runs
from ..schema import contiguous, list_values
from .parquet_footer import JoinedFile, Pieces

CODECS = ("none", "snappy", "zstd", "lz4", "gzip", "brotli")
DEFAULT_CODEC = "snappy"
DEFAULT_ROW_GROUP_ROWS = 65_536
ROW_GROUP_BYTES = 128 << 20
SAMPLE_VALUES = 65_536
CHUNK_BYTES = 256 << 10  # uncompressed bytes of a row group handed to pyarrow at once (see chunked)
DEFAULT_CHUNK_ROWS = 8192  # ... where the bytes per row are not known (a Layout() of its defaults)
GATHER_BYTES = 64 << 10  # a part's smaller writes (page headers, a thin row group's pages) gathered into one, each a call into Python
ENCODING_BYTES_PER_THREAD = 32 << 20  # uncompressed bytes of the row groups encoded at once, per thread (at least one row group)
ENCODING_BYTES = 256 << 20  # ... and in all, whatever the threads
DISTINCT_SHARE = 4


@dataclass(frozen=True)
class Layout:
    """How output parquet is written: its codec, rows per row group, and rows per chunk a row
    group is handed to pyarrow in (:func:`chunked`)."""

    compression: str = DEFAULT_CODEC
    row_group_rows: int = DEFAULT_ROW_GROUP_ROWS
    chunk_rows: int = DEFAULT_CHUNK_ROWS


def layout(compression: str | None, input_codec: str | None, input_row_group_rows: int | None, bytes_per_row: int) -> Layout:
    """The :class:`Layout` for an input whose codec, largest row group and uncompressed
    bytes per row are given (None: not parquet): see the module's docstring."""
    if compression is not None and compression not in CODECS:
        raise UsageError(f"unknown `compression` {compression!r} (valid: {', '.join(CODECS)})")
    codec = compression or (input_codec and {"uncompressed": "none"}.get(input_codec, input_codec)) or DEFAULT_CODEC
    rows = min(input_row_group_rows or DEFAULT_ROW_GROUP_ROWS, max(1, ROW_GROUP_BYTES // max(1, bytes_per_row)))
    return Layout(codec if codec in CODECS else DEFAULT_CODEC, rows, max(1, CHUNK_BYTES // max(1, bytes_per_row)))


class RowGroupWriter:
    """A parquet file written a whole row group at a time (see the module's docstring).

    One thread: pyarrow's writer writes straight to the file. More: as many row groups are
    held encoding (at most ``threads``) as ``threads`` times :data:`ENCODING_BYTES_PER_THREAD`,
    at most :data:`ENCODING_BYTES`, holds (uncompressed), judged on the first row group; each
    row group's columns are cut into runs of about 1/``parts`` of its bytes, ``parts`` the
    threads per row group held (rounded up: :func:`~grpo_cli.parallel.runs`), each encoded on one of the
    threads as a parquet file in memory, and the files are joined in order
    (:class:`~grpo_cli.io.parquet_footer.JoinedFile`). The file is the same either way.
    """

    def __init__(self, path: str, schema: pa.Schema, layout: Layout, threads: int = 1):
        self.path, self.schema, self.layout, self.threads = path, schema, layout, max(1, threads)
        self._pending: list[pa.RecordBatch] = []
        self._rows = 0
        self._encodings: dict | None = None  # chosen from the first row group (see _start)
        self._at_once = 1  # row groups held encoding
        self._runs: list[list[int]] = []  # the columns of each part of a row group
        self._out: pa.NativeFile | None = None  # the file, opened to append (see Format.writer)
        self._single: pq.ParquetWriter | None = None  # one thread, or several:
        self._parallel: tuple[ThreadPoolExecutor, JoinedFile] | None = None
        self._encoding: deque[list[Future]] = deque()  # each row group's parts

    def write_batch(self, batch: pa.RecordBatch) -> None:
        self._pending.append(batch)
        self._rows += batch.num_rows
        while self._rows >= self.layout.row_group_rows:
            self._flush(self.layout.row_group_rows)

    def close(self) -> None:
        try:
            if self._rows or self._encodings is None:  # the rest, or an empty file's schema
                self._flush(self._rows)
            if self._single is not None:
                self._single.close()
                return
            assert self._parallel is not None  # _start opened one of the two
            self._join(held=0)
            self._parallel[1].close()
        finally:
            if self._parallel is not None:
                self._parallel[0].shutdown(cancel_futures=True)
            if self._out is not None:
                self._out.close()

    def _flush(self, rows: int) -> None:
        """Write the first ``rows`` pending rows as one row group (0: a file without any)."""
        table = pa.Table.from_batches(self._pending, self.schema)
        group = chunked(table.slice(0, rows), self.layout.chunk_rows)
        if self._encodings is None:
            self._start(group)
        if self._single is not None:
            if rows:
                self._single.write_table(group, row_group_size=rows)
        elif rows:
            assert self._parallel is not None  # _start opened one of the two
            self._encoding.append([self._parallel[0].submit(self._encoded, group.select(columns)) for columns in self._runs])
            self._join(held=self._at_once)
        rest = table.slice(rows)
        self._pending, self._rows = rest.to_batches(), rest.num_rows

    def _join(self, held: int) -> None:
        """Append the oldest row groups to the file, each once its parts are encoded, until
        ``held`` are left encoding."""
        assert self._parallel is not None  # several threads: _start opened the joined file
        while len(self._encoding) > held:
            self._parallel[1].append([part.result() for part in self._encoding.popleft()])

    def _start(self, group: pa.Table) -> None:
        """Choose each column's encoding, how many row groups to hold encoding and how to cut
        their columns from the first row group ``group`` (so none depends on the batches);
        open the file."""
        self._encodings = encodings(group)
        self._out = pa.OSFile(self.path, "a")
        if self.threads == 1:
            self._single = pq.ParquetWriter(self._out, self.schema, compression=self.layout.compression, **self._encodings)
            return
        nbytes = [column.nbytes for column in group.columns]  # each a walk over the chunks' buffers: once
        self._at_once = at_once(self.threads, sum(nbytes), ENCODING_BYTES_PER_THREAD, ENCODING_BYTES)
        self._runs = runs(nbytes, -(-self.threads // self._at_once))
        empty = self._encoded(self.schema.empty_table())
        self._parallel = (ThreadPoolExecutor(self.threads), JoinedFile(self._out, empty))

    def _encoded(self, rows: pa.Table) -> Pieces:
        """``rows`` (some of the columns) as a parquet file in memory: one row group (none if empty)."""
        out = Pieces()
        sink = pa.BufferedOutputStream(pa.PythonFile(out, mode="w"), buffer_size=GATHER_BYTES)
        with pq.ParquetWriter(sink, rows.schema, compression=self.layout.compression, **(self._encodings or {})) as writer:
            if rows.num_rows:  # the encodings name every column; pyarrow passes over the others
                writer.write_table(rows, row_group_size=rows.num_rows)
        sink.close()
        return out


def chunked(table: pa.Table, rows: int) -> pa.Table:
    """``table`` in chunks of ``rows`` rows from its start, whatever batches it came in: pyarrow
    checks a list column's page size at points it counts from the start of each chunk (after
    about 1024 values, at a row's start, and before a chunk's last row), so the pages then
    depend on the rows alone. A chunk that spans two batches is copied; the others are slices.
    Columns without lists get the pages they have in one chunk. The table is first cut where
    a chunk spanning batches begins and ends (Python per batch), then each piece in chunks by
    pyarrow (none per chunk).

    >>> batches = pa.concat_tables([pa.table({"x": range(3)}), pa.table({"x": range(3, 10)})])
    >>> [len(chunk) for chunk in chunked(batches, 4)["x"].chunks]
    [4, 4, 2]
    """
    n = table.num_rows
    seams = np.cumsum([len(batch) for batch in table.to_batches()])[:-1]
    spanned = seams[seams % rows != 0] // rows * rows  # where each chunk that spans a seam begins
    cuts = sorted({0, n, *spanned.tolist(), *np.minimum(spanned + rows, n).tolist()})  # not np.unique, which imports numpy.ma
    pieces = [table.slice(start, end - start).combine_chunks() for start, end in zip(cuts[:-1], cuts[1:])]
    return pa.Table.from_batches([batch for piece in pieces for batch in piece.to_batches(max_chunksize=rows)], table.schema)


def encodings(table: pa.Table) -> dict:
    """How each parquet column (leaf) of ``table`` is encoded, as :class:`pyarrow.parquet.ParquetWriter`
    takes it (``use_dictionary``, ``column_encoding``), judged on the first :data:`SAMPLE_VALUES`
    values of each leaf: integers in ascending order (ids, steps, row numbers) delta-encoded;
    strings and binary, and values that repeat (at most one in :data:`DISTINCT_SHARE`
    distinct), in a dictionary; other floats byte-stream-split; the rest plain."""
    chosen: dict[str, list[str]] = {"dictionary": [], "DELTA_BINARY_PACKED": [], "BYTE_STREAM_SPLIT": [], "plain": []}
    if table.num_rows:
        sample = table.slice(0, SAMPLE_VALUES)
        leaves = [leaf for column in sample.columns for leaf in _leaves(_head(column))]
        for path, values in zip(leaf_paths(table.schema), leaves, strict=True):
            chosen[_encoding(values)].append(path)
    encoded = {path: encoding for encoding in ("DELTA_BINARY_PACKED", "BYTE_STREAM_SPLIT") for path in chosen[encoding]}
    return {"use_dictionary": chosen["dictionary"], "column_encoding": encoded}


def _head(column: pa.ChunkedArray) -> pa.Array:
    """The first rows of ``column`` as one array, as many as hold :data:`SAMPLE_VALUES` values
    in each of its leaves (:func:`_leaves` reads no further), or all of them: tried from its
    first chunk's rows, doubling, so a row group of token lists is not copied whole for the
    few rows whose tokens are sampled. The leaves' first values are the same either way."""
    rows = max(1, len(column.chunk(0)))
    while True:
        head = contiguous(column.slice(0, rows))
        if rows >= len(column) or all(len(leaf) == SAMPLE_VALUES for leaf in _leaves(head)):
            return head
        rows *= 2


def leaf_paths(schema: pa.Schema) -> list[str]:
    """The parquet column paths of ``schema``'s leaves (``tokens.list.element``), in order."""
    sink = pa.BufferOutputStream()
    pq.ParquetWriter(sink, schema).close()
    meta = pq.read_metadata(pa.BufferReader(sink.getvalue()))
    return [meta.schema.column(i).path for i in range(len(meta.schema))]


def leaf_count(kind: pa.DataType) -> int:
    """How many parquet columns (leaves) store a column of type ``kind``."""
    return sum(1 for _ in _leaves(pa.nulls(0, kind)))


def _leaves(values: pa.Array) -> Iterator[pa.Array]:
    """Each leaf's first values, depth first (the order of :func:`leaf_paths`)."""
    t = values.type
    if isinstance(t, pa.ExtensionType):
        yield from _leaves(values.storage)
    elif pa.types.is_struct(t):
        for i in range(t.num_fields):
            yield from _leaves(values.field(i))
    elif pa.types.is_map(t):
        yield from _leaves(values.keys)
        yield from _leaves(values.items)
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_list_view(t):
        yield from _leaves(list_values(values))
    else:
        yield values.slice(0, SAMPLE_VALUES)


def _encoding(values: pa.Array) -> str:
    """How a leaf whose first values are ``values`` is encoded (see :func:`encodings`):
    'dictionary', a parquet encoding's name, or 'plain'."""
    t = values.type
    if (
        pa.types.is_dictionary(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_string_view(t)
        or pa.types.is_binary_view(t)
    ):
        return "dictionary"
    if pa.types.is_boolean(t) or pa.types.is_null(t) or len(values) == 0:
        return "plain"
    numbers = _numbers(values)
    if numbers is not None and pa.types.is_integer(t) and _ascending(*numbers):
        return "DELTA_BINARY_PACKED"
    if _distinct(values, numbers) * DISTINCT_SHARE <= len(values):
        return "dictionary"
    return "BYTE_STREAM_SPLIT" if pa.types.is_float32(t) or pa.types.is_float64(t) else "plain"


def _numbers(values: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
    """Integers and floats as numpy, their values (no copy) and which are valid (not
    null); None for other types. So that a run does not import ``pyarrow.compute`` (tens
    of milliseconds) for the usual columns."""
    t = values.type
    if not (pa.types.is_integer(t) or pa.types.is_float32(t) or pa.types.is_float64(t)):
        return None
    bitmap, data = values.buffers()[:2]
    n, at = len(values), values.offset
    x = np.frombuffer(data, dtype=t.to_pandas_dtype())[at : at + n]
    if bitmap is None or not values.null_count:
        return x, np.ones(n, dtype=bool)
    return x, np.unpackbits(np.frombuffer(bitmap, np.uint8), bitorder="little")[at : at + n].view(bool)


def _ascending(x: np.ndarray, valid: np.ndarray) -> bool:
    """Whether no valid value is above the next one, where that one is valid too (as Arrow's
    ``all(less_equal(x[:-1], x[1:]))``, which passes over nulls)."""
    return bool(np.all((x[:-1] <= x[1:]) | ~(valid[:-1] & valid[1:])))


def _distinct(values: pa.Array, numbers: tuple[np.ndarray, np.ndarray] | None) -> int:
    """How many distinct values ``values`` holds, a null one of them; floats by their bits
    (0.0 and -0.0 two, NaNs by their payload), as Arrow's ``count_distinct`` counts them."""
    if numbers is None:
        import pyarrow.compute as pc

        return pc.count_distinct(values, mode="all").as_py()
    x, valid = numbers
    bits = np.sort(x[valid].view(f"u{x.itemsize}"))  # not np.unique, which imports numpy.ma
    return int(bits.size > 0) + np.count_nonzero(bits[1:] != bits[:-1]) + int(not valid.all())
