"""Row groups encoded apart, joined into one parquet file.

pyarrow's writer encodes a file's row groups one after another, and a row group's columns one
after another, on one thread. To use every core, each row group's columns are encoded apart,
a few at a time, each few as a complete parquet file in memory (``PAR1``, its column chunks,
its footer; kept in the :class:`Pieces` it was written in), and :class:`JoinedFile` appends
the column chunks in order and writes one footer listing every row group, its offsets moved
to where its bytes landed. A column chunk's bytes and metadata do not depend on the other
columns, so the file is byte for byte the one a single writer makes.

A footer is parquet's ``FileMetaData`` in thrift's compact protocol. The fields a join reads
or moves (:data:`FILE`) are decoded into plain values, every field kept in its order and type
so that it encodes back to the same bytes: a struct is a list of ``[field id, type, value]``,
a list is ``(element type, [values])``. The others (schema, statistics, encodings) are passed
over and kept as their bytes (:class:`Raw`).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    import pyarrow as pa

MAGIC = b"PAR1"
WRITE_BYTES = 1 << 20  # a part's bytes go to the file in writes of this size (see JoinedFile.append)
# thrift compact protocol types
TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, STRUCT = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12
INTEGERS = (I16, I32, I64)
# parquet.thrift field ids
FILE_NUM_ROWS, FILE_ROW_GROUPS = 3, 4
GROUP_COLUMNS, GROUP_BYTES, GROUP_NUM_ROWS, GROUP_FILE_OFFSET, GROUP_COMPRESSED_BYTES, GROUP_ORDINAL = 1, 2, 3, 5, 6, 7
CHUNK_FILE_OFFSET, CHUNK_META, CHUNK_OFFSET_INDEX = 2, 3, 4
META_DATA_PAGE, META_INDEX_PAGE, META_DICTIONARY_PAGE, META_BLOOM_FILTER = 9, 10, 11, 14
# The fields decoded, by the struct that holds them: field id -> its struct's (or its list's
# structs') fields decoded, None for a plain value; any other field is kept as its bytes
COLUMN_META = dict.fromkeys((META_DATA_PAGE, META_INDEX_PAGE, META_DICTIONARY_PAGE, META_BLOOM_FILTER))
COLUMN_CHUNK = {CHUNK_FILE_OFFSET: None, CHUNK_META: COLUMN_META, CHUNK_OFFSET_INDEX: None}
ROW_GROUP = {GROUP_COLUMNS: COLUMN_CHUNK, **dict.fromkeys((GROUP_BYTES, GROUP_NUM_ROWS, GROUP_FILE_OFFSET, GROUP_COMPRESSED_BYTES, GROUP_ORDINAL))}
FILE = {FILE_NUM_ROWS: None, FILE_ROW_GROUPS: ROW_GROUP}


class Raw(bytes):
    """A value kept as its compact-protocol bytes, passed over rather than decoded."""


class _Reader:
    """Decodes compact-protocol values from ``data``."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def byte(self) -> int:
        self.pos += 1
        return self.data[self.pos - 1]

    def varint(self) -> int:
        value = shift = 0
        while True:
            b = self.byte()
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def list_header(self) -> tuple[int, int]:
        """A list's (or set's) element type and length."""
        header = self.byte()
        return header & 0x0F, header >> 4 if header >> 4 != 15 else self.varint()

    def value(self, kind: int, fields: dict | None = None):
        """A value of thrift type ``kind``; of a struct (or a list's structs), the ``fields``
        named are decoded and the others kept as their bytes."""
        if kind in INTEGERS:
            return self.zigzag()
        if kind in (TRUE, FALSE):  # a bool in a list: one byte (a field's is in its header)
            return self.byte()
        if kind == BYTE:
            return self.byte()
        if kind == DOUBLE:  # kept as its 8 bytes
            self.pos += 8
            return self.data[self.pos - 8 : self.pos]
        if kind == BINARY:
            n = self.varint()
            self.pos += n
            return self.data[self.pos - n : self.pos]
        if kind in (LIST, SET):
            element, n = self.list_header()
            return element, [self.value(element, fields) for _ in range(n)]
        if kind == STRUCT:
            return self.struct({} if fields is None else fields)
        raise ValueError(f"not a parquet footer (thrift type {kind})")

    def struct(self, fields: dict) -> list:
        """A struct's fields, those in ``fields`` decoded (see :data:`FILE`), the others :class:`Raw`."""
        found: list[list] = []
        last = 0
        while (header := self.byte()) != 0:
            kind, delta = header & 0x0F, header >> 4
            last = last + delta if delta else self.zigzag()
            if kind in (TRUE, FALSE):  # the value is in the header
                found.append([last, kind, None])
            elif last in fields:
                found.append([last, kind, self.value(kind, fields[last])])
            else:
                start = self.pos
                self.skip(kind)
                found.append([last, kind, Raw(self.data[start : self.pos])])
        return found

    def skip(self, kind: int) -> None:
        """Pass over a value of thrift type ``kind``."""
        if kind in INTEGERS:
            while self.byte() >= 0x80:
                pass
        elif kind in (TRUE, FALSE, BYTE):  # a bool in a list: one byte
            self.pos += 1
        elif kind == DOUBLE:
            self.pos += 8
        elif kind == BINARY:
            n = self.varint()  # read first: `pos += varint()` would add the length to the pos before it
            self.pos += n
        elif kind in (LIST, SET):
            element, n = self.list_header()
            for _ in range(n):
                self.skip(element)
        elif kind == STRUCT:
            while (header := self.byte()) != 0:
                if not header >> 4:  # the field id follows the header
                    self.zigzag()
                if header & 0x0F not in (TRUE, FALSE):
                    self.skip(header & 0x0F)
        else:
            raise ValueError(f"not a parquet footer (thrift type {kind})")


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _zigzag(n: int) -> bytes:
    return _varint((n << 1) ^ (n >> 63))


