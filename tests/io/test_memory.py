"""Arrow data in memory as a source: read where it is, in order, in batches of the size asked for."""

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from grpo_cli.errors import InputError
from grpo_cli.io import open_arrow

TABLE = pa.Table.from_batches(
    [pa.record_batch({"prompt_id": [k // 4], "reward": [k / 8]}) for k in range(10)]
    + [pa.record_batch({"prompt_id": list(range(3, 13)), "reward": [0.5] * 10})]
)


def test_a_table_is_read_in_slices_that_copy_no_chunk():
    with open_arrow(TABLE) as source:
        assert source.row_counts.tolist() == [20] and source.pieces[0] == "tables" and source.layout().compression == "none"
        batches = [batch for _, batch in source.iter_batches(4, ["reward"])]
        assert [b.num_rows for b in batches] == [4, 4, 4, 4, 4] and pa.Table.from_batches(batches).equals(TABLE.select(["reward"]))
        last = TABLE.column("reward").chunk(10)  # rows 10-19, one chunk: the slices of it are views
        view = batches[-1].column(0)  # rows 16-19
        assert view.buffers()[1].address == last.buffers()[1].address and view.offset == 6
        assert source.read_columns(["prompt_id"]).equals(TABLE.select(["prompt_id"]))


def test_a_record_batch_and_a_dataset_read_as_the_table(tmp_path):
    for k in range(3):
        pq.write_table(TABLE.slice(7 * k, 7), tmp_path / f"part-{k}.parquet", row_group_size=3)
    for data in (TABLE.combine_chunks().to_batches()[0], ds.dataset(tmp_path)):
        with open_arrow(data) as source:
            assert source.row_counts.tolist() == [20] and source.bytes_per_row > 0
            assert pa.Table.from_batches([b for _, b in source.iter_batches(5)]).equals(TABLE.combine_chunks())


def test_a_reader_is_spooled_once_and_read_twice():
    reader = pa.RecordBatchReader.from_batches(TABLE.schema, TABLE.to_batches())
    with open_arrow(reader) as source:
        assert source.read_columns(["reward"]).equals(TABLE.select(["reward"]))
        assert pa.Table.from_batches([b for _, b in source.iter_batches(8)]).equals(TABLE.combine_chunks())


def test_no_rows_or_a_name_twice_is_refused():
    with pytest.raises(InputError, match=r"^<frame>: no rows$"):
        with open_arrow(TABLE.slice(0, 0)):
            pass
    twice = pa.table([[1], [2.0]], names=["reward", "reward"])
    with pytest.raises(InputError, match="reward"):
        with open_arrow(twice) as source:
            source.read_columns(["reward"])
