"""Parquet footers decode and encode back to the same bytes, and parts joined into one file
keep every offset pointing at the bytes it pointed at in its part."""

import io
import itertools

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grpo_cli.io import parquet_footer as f


def _parquet(table: pa.Table, **options) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **options)
    return sink.getvalue().to_pybytes()


TABLE = pa.table(
    {
        "id": pa.array(np.arange(300) // 3),
        "x": pa.array(np.linspace(-1.5, 2.5, 300)),
        "name": pa.array([f"n{k % 11}" if k % 7 else None for k in range(300)]),
        "tokens": pa.array([[k * 0.5] * (k % 3) for k in range(300)], pa.list_(pa.float32())),
        "flag": pa.array([k % 2 == 0 for k in range(300)]),
    }
).replace_schema_metadata({"origin": "test"})

OPTIONS = [
    {},
    {"compression": "zstd", "row_group_size": 64},
    {"write_page_index": True, "row_group_size": 100},
    {"write_statistics": False, "use_dictionary": False},
    {"sorting_columns": [pq.SortingColumn(0)], "bloom_filter_options": {"name": {"ndv": 20}}},
]


@pytest.mark.parametrize("options", OPTIONS)
def test_a_footer_encodes_back_to_its_bytes(options):
    data = _parquet(TABLE, **options)
    meta, start = f.footer(data)
    assert f.encoded(meta) == data[start:-8]


def test_a_wide_footer_encodes_back_to_its_bytes_and_keeps_what_it_does_not_move_as_bytes():
    """Lists of 15 or more (the schema, a row group's columns) have a longer header; the schema,
    statistics and encodings are passed over, kept as their bytes."""
    data = _parquet(pa.table({f"c{k}": pa.array(np.arange(20.0) * k) for k in range(20)}), row_group_size=7)
    meta, start = f.footer(data)
    assert f.encoded(meta) == data[start:-8]
    schema = f._field(meta, 2)
    assert isinstance(schema[2], f.Raw) and b"c19" in schema[2]
    chunk = f._field(f._field(meta, f.FILE_ROW_GROUPS)[2][1][0], f.GROUP_COLUMNS)[2][1][19]
    column = f._field(chunk, f.CHUNK_META)[2]
    assert isinstance(f._field(column, f.META_DATA_PAGE)[2], int) and isinstance(f._field(column, 12)[2], f.Raw)  # statistics


class _Every(dict):
    """Fields to decode: every one, at every depth."""

    def __contains__(self, field_id):
        return True

    def __getitem__(self, field_id):
        return self


LEAVES = {f.BYTE: st.integers(0, 255), f.I16: st.integers(-(2**15), 2**15 - 1), f.I32: st.integers(-(2**31), 2**31 - 1)}
LEAVES |= {f.I64: st.integers(-(2**63), 2**63 - 1), f.DOUBLE: st.binary(min_size=8, max_size=8), f.BINARY: st.binary(max_size=40)}


def _thrift_value(kind: int, depth: int) -> st.SearchStrategy:
    if kind in LEAVES:
        return LEAVES[kind]
    if kind == f.STRUCT:
        return _thrift_struct(depth + 1)
    element = st.sampled_from([*LEAVES, f.TRUE] + ([f.STRUCT, f.LIST] if depth < 2 else []))
    return element.flatmap(lambda e: st.tuples(st.just(e), st.lists(st.integers(1, 2) if e == f.TRUE else _thrift_value(e, depth + 1), max_size=18)))


def _thrift_struct(depth: int = 0) -> st.SearchStrategy:
    kinds = [*LEAVES, f.TRUE, f.FALSE] + ([f.STRUCT, f.LIST, f.SET] if depth < 2 else [])
    fields = st.lists(st.tuples(st.integers(1, 60), st.sampled_from(kinds)), max_size=7, unique_by=lambda field: field[0])
    return fields.flatmap(
        lambda drawn: st.tuples(*[st.none() if kind in (f.TRUE, f.FALSE) else _thrift_value(kind, depth) for _, kind in sorted(drawn)]).map(
            lambda values: [[field_id, kind, value] for (field_id, kind), value in zip(sorted(drawn), values)]
        )
    )


@given(_thrift_struct(), st.sets(st.integers(1, 60)))
def test_any_struct_decodes_in_part_or_whole_and_encodes_back_to_its_bytes(struct, decoded):
    """Passing over a value (kept as its bytes) ends where decoding it does, for every thrift
    type, list headers long and short, field ids that jump by more than 15."""
    data = f.encoded(struct)
    for fields in ({}, _Every(), {field_id: _Every() for field_id in decoded}):
        reader = f._Reader(data)
        assert f.encoded(reader.struct(fields)) == data and reader.pos == len(data)
    assert f._Reader(data).struct(_Every()) == struct


def _offsets(meta: list, data: bytes) -> list[bytes]:
    """For each column chunk of each row group: the bytes each of its offsets points at."""
    pointed = []
    for group in f._field(meta, f.FILE_ROW_GROUPS)[2][1]:
        for chunk in f._field(group, f.GROUP_COLUMNS)[2][1]:
            column = f._field(chunk, f.CHUNK_META)[2]
            ids = (f.META_DATA_PAGE, f.META_INDEX_PAGE, f.META_DICTIONARY_PAGE, f.META_BLOOM_FILTER)
            pointed += [data[field[2] : field[2] + 16] for field in column if field[0] in ids]
    return pointed


JOINABLE = [o for o in OPTIONS if not o.get("write_page_index")]


def _joined(parts: list[list[bytes]], **options) -> bytes:
    out = io.BytesIO()
    joined = f.JoinedFile(out, _parquet(TABLE.slice(0, 0), **options))
    for same_rows in parts:
        joined.append(same_rows)
    joined.close()
    return out.getvalue()


@pytest.mark.parametrize("options", JOINABLE)
def test_joined_parts_read_back_whole_and_point_where_they_did(options):
    parts = [_parquet(TABLE.slice(start, 100), **options) for start in (0, 100, 200)]
    data = _joined([[part] for part in parts], **options)
    assert pq.read_table(pa.BufferReader(data)).equals(TABLE)
    meta = pq.read_metadata(pa.BufferReader(data))
    assert meta.num_rows == 300 and meta.num_row_groups == sum(pq.read_metadata(pa.BufferReader(p)).num_row_groups for p in parts)
    assert _offsets(f.footer(data)[0], data) == [b for p in parts for b in _offsets(f.footer(p)[0], p)]


@pytest.mark.parametrize("options", [o for o in JOINABLE if "bloom_filter_options" not in o])  # a part's bloom filters follow its data
@pytest.mark.parametrize("runs", [[[0, 1], [2], [3, 4]], [[0], [1], [2], [3], [4]]])
def test_a_row_groups_columns_encoded_apart_join_to_the_bytes_of_one_part(options, runs):
    """Runs of columns, each a file of its own, make the file whole rows make, byte for byte."""
    slices = [TABLE.slice(start, 50) for start in range(0, 300, 50)]
    whole = _joined([[_parquet(rows, **options)] for rows in slices], **options)
    apart = _joined([[_parquet(rows.select(columns), **options) for columns in runs] for rows in slices], **options)
    assert apart == whole


def test_a_row_groups_columns_come_in_parts_of_one_row_group():
    """Parts of several row groups each would leave a row group's columns apart in the file."""
    rows = TABLE.slice(0, 100)
    with pytest.raises(ValueError, match="one row group each"):
        _joined([[_parquet(rows.select([0, 1]), row_group_size=64), _parquet(rows.select([2, 3, 4]), row_group_size=64)]])


def test_no_part_is_the_bytes_of_a_file_without_row_groups():
    sink = pa.BufferOutputStream()
    pq.ParquetWriter(sink, TABLE.schema).close()
    assert _joined([]) == sink.getvalue().to_pybytes()


def test_a_page_index_is_refused_rather_than_left_pointing_elsewhere():
    """Its page locations are file offsets inside the data, which a join does not rewrite."""
    joined = f.JoinedFile(io.BytesIO(), _parquet(TABLE.slice(0, 0)))
    joined.append([_parquet(TABLE.slice(0, 10))])
    with pytest.raises(ValueError, match="page index"):
        joined.append([_parquet(TABLE.slice(10, 10), write_page_index=True)])


def test_what_is_not_parquet_is_refused():
    with pytest.raises(ValueError, match="not a parquet file"):
        f.footer(b"PAR1 but not at the end")


def _pieces(table: pa.Table, **options) -> f.Pieces:
    """``table`` written by pyarrow to :class:`~grpo_cli.io.parquet_footer.Pieces`: a write each."""
    sink = f.Pieces()
    pq.write_table(table, sink, **options)
    return sink


@pytest.mark.parametrize("options", JOINABLE)
def test_parts_written_in_pieces_join_to_the_bytes_of_parts_in_one_buffer(options):
    """pyarrow's writer writes a part a page, a header or a footer at a time; the pieces, kept
    as they came, join to the same file as the part's bytes in one buffer."""
    slices = [TABLE.slice(start, 100) for start in (0, 100, 200)]
    pieces = [_pieces(rows, **options) for rows in slices]
    assert all(len(p.pieces) > 3 for p in pieces) and [b"".join(p.pieces) for p in pieces] == [_parquet(rows, **options) for rows in slices]
    out = io.BytesIO()
    joined = f.JoinedFile(out, _pieces(TABLE.slice(0, 0), **options))
    for part in pieces:
        joined.append([part])
    joined.close()
    assert out.getvalue() == _joined([[_parquet(rows, **options)] for rows in slices], **options)


@given(st.lists(st.integers(1, 2_000), max_size=6))
def test_a_footer_is_found_across_any_pieces(sizes):
    """Bytes cut anywhere (the footer, its length or its magic split across pieces): the footer
    and its start are those of the bytes whole."""
    data = _parquet(TABLE.slice(0, 50))
    cuts = sorted({min(cut, len(data)) for cut in itertools.accumulate(sizes)} - {len(data)})
    chunks = [memoryview(data[a:b]) for a, b in zip([0, *cuts], [*cuts, len(data)])]
    assert f.chunks_footer(chunks) == f.footer(data)


def test_a_buffer_written_to_pieces_is_kept_as_a_copy():
    """pyarrow may write a buffer it fills again later: a piece is a copy of its bytes then."""
    memory = bytearray(b"page")
    pieces = f.Pieces()
    pieces.write(pa.py_buffer(memory))
    memory[:] = b"next"
    assert pieces.pieces == [b"page"]
