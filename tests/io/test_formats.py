"""What every format in grpo_cli/io/formats/ promises (a new format's module is held to it here
with no test of its own written yet): found by its suffix and by its first bytes, read back as
written, in batches that make up the whole, and named in the choices and messages."""

from pathlib import PurePath

import pyarrow as pa
import pytest

from grpo_cli.errors import InputError, UsageError
from grpo_cli.io import FORMATS, LOCAL, Layout, Part, open_source
from grpo_cli.io.formats import BY_NAME, check_name, detect, format_from_name

ROWS = pa.table({"prompt_id": ["a", "a", "b", "b", "c"], "reward": [1.0, 0.0, 0.5, 0.25, 2.0], "tokens": [[1, 2], [3], [], [4, 5, 6], [7]]})


def written(tmp_path, fmt, name) -> str:
    path = str(tmp_path / name)
    writer = BY_NAME[fmt].writer(path, name, ROWS.schema, Layout(row_group_rows=2), threads=1)
    for batch in ROWS.to_batches(max_chunksize=3):
        writer.write_batch(batch)
    writer.close()
    return path


def test_parquet_and_json_lines_are_found_in_their_order():
    assert FORMATS == ("parquet", "jsonl")
    assert format_from_name("a/b.PQ") == "parquet" and format_from_name("b.ndjson") == "jsonl" and format_from_name("b.csv") is None
    with pytest.raises(UsageError, match=r"^unknown `input_format` 'csv' \(valid: parquet, jsonl\)$"):
        check_name("csv", "input_format")


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_format_reads_back_what_it_writes(tmp_path, fmt):
    path = written(tmp_path, fmt, f"rows.{fmt}")
    part = Part(path, path, PurePath(path).relative_to(tmp_path), LOCAL)
    reader = BY_NAME[fmt]
    scan = reader.scan(part)
    assert scan.rows == 5 and sum(scan.pieces) == 5 and scan.nbytes > 0
    assert scan.schema.names == ROWS.column_names
    columns = pa.schema([scan.schema.field("prompt_id"), scan.schema.field("reward")])
    whole = reader.read(part, columns)
    assert whole.column_names == ["prompt_id", "reward"] and whole["reward"].to_pylist() == ROWS["reward"].to_pylist()
    batches = list(reader.batches(part, 2, columns))
    assert max(b.num_rows for b in batches) <= 2 and pa.Table.from_batches(batches).equals(whole)
    with open_source(path) as source:
        assert source.read_columns(["prompt_id", "tokens"]).to_pylist() == ROWS.select(["prompt_id", "tokens"]).to_pylist()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_format_is_recognised_by_its_first_bytes(tmp_path, fmt):
    path = written(tmp_path, fmt, "rows")
    assert detect(Part(path, path, PurePath("rows"), LOCAL)) == fmt
    assert [name for name, f in BY_NAME.items() if f.sniff(open(path, "rb").read(64))] == [fmt]


def test_a_file_in_no_format_names_them_all(tmp_path):
    (tmp_path / "rows").write_bytes(b"\x00\x01 binary")
    with pytest.raises(InputError, match=r"rows: neither parquet nor JSON Lines \(it begins b'\\x00\\x01 binary'\); pass `input_format`"):
        detect(Part(str(tmp_path / "rows"), str(tmp_path / "rows"), PurePath("rows"), LOCAL))


def test_a_pickled_torch_file_is_refused_with_the_conversion(tmp_path):
    """verl's DataProto.save_to_disk writes a torch pickle: never unpickled (that runs its
    code), refused in one line that carries the one-off conversion to parquet."""
    from ..conftest import run_grpo

    for name, head in (("batch.pt", b"PK\x03\x04rest"), ("batch.pkl", b"\x80\x04rest"), ("batch.bin", b"\x80\x05rest")):
        path = tmp_path / name
        path.write_bytes(head)
        proc = run_grpo("advantages", str(path), check=False)
        line = proc.stderr.decode()
        assert proc.returncode == 1 and line.count("\n") == 1, name
        assert line.startswith(f"Error: {path}: a pickled torch or Python file (verl's DataProto) is not read") and "DataProto.load_from_disk" in line
