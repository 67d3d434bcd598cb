"""Parquet output: row groups as large as the input's whatever the batch size or threads, a
dictionary only for values that repeat, ascending integers delta-encoded, distinct floats
byte-stream-split, the input's compression or `--compression`, and files no larger than
pyarrow's default writer makes of the same rows."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grpo_cli import advantages_file, objective_file
from grpo_cli.errors import UsageError
from grpo_cli.io import parquet_writer
from grpo_cli.io.parquet_writer import DEFAULT_ROW_GROUP_ROWS, Layout, RowGroupWriter, chunked, encodings, layout
from grpo_cli.parallel import runs as cut_runs

from ..conftest import SAMPLE, run_grpo


def _rollouts(path, rows=3000, rewards="continuous", row_group_size=1000, compression="snappy"):
    rng = np.random.default_rng(0)
    reward = np.round(rng.normal(size=rows), 1) if rewards == "continuous" else (rng.uniform(size=rows) < 0.5).astype(float)
    lengths = rng.integers(1, 9, size=rows)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    old = -rng.gamma(0.6, 0.8, size=int(lengths.sum())).astype(np.float32)
    table = pa.table(
        {
            "prompt_id": np.arange(rows) // 8,
            "source": pa.array([f"set-{k % 3}" for k in range(rows)]),
            "reward": reward,
            "logprobs": pa.ListArray.from_arrays(pa.array(offsets), pa.array(old)),
            "old_logprobs": pa.ListArray.from_arrays(pa.array(offsets), pa.array(old)),
        }
    )
    pq.write_table(table, path, row_group_size=row_group_size, compression=compression)
    return path


def _columns(path) -> dict[str, tuple[str, str]]:
    """Each leaf: (how its values are encoded: dictionary, delta, split or plain; codec), from the first row group."""
    group = pq.read_metadata(path).row_group(0)

    def encoding(column) -> str:
        if column.has_dictionary_page:
            return "dictionary"
        named = {"DELTA_BINARY_PACKED": "delta", "BYTE_STREAM_SPLIT": "split"}
        return next((named[e] for e in column.encodings if e in named), "plain")

    return {group.column(j).path_in_schema: (encoding(group.column(j)), group.column(j).compression) for j in range(group.num_columns)}


def test_row_groups_are_the_inputs_whatever_the_batch_size(tmp_path):
    source = _rollouts(tmp_path / "in.parquet")
    for batch_rows in (7, 64, 4096):
        advantages_file(str(source), str(tmp_path / f"out-{batch_rows}.parquet"), batch_rows=batch_rows)
    meta = pq.read_metadata(tmp_path / "out-7.parquet")
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [1000, 1000, 1000]
    assert (tmp_path / "out-7.parquet").read_bytes() == (tmp_path / "out-64.parquet").read_bytes() == (tmp_path / "out-4096.parquet").read_bytes()


def test_a_dictionary_only_where_values_repeat(tmp_path):
    source = _rollouts(tmp_path / "in.parquet")
    objective_file(str(source), str(tmp_path / "out.parquet"))
    written = {path: encoding for path, (encoding, _) in _columns(tmp_path / "out.parquet").items()}
    assert written["source"] == written["reward"] == written["n_tokens"] == "dictionary"  # 3 strings, ~60 distinct rewards, 1-8
    assert written["prompt_id"] == "delta"  # ascending integers
    assert written["logprobs.list.element"] == written["old_logprobs.list.element"] == "split"  # distinct floats
    assert written["advantage"] == written["objective_sum"] == "split"  # continuous rewards: distinct advantages


def test_advantages_of_binary_rewards_repeat_and_get_a_dictionary(tmp_path):
    source = _rollouts(tmp_path / "in.parquet", rewards="binary")
    advantages_file(str(source), str(tmp_path / "out.parquet"))
    assert _columns(tmp_path / "out.parquet")["advantage"][0] == "dictionary"


def test_encodings_of_nested_types():
    table = pa.table(
        {
            "s": pa.array([{"a": k % 2, "b": float(k), "step": k // 3} for k in range(100)]),
            "m": pa.array([[("k", k % 2)] for k in range(100)], pa.map_(pa.string(), pa.int64())),
            "d": pa.array(["x", "y"] * 50).dictionary_encode(),
            "flag": pa.array([True, False] * 50),
            "row": pa.array(range(100), pa.int32()),
            "down": pa.array(range(100, 0, -1)),
        }
    )
    assert encodings(table) == {
        "use_dictionary": ["s.a", "m.key_value.key", "m.key_value.value", "d"],
        "column_encoding": {"s.step": "DELTA_BINARY_PACKED", "row": "DELTA_BINARY_PACKED", "s.b": "BYTE_STREAM_SPLIT"},
    }
    assert encodings(table.slice(0, 0)) == {"use_dictionary": [], "column_encoding": {}}


def _written(path, table: pa.Table, threads: int, rows: int, batch_rows: int = 97) -> bytes:
    writer = RowGroupWriter(str(path), table.schema, Layout("zstd", rows), threads)
    for batch in table.to_batches(max_chunksize=batch_rows):
        writer.write_batch(batch)
    writer.close()
    return path.read_bytes()


def test_the_encodings_are_the_first_row_groups_whatever_the_batches(tmp_path):
    """Each column's encoding is judged on the first row group alone: a batch that reaches past
    it (the row groups a parallel read gives end where the stored ones do; a streamed batch
    need not) chose a dictionary here for values distinct in the first row group, when the rest
    repeat one value."""
    x = np.concatenate([np.linspace(0, 1, 30), np.full(970, 0.5)])
    table = pa.table({"x": x})
    files = [_written(tmp_path / f"{batch_rows}.parquet", table, 1, 30, batch_rows) for batch_rows in (7, 30, 1000)]
    assert files[0] == files[1] == files[2]
    assert pq.read_metadata(tmp_path / "7.parquet").row_group(0).column(0).encodings == ("RLE", "BYTE_STREAM_SPLIT")


@given(st.lists(st.integers(0, 40), min_size=1, max_size=6), st.integers(1, 120), st.booleans())
def test_the_encodings_do_not_depend_on_the_chunks_a_row_group_came_in(sizes, sample, nulls):
    """A leaf is judged on its first values whether the first chunk holds them (taken as it is)
    or they span chunks (combined): token lists that repeat from the 7th value on, beside
    ascending ids and repeated rewards."""
    rows = sum(sizes)
    lengths = [k % 5 for k in range(rows)]
    values = np.concatenate([np.linspace(0, 1, 6), np.full(max(0, sum(lengths) - 6), 0.5)])[: sum(lengths)]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    tokens = pa.ListArray.from_arrays(
        pa.array(offsets), pa.array(values, pa.float32()), mask=pa.array([nulls and k % 7 == 3 for k in range(rows)], pa.bool_())
    )
    table = pa.table({"id": np.arange(rows), "reward": np.arange(rows) % 2 / 1.0, "tokens": tokens})
    cuts = np.cumsum([0, *sizes])
    chunks = pa.Table.from_batches([b for a, b in zip(cuts[:-1], cuts[1:]) for b in table.slice(a, b - a).to_batches()], table.schema)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(parquet_writer, "SAMPLE_VALUES", sample)
        assert encodings(chunks) == encodings(table.combine_chunks())


def test_only_the_rows_that_hold_each_leafs_sample_are_taken(monkeypatch):
    monkeypatch.setattr(parquet_writer, "SAMPLE_VALUES", 4)
    first = pa.array([[0.5, 1.5], [2.5, 3.5, 4.5]], pa.list_(pa.float32()))
    column = pa.chunked_array([first, pa.array([[5.5]], first.type)])
    assert parquet_writer._head(column).buffers()[3].address == first.buffers()[3].address
    ids = pa.chunked_array([pa.array([1, 2]), pa.array([3, 4, 5])])
    assert parquet_writer._head(ids).to_pylist() == [1, 2, 3, 4]  # the first chunk's rows, doubled


@pytest.mark.parametrize("rows", [0, 1, 999, 10_000])
@pytest.mark.parametrize("budget", [parquet_writer.ENCODING_BYTES_PER_THREAD, 1])
def test_the_file_does_not_depend_on_the_threads_that_encode_it(tmp_path, monkeypatch, rows, budget):
    """Row groups encoded apart, their columns in runs, and joined make, byte for byte, the
    file one pyarrow writer makes of them, whatever the number of threads, and whether several
    row groups are held encoding or one (``budget``)."""
    monkeypatch.setattr(parquet_writer, "ENCODING_BYTES_PER_THREAD", budget)
    rng = np.random.default_rng(1)
    table = pa.table(
        {
            "id": np.arange(rows) // 8,
            "x": rng.normal(size=rows),
            "tokens": pa.array([[float(k)] * (k % 4) if k % 5 else None for k in range(rows)], pa.list_(pa.float32())),
            "s": pa.array([{"name": f"n{k % 7}", "v": k % 3} for k in range(rows)], pa.struct([("name", pa.string()), ("v", pa.int8())])),
        }
    ).replace_schema_metadata({"origin": "test"})
    files = [_written(tmp_path / f"{threads}.parquet", table, threads, 1000) for threads in (1, 2, 5)]
    assert files[0] == files[1] == files[2]
    single = tmp_path / "single.parquet"
    with pq.ParquetWriter(single, table.schema, compression="zstd", **encodings(table)) as writer:
        for start in range(0, rows, 1000):
            writer.write_table(table.slice(start, 1000), row_group_size=1000)
    assert files[0] == single.read_bytes()
    assert pq.read_table(tmp_path / "2.parquet").equals(table)


def _token_lists(rows: int) -> pa.Table:
    rng = np.random.default_rng(2)
    offsets = np.concatenate([[0], np.cumsum(rng.integers(50, 81, size=rows))]).astype(np.int32)
    return pa.table(
        {
            "id": np.arange(rows),
            "logprobs": pa.ListArray.from_arrays(pa.array(offsets), pa.array(-rng.gamma(0.6, 0.8, size=offsets[-1]).astype(np.float32))),
        }
    )


@pytest.mark.parametrize("threads", [1, 2])
def test_the_pages_do_not_depend_on_the_batches_a_row_group_came_in(tmp_path, threads):
    """Row groups of token lists of several pages each: pyarrow cuts a list column's pages at
    points it counts from the start of each chunk it is handed, so a row group made of other
    batches had other pages (as --threads 16 and 2 made, with other batch sizes). Handed in
    chunks of ``chunk_rows`` from the row group's start, the file is the one pyarrow writes
    of each row group in those chunks."""
    table = _token_lists(40_000)
    layout = Layout("zstd", 20_000, 1000)

    def written(batch_rows: int) -> bytes:
        writer = RowGroupWriter(str(tmp_path / f"{batch_rows}.parquet"), table.schema, layout, threads)
        for batch in table.to_batches(max_chunksize=batch_rows):
            writer.write_batch(batch)
        writer.close()
        return (tmp_path / f"{batch_rows}.parquet").read_bytes()

    files = [written(batch_rows) for batch_rows in (7_777, 20_000, 40_000)]
    assert files[0] == files[1] == files[2]
    meta = pq.read_metadata(tmp_path / "7777.parquet")
    assert meta.row_group(0).column(1).total_uncompressed_size > 4 << 20  # pages of 1 MiB: several a row group
    single = tmp_path / "single.parquet"
    with pq.ParquetWriter(single, table.schema, compression="zstd", **encodings(table)) as writer:
        for start in (0, 20_000):
            writer.write_table(pa.concat_tables([table.slice(at, 1000) for at in range(start, start + 20_000, 1000)]), row_group_size=20_000)
    assert files[0] == single.read_bytes()


def test_rows_without_lists_get_the_pages_of_the_whole_row_group(tmp_path):
    """The chunks leave the pages of columns without lists (ids, rewards, advantages; a
    dictionary or not) as pyarrow cuts them in a row group of one chunk."""
    rng = np.random.default_rng(3)
    table = pa.table({"id": np.arange(400_000) // 8, "x": rng.normal(size=400_000), "reward": np.round(rng.normal(size=400_000), 1)})
    writer = RowGroupWriter(str(tmp_path / "ours.parquet"), table.schema, Layout("none", 400_000, 1000), 2)
    for batch in table.to_batches(max_chunksize=7_777):
        writer.write_batch(batch)
    writer.close()
    assert pq.read_metadata(tmp_path / "ours.parquet").row_group(0).column(1).total_uncompressed_size > 3 << 20
    pq.write_table(table, tmp_path / "whole.parquet", row_group_size=400_000, compression="none", **encodings(table))
    assert (tmp_path / "ours.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()


@pytest.mark.parametrize(("budget", "parts"), [(parquet_writer.ENCODING_BYTES_PER_THREAD, 1), (1, 3)])
def test_a_row_group_is_cut_into_runs_only_for_threads_the_row_groups_held_leave_idle(tmp_path, monkeypatch, budget, parts):
    """Small row groups, two held encoding on two threads: each is encoded whole (a part costs
    a writer of its own); one held at a time (``budget``): its columns in runs of about half
    its bytes (three equal columns: one each)."""
    monkeypatch.setattr(parquet_writer, "ENCODING_BYTES_PER_THREAD", budget)
    encoded: list[list[str]] = []
    whole = RowGroupWriter._encoded
    monkeypatch.setattr(RowGroupWriter, "_encoded", lambda self, rows: encoded.append(rows.column_names) or whole(self, rows))
    table = pa.table({"id": np.arange(10_000), "x": np.linspace(0, 1, 10_000), "y": np.linspace(1, 2, 10_000)})
    _written(tmp_path / "out.parquet", table, 2, 1000)
    assert len(encoded) == 1 + 10 * parts  # the empty file's schema, then each row group's parts
    assert sorted(name for names in encoded[1 : 1 + parts] for name in names) == ["id", "x", "y"]


def test_compression_is_the_inputs_unless_given(tmp_path):
    source = _rollouts(tmp_path / "in.parquet", compression="zstd")
    advantages_file(str(source), str(tmp_path / "same.parquet"))
    advantages_file(str(source), str(tmp_path / "none.parquet"), compression="none")
    assert {codec for _, codec in _columns(tmp_path / "same.parquet").values()} == {"ZSTD"}
    assert {codec for _, codec in _columns(tmp_path / "none.parquet").values()} == {"UNCOMPRESSED"}
    run_grpo("advantages", str(SAMPLE / "rollouts.jsonl"), "-o", str(tmp_path / "from-jsonl.parquet"))
    assert {codec for _, codec in _columns(tmp_path / "from-jsonl.parquet").values()} == {"SNAPPY"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--compression", "zstd"], "Error: --compression applies to written rows; pass --output or --output-dir too, or drop it\n"),
        (["--compression", "zstd", "-o", "x.jsonl"], "Error: --compression applies to parquet output, and this output is jsonl; drop it\n"),
    ],
)
def test_compression_without_parquet_output_is_refused(tmp_path, args, message):
    proc = run_grpo("advantages", str(SAMPLE / "rollouts.parquet"), *[str(tmp_path / a) if a.endswith(".jsonl") else a for a in args], check=False)
    assert proc.returncode == 2
    assert proc.stderr.decode() == message


def test_layout_numbers():
    assert layout(None, None, None, 100) == Layout("snappy", DEFAULT_ROW_GROUP_ROWS, 2621)  # chunks of 256 KiB
    assert layout(None, "uncompressed", 1_000_000, 2048) == Layout("none", 65_536, 128)  # capped at 128 MiB a row group
    assert layout("zstd", "snappy", 1000, 16) == Layout("zstd", 1000, 16_384)
    assert layout(None, None, None, 1 << 20) == Layout("snappy", 128, 1)
    with pytest.raises(UsageError, match="unknown `compression` 'lzo'"):
        layout("lzo", None, None, 1)


@pytest.mark.parametrize("rewards", ["binary", "continuous"])
def test_files_are_no_larger_than_pyarrows_default_writer(tmp_path, rewards):
    source = _rollouts(tmp_path / "in.parquet", rows=20_000, rewards=rewards, row_group_size=65_536)
    objective_file(str(source), str(tmp_path / "ours.parquet"))
    pq.write_table(pq.read_table(tmp_path / "ours.parquet"), tmp_path / "default.parquet")
    assert (tmp_path / "ours.parquet").stat().st_size <= (tmp_path / "default.parquet").stat().st_size


@given(st.lists(st.integers(0, 60), min_size=1, max_size=8), st.integers(1, 25))
def test_chunks_are_counted_from_the_start_whatever_the_batches(sizes, rows):
    """Every chunk holds ``rows`` rows (the last the rest), the same rows in order."""
    table = pa.concat_tables([pa.table({"x": np.arange(size) + sum(sizes[:k])}) for k, size in enumerate(sizes)])
    result = chunked(table, rows)
    assert [len(chunk) for chunk in result["x"].chunks] == [min(rows, table.num_rows - at) for at in range(0, table.num_rows, rows)]
    assert result.equals(table)


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=20), st.integers(1, 32))
def test_runs_cut_the_columns_in_order_into_runs_of_about_a_share(nbytes, parts):
    """Every column once, in order; a run passes its share of the bytes only where one column
    does; runs that end early end where the next column would pass it."""
    runs = cut_runs(nbytes, parts)
    assert [k for run in runs for k in run] == list(range(len(nbytes)))
    share = sum(nbytes) / parts
    for run, following in zip(runs, runs[1:] + [None]):
        held = sum(nbytes[k] for k in run)
        assert held <= share or len(run) == 1
        if following is not None:
            assert held + nbytes[following[0]] > share


@pytest.mark.parametrize("fmt, threads", [("parquet", 1), ("parquet", 2), ("jsonl", 1)])
def test_a_staged_file_that_holds_bytes_is_written_from_its_start(tmp_path, fmt, threads):
    """Writers append to the empty file they are given (not truncate it: see Format.writer);
    a file another process staged that already holds bytes (a retried Ray task's) is emptied."""
    from grpo_cli.io import Sink

    staged = tmp_path / "staged"
    staged.write_bytes(b"left over from a task that failed" * 1000)
    table = pa.table({"prompt_id": [1, 1, 2], "reward": [0.5, 1.0, 0.0]})
    sink = Sink(str(tmp_path / f"out.{fmt}"), fmt, table.schema, threads=threads, into=staged)
    for batch in table.to_batches():
        sink.write(batch)
    sink.close()
    read = pq.read_table(staged) if fmt == "parquet" else pa.Table.from_pylist([json.loads(line) for line in staged.read_text().splitlines()])
    assert read.equals(table)


FLOATS = st.sampled_from([0.0, -0.0, 1.5, 2.0, float("inf"), float("-inf"), float("nan"), -float("nan"), 1e-300])


@given(
    st.sampled_from([pa.int8(), pa.uint8(), pa.int32(), pa.int64(), pa.uint64(), pa.float32(), pa.float64()]),
    st.lists(st.one_of(st.none(), st.integers(0, 5), FLOATS), min_size=1, max_size=40),
    st.booleans(),
    st.integers(0, 5),
)
def test_encodings_judge_integers_and_floats_as_arrow_does(t, values, ascending, offset):
    """The numpy path of `encodings` (no pyarrow.compute import) counts distinct values (a null
    one of them, floats by their bits: 0.0 and -0.0 two) and finds ascending integers (nulls
    passed over) exactly as Arrow's `count_distinct` and `all(less_equal(...))` do, sliced too."""
    import pyarrow.compute as pc

    if pa.types.is_integer(t):
        values = [None if v is None else int(v) if isinstance(v, int) else 3 for v in values]
        if ascending:
            values = [None if v is None else k for k, v in enumerate(values)]
    array = pa.array([None] * offset + values, t).slice(offset)
    numbers = parquet_writer._numbers(array)
    assert numbers is not None
    assert parquet_writer._distinct(array, numbers) == pc.count_distinct(array, mode="all").as_py()
    if pa.types.is_integer(t):
        assert parquet_writer._ascending(*numbers) == (pc.all(pc.less_equal(array[:-1], array[1:])).as_py() is not False)


def test_a_parts_small_writes_reach_python_gathered(tmp_path):
    """Each write into Python (:class:`~grpo_cli.io.parquet_footer.Pieces`) takes the GIL:
    page headers and small pages come gathered (two pieces in a row hold at least
    ``GATHER_BYTES``), a larger page in one piece; the bytes are pyarrow's."""
    thin = pa.table({"id": np.arange(65_536) // 8, "reward": np.arange(65_536) % 2 * 1.0, "advantage": np.linspace(-1, 1, 65_536)})
    offsets = np.arange(0, 64 * 4_097, 64, dtype=np.int32)
    tokens = pa.table({"logprobs": pa.ListArray.from_arrays(offsets, np.linspace(-9, 0, 64 * 4_096, dtype=np.float32))})
    for table in (thin, tokens):
        part = RowGroupWriter(str(tmp_path / "unused.parquet"), table.schema, Layout(), threads=2)._encoded(table)
        sizes = [len(piece) for piece in part.pieces]
        assert len(sizes) < 8 and all(a + b >= parquet_writer.GATHER_BYTES for a, b in zip(sizes, sizes[1:]))
        whole = pa.BufferOutputStream()
        pq.write_table(table, whole, row_group_size=len(table))
        assert b"".join(part.pieces) == whole.getvalue().to_pybytes()


class _Pair(pa.ExtensionType):
    """An extension type stored as a struct of two leaves."""

    def __init__(self):
        super().__init__(pa.struct([("a", pa.int64()), ("b", pa.list_(pa.string()))]), "grpo_cli.test.pair")

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):
        return cls()


def test_leaf_count_is_the_parquet_columns_a_type_is_stored_in(tmp_path):
    """Nested types, a dictionary, and an extension type stored as a struct (its storage's
    leaves, not one)."""
    types = [
        pa.int64(),
        pa.list_(pa.string()),
        pa.map_(pa.string(), pa.int64()),
        pa.struct([("x", pa.int8()), ("y", pa.list_(pa.float32()))]),
        pa.dictionary(pa.int32(), pa.string()),
        _Pair(),
        pa.large_list(pa.struct([("p", pa.int8()), ("q", pa.int8())])),
    ]
    for k, kind in enumerate(types):
        pq.write_table(pa.table({"c": pa.nulls(3, kind)}), tmp_path / f"{k}.parquet")
        assert parquet_writer.leaf_count(kind) == pq.read_metadata(tmp_path / f"{k}.parquet").num_columns, kind
    assert [parquet_writer.leaf_count(kind) for kind in types] == [1, 1, 2, 2, 1, 2, 2]