def _value(kind: int, value) -> bytes:
    if isinstance(value, Raw):
        return value
    if kind in INTEGERS:
        return _zigzag(value)
    if kind in (TRUE, FALSE, BYTE):
        return bytes([value])
    if kind == DOUBLE:
        return bytes(value)
    if kind == BINARY:
        return _varint(len(value)) + bytes(value)
    if kind in (LIST, SET):
        element, values = value
        header = bytes([len(values) << 4 | element]) if len(values) < 15 else bytes([0xF0 | element]) + _varint(len(values))
        return header + b"".join(_value(element, v) for v in values)
    return _struct(value)


def _struct(fields: list) -> bytes:
    out, last = bytearray(), 0
    for field_id, kind, value in fields:
        delta = field_id - last
        out += bytes([delta << 4 | kind]) if 0 < delta <= 15 else bytes([kind]) + _zigzag(field_id)
        if kind not in (TRUE, FALSE):
            out += _value(kind, value)
        last = field_id
    return bytes(out + b"\x00")


def footer(data: bytes | memoryview) -> tuple[list, int]:
    """The decoded ``FileMetaData`` of a parquet file held in ``data``, and where it starts."""
    if bytes(data[:4]) != MAGIC or bytes(data[-4:]) != MAGIC:
        raise ValueError("not a parquet file")
    size = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - size
    return _Reader(bytes(data[start:-8])).struct(FILE), start


def chunks_footer(chunks: list[memoryview]) -> tuple[list, int]:
    """:func:`footer` of a parquet file held in ``chunks`` in order (the last few joined)."""
    total, tail = sum(len(chunk) for chunk in chunks), b""
    for chunk in reversed(chunks):
        tail = bytes(chunk) + tail
        if len(tail) >= 8 + int.from_bytes(tail[-8:-4], "little"):
            break
    head = b"".join(bytes(chunk) for chunk in chunks[: len(MAGIC)])[: len(MAGIC)]  # the file's magic, for footer() to check
    meta, start = footer(head + tail)
    return meta, start + total - len(head) - len(tail)


def _chunks(part: bytes | memoryview | Pieces) -> list[memoryview]:
    """A part's bytes, or the pieces it was written in (:class:`Pieces`), in order."""
    return [memoryview(chunk) for chunk in (part.pieces if isinstance(part, Pieces) else [part])]


class Pieces:
    """A file for pyarrow's writer (``pa.PythonFile``) that keeps each write's bytes as they
    came: unlike a buffer that copies itself each time it grows, nothing is copied twice.
    Each write takes the GIL: a ``pa.BufferedOutputStream`` in front gathers small ones."""

    closed = False

    def __init__(self) -> None:
        self.pieces: list[bytes] = []

    def write(self, data: bytes | pa.Buffer) -> int:
        self.pieces.append(data if isinstance(data, bytes) else bytes(data))  # a buffer pyarrow may write into again: copied
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def encoded(meta: list) -> bytes:
    """``FileMetaData`` as thrift compact bytes."""
    return _struct(meta)


def _field(fields: list, field_id: int) -> list | None:
    return next((f for f in fields if f[0] == field_id), None)


def _required(fields: list, field_id: int) -> list:
    """Field ``field_id``, which the parquet format requires."""
    found = _field(fields, field_id)
    if found is None:
        raise ValueError(f"a parquet footer without its required field {field_id}")
    return found


def _shift(fields: list, ids: tuple[int, ...], by: int) -> None:
    for f in fields:
        if f[0] in ids:
            f[2] += by


