"""Arrow data in memory as a source: a table is read where it is, with no copy to a file; a
pyarrow dataset is scanned on each pass (it may be larger than memory, and files it reads stay
where they are). A ``RecordBatchReader`` can be read only once and a run reads twice: it is
spooled to a temporary parquet file (uncompressed), as stdin is.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import PurePath
from typing import Any, Iterator

import pyarrow as pa

from .discovery import LOCAL, Part
from .formats import Reader, Scan
from ..schema import contiguous
from .source import Source, with_rows
from .writes import Writes

HEAD_ROWS = 1_024  # rows of a dataset whose size gives its bytes per row


class Tables(Reader):
    """Reads ``data``, a ``pyarrow.Table`` or a ``pyarrow.dataset.Dataset``, as a source's one part."""

    name = "Arrow"
    piece = "tables"
    kind = "dataset"  # a table is never unreadable

    def __init__(self, data: Any):
        self.data = data

    def scan(self, part: Part) -> Scan:
        """A table's size in memory; a dataset's rows, and its size estimated from its first rows."""
        if isinstance(self.data, pa.Table):
            rows, nbytes = self.data.num_rows, self.data.nbytes
        else:
            rows, head = self.data.count_rows(), self.data.head(HEAD_ROWS)
            nbytes = head.nbytes * rows // max(1, head.num_rows)
        return Scan(self.data.schema, rows, (rows,), nbytes, codec="none")  # in memory, uncompressed: so is parquet output by default

    def read(self, part: Part, columns: pa.Schema) -> pa.Table:
        if isinstance(self.data, pa.Table):
            return self.data.select(columns.names)
        return self.guarded(part, lambda: self.data.to_table(columns=columns.names))

    def batches(self, part: Part, batch_rows: int, columns: pa.Schema, threads: int = 1) -> Iterator[pa.RecordBatch]:
        """A table in slices of ``batch_rows`` rows (a slice within one chunk is not copied); a
        dataset as its scan gives it (on pyarrow's threads: ``threads`` is not used)."""
        if not isinstance(self.data, pa.Table):
            yield from self.guarded_batches(part, lambda: self.data.to_batches(columns=columns.names, batch_size=batch_rows))
            return
        table = self.data.select(columns.names)
        for start in range(0, table.num_rows, batch_rows):
            rows = table.slice(start, batch_rows)
            yield pa.RecordBatch.from_arrays([contiguous(column) for column in rows.columns], schema=rows.schema)


def is_dataset(data: Any) -> bool:
    """Whether ``data`` is a ``pyarrow.dataset.Dataset`` (without importing pyarrow.dataset)."""
    module = sys.modules.get("pyarrow._dataset")
    return module is not None and isinstance(data, module.Dataset)


@contextlib.contextmanager
def open_arrow(data: pa.Table | pa.RecordBatch | pa.RecordBatchReader | Any, name: str = "<frame>", *, writes: Writes = Writes()) -> Iterator[Source]:
    """Arrow data as a :class:`Source` named ``name``: a ``pyarrow.Table`` or ``RecordBatch``
    (read in memory), a ``pyarrow.dataset.Dataset`` (scanned on each pass) or a
    ``RecordBatchReader`` (spooled, see the module). ``writes`` are checked as
    :func:`~grpo_cli.io.open_source` checks them."""
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.RecordBatchReader):
        with _spooled(data, name, writes) as source:
            yield source
        return
    if not isinstance(data, pa.Table) and not is_dataset(data):
        raise TypeError(f"expected Arrow data, found {type(data).__name__}")
    part = Part(name, "", PurePath(name), None)
    writes.check([part], ())
    yield with_rows(Source(name, [part], "arrow", reader=Tables(data)))


@contextlib.contextmanager
def _spooled(reader: pa.RecordBatchReader, name: str, writes: Writes) -> Iterator[Source]:
    """``reader``'s batches written to a temporary parquet file, one row group each, as a source."""
    import tempfile

    import pyarrow.parquet as pq

    with tempfile.NamedTemporaryFile(prefix="grpo-frame-", suffix=".parquet") as spool:
        part = Part(name, spool.name, PurePath(name), LOCAL)
        writes.check([part], ())
        with pq.ParquetWriter(spool.name, reader.schema, compression="none") as out:
            for batch in reader:
                out.write_batch(batch)
        yield with_rows(Source(name, [part], "parquet"))
