"""JSON Lines streamed in chunks: types unified over the whole file, errors name the line."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_cli import advantages_file
from grpo_cli.io.formats import jsonl
from grpo_cli.errors import InputError

from ...conftest import run_grpo, write_jsonl_rows


def test_jsonl_late_values_keep_their_type_across_chunks(tmp_path, monkeypatch):
    """A column null (or integer) for the first chunks and float later is read as float."""
    monkeypatch.setattr(jsonl, "CHUNK_BYTES", 256)
    rows = [{"prompt_id": i // 4, "reward": i % 2, "note": None, "logprobs": [-0.5], "old_logprobs": [-0.5]} for i in range(400)]
    rows[-1].update(reward=0.25, note=1.5)
    write_jsonl_rows(tmp_path / "late.jsonl", rows)
    out = tmp_path / "out.parquet"
    advantages_file(str(tmp_path / "late.jsonl"), str(out))
    table = pq.read_table(out)
    assert table.schema.field("reward").type == pa.float64()
    assert table["note"].to_pylist()[-1] == 1.5 and table["note"].null_count == 399
    assert table["reward"].to_pylist()[-1] == 0.25


def test_jsonl_errors_name_the_line_in_a_late_chunk(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonl, "CHUNK_BYTES", 256)
    rows = [{"prompt_id": i // 4, "reward": 1.0} for i in range(300)]
    write_jsonl_rows(tmp_path / "bad.jsonl", rows)
    lines = (tmp_path / "bad.jsonl").read_text().splitlines()
    for number, line, message in [
        (250, '{"prompt_id": 62, "reward": 1.0', "line 250: not valid JSON"),
        (251, '{"prompt_id": 62, "reward": "high"}', "line 251: column 'reward' holds string where earlier lines hold number"),
        (252, "[1, 2]", "line 252: expected a JSON object"),
        (253, '{"prompt_id": 63, "reward": 1.0, "reward": 2.0}', "line 253: not valid JSON (duplicate column name 'reward')"),
    ]:
        broken = lines.copy()
        broken[number - 1] = line
        (tmp_path / "b.jsonl").write_text("\n".join(broken) + "\n")
        with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
            advantages_file(str(tmp_path / "b.jsonl"))


def test_a_column_named_empty_keeps_its_name(tmp_path):
    """A column named "" (legal in parquet and JSON) is written as "", not as polars' column_N
    (issue 43, class 8), and reads back as itself."""
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"prompt_id": [0, 0], "reward": [1.0, 0.0], "": [5, 6]}), src)
    out = tmp_path / "out.jsonl"
    run_grpo("advantages", str(src), "-o", str(out), "-q")
    assert out.read_text().splitlines() == ['{"prompt_id":0,"reward":1.0,"":5,"advantage":1.0}', '{"prompt_id":0,"reward":0.0,"":6,"advantage":-1.0}']
    back = tmp_path / "back.parquet"
    run_grpo("advantages", str(out), "-o", str(back), "-q")
    assert pq.read_table(back).column_names == ["prompt_id", "reward", "", "advantage"]


def test_invalid_utf8_is_refused_naming_the_line(tmp_path):
    """Issue 43, class 7: a string that is not UTF-8 would reach parquet as bytes that polars
    and pyarrow's full validation refuse; the line is named instead, and nothing is written."""
    src = tmp_path / "bad.jsonl"
    src.write_bytes(b'{"prompt_id": "a", "reward": 1.0}\n{"prompt_id": "a\xff", "reward": 0.0}\n')
    out = tmp_path / "out.parquet"
    proc = run_grpo("advantages", str(src), "-o", str(out), check=False)
    assert proc.returncode == 1 and proc.stderr.decode() == f"Error: {src}: line 2: not UTF-8 at byte 17 (JSON text is UTF-8)\n"
    assert not out.exists()


def test_a_struct_with_two_fields_of_one_name_is_refused_for_json_lines(tmp_path):
    """Issue 43, class 13 (an internal error): a JSON object cannot hold one key twice."""
    twice = pa.StructArray.from_arrays(
        [pa.array([1.0, 2.0]), pa.array([3.0, 4.0])], fields=[pa.field("x", pa.float64()), pa.field("x", pa.float64())]
    )
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"prompt_id": [0, 0], "reward": [1.0, 0.0], "s": twice}), src)
    out = tmp_path / "out.jsonl"
    proc = run_grpo("advantages", str(src), "-o", str(out), check=False)
    assert (
        proc.returncode == 1
        and proc.stderr.decode() == f"Error: {out}: column 's' holds a struct with two fields named 'x', which a JSON object cannot; write parquet\n"
    )
    assert not out.exists()
    run_grpo("advantages", str(src), "-o", str(tmp_path / "out.parquet"), "-q")  # parquet holds it


def test_two_objects_on_one_line_are_refused_naming_the_line(tmp_path):
    """Issue 43, class 18: they were read as two rows, every later line number off by one."""
    src = tmp_path / "two.jsonl"
    src.write_text('{"prompt_id": "b", "reward": 1.0}\n{"prompt_id": "a", "reward": 1.0} {"prompt_id": "a", "reward": 0.0}\n')
    proc = run_grpo("advantages", str(src), check=False)
    assert proc.returncode == 1 and proc.stderr.decode() == f"Error: {src}: line 2: two JSON objects on one line; JSON Lines holds one per line\n"