def _moved(group: list, by: int, ordinal: int) -> list:
    """A ``RowGroup`` whose bytes moved ``by`` bytes later in the file, now number ``ordinal``.
    A column chunk's deprecated ``file_offset`` is moved only if it was set (not 0). A page
    index is refused: its page locations are file offsets too, inside the data."""
    _shift(group, (GROUP_FILE_OFFSET,), by)
    for chunk in _required(group, GROUP_COLUMNS)[2][1]:
        if _field(chunk, CHUNK_OFFSET_INDEX) is not None:
            raise ValueError("a part with a page index cannot be moved")
        if (offset := _field(chunk, CHUNK_FILE_OFFSET)) is not None and offset[2]:
            offset[2] += by
        _shift(_required(chunk, CHUNK_META)[2], (META_DATA_PAGE, META_INDEX_PAGE, META_DICTIONARY_PAGE, META_BLOOM_FILTER), by)
    if (number := _field(group, GROUP_ORDINAL)) is not None:
        number[2] = ordinal
    return group


def _joined(pieces: list) -> list:
    """One ``RowGroup`` of the column chunks of ``pieces``, row groups of the same rows whose
    columns follow one another: the first's fields, with every piece's columns and sizes."""
    group = pieces[0]
    _required(group, GROUP_COLUMNS)[2] = (STRUCT, [chunk for piece in pieces for chunk in _required(piece, GROUP_COLUMNS)[2][1]])
    for size in (GROUP_BYTES, GROUP_COMPRESSED_BYTES):
        if (field := _field(group, size)) is not None:
            field[2] = sum(_required(piece, size)[2] for piece in pieces)
    return group


class JoinedFile:
    """One parquet file written to ``out`` from parts, each a complete parquet file in memory
    written with the options of ``empty``, a file of the joined file's schema without rows:
    :meth:`append` each row group's parts in order, then :meth:`close`.

    >>> import io, pyarrow as pa, pyarrow.parquet as pq
    >>> def part(table):
    ...     sink = pa.BufferOutputStream(); pq.write_table(table, sink); return sink.getvalue()
    >>> t = pa.table({"x": [1, 2, 3], "y": [0.5, 1.5, 2.5]})
    >>> out = io.BytesIO(); joined = JoinedFile(out, part(t.slice(0, 0)))
    >>> joined.append([part(t.slice(0, 2))]); joined.append([part(t.slice(2).select(["x"])), part(t.slice(2).select(["y"]))])
    >>> joined.close(); pq.read_table(pa.BufferReader(out.getvalue())).to_pydict()
    {'x': [1, 2, 3], 'y': [0.5, 1.5, 2.5]}
    """

    def __init__(self, out: BinaryIO, empty: bytes | memoryview | Pieces):
        self.out = out
        self.position = len(MAGIC)
        self.meta = chunks_footer(_chunks(empty))[0]
        self.groups: list[Raw] = []  # each row group appended, encoded
        self.rows = 0
        out.write(MAGIC)

    def append(self, parts: list) -> None:
        """Append the column chunks of ``parts``, moved: one file of every column, or files of
        one row group each, of the same rows, whose columns follow one another in the schema
        (joined into one row group). A part is its bytes, or :class:`Pieces` it was written
        to. They go to the file at most :data:`WRITE_BYTES` at a time: the kernel copied one
        write of a row group of token lists (tens of MiB) into the page cache at a fraction of
        the speed."""
        moved = []
        for part in parts:
            chunks = _chunks(part)
            meta, start = chunks_footer(chunks)
            by = self.position - len(MAGIC)  # the part's byte 4 lands at self.position
            groups = _required(meta, FILE_ROW_GROUPS)[2][1]
            if len(parts) > 1 and len(groups) != 1:
                raise ValueError("a row group's columns come in parts of one row group each")
            moved.append([_moved(g, by, len(self.groups) + k) for k, g in enumerate(groups)])
            begin = 0  # where the chunk starts in the part
            for chunk in chunks:
                end = min(begin + len(chunk), start)  # the column chunks end where the footer starts
                for at in range(max(begin, len(MAGIC)), end, WRITE_BYTES):
                    self.out.write(chunk[at - begin : min(at + WRITE_BYTES, end) - begin])
                begin += len(chunk)
            self.position += start - len(MAGIC)
        for same_rows in zip(*moved, strict=True):
            group = _joined(list(same_rows))
            self.rows += _required(group, GROUP_NUM_ROWS)[2]
            self.groups.append(Raw(_struct(group)))  # encoded now, while the next row groups encode: close() only joins them

    def close(self) -> None:
        """Write the footer: ``empty``'s metadata, with every part's row groups and rows."""
        meta = [list(f) for f in self.meta]
        _required(meta, FILE_ROW_GROUPS)[2] = (STRUCT, self.groups)
        _required(meta, FILE_NUM_ROWS)[2] = self.rows
        tail = encoded(meta)
        self.out.write(tail + struct.pack("<I", len(tail)) + MAGIC)
