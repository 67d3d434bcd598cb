"""Issue 4: several inputs as one dataset, per-input outputs, streamed JSON Lines, threads,
and a progress bar that never touches stdout."""

import io
import os
import pty
import subprocess

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_cli import jsonl
from grpo_cli.engines.local import advantages_file, objective_file
from grpo_cli.errors import InputError

from .conftest import grpo_executable, read_json, run_grpo, write_jsonl_rows


@pytest.fixture
def steps(tmp_path, sample_parquet):
    """The sample split into 4 step files of 80 rows (groups of 8 stay whole)."""
    folder = tmp_path / "steps"
    folder.mkdir()
    table = pq.read_table(sample_parquet)
    for k in range(4):
        pq.write_table(table.slice(80 * k, 80), folder / f"step_{k}.parquet")
    return folder


def test_folder_glob_and_file_list_equal_the_single_file(steps, sample_parquet, tmp_path):
    run_grpo("advantages", str(sample_parquet), "-o", str(tmp_path / "one.parquet"), "-q")
    expected = pq.read_table(tmp_path / "one.parquet")
    files = sorted(str(p) for p in steps.iterdir())
    for inputs in ([str(steps)], [str(steps / "*.parquet")], files):
        run_grpo("advantages", *inputs, "-o", str(tmp_path / "all.parquet"), "-q")
        assert pq.read_table(tmp_path / "all.parquet").equals(expected)


def test_groups_may_span_files(tmp_path):
    pq.write_table(pa.table({"prompt_id": ["a", "b"], "reward": [0.0, 1.0]}), tmp_path / "1.parquet")
    pq.write_table(pa.table({"prompt_id": ["a", "b"], "reward": [1.0, 1.0]}), tmp_path / "2.parquet")
    figures = advantages_file(str(tmp_path), str(tmp_path / "out.parquet"))
    assert pq.read_table(tmp_path / "out.parquet")["advantage"].to_pylist() == [-1.0, 0.0, 1.0, 0.0]
    assert figures["groups"] == 2 and figures["zero_variance_groups"]["count"] == 1


def test_output_dir_writes_one_file_per_input(steps, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    run_grpo("objective", str(steps), "--output-dir", str(out), "-q")
    run_grpo("objective", str(steps), "-o", str(tmp_path / "all.parquet"), "-q")
    whole = pq.read_table(tmp_path / "all.parquet")
    assert sorted(p.name for p in out.iterdir()) == [f"step_{k}.parquet" for k in range(4)]
    for k in range(4):
        assert pq.read_table(out / f"step_{k}.parquet").equals(whole.slice(80 * k, 80))


def test_output_dir_errors(steps, tmp_path):
    proc = run_grpo("advantages", str(steps), "--output-dir", str(tmp_path / "missing"), check=False)
    assert proc.returncode == 2 and "does not exist" in proc.stderr.decode()
    proc = run_grpo("advantages", str(steps), "--output-dir", str(steps), check=False)
    assert proc.returncode == 2 and "is an input file" in proc.stderr.decode()
    assert len(list(steps.iterdir())) == 4


def test_files_with_different_columns_are_refused(steps):
    pq.write_table(pa.table({"prompt_id": ["a"], "reward": [1]}), steps / "step_9.parquet")
    proc = run_grpo("advantages", str(steps), check=False)
    assert proc.returncode == 1
    assert proc.stderr.decode().startswith("Error: ") and "step_9.parquet: columns differ from" in proc.stderr.decode()


def test_error_rows_name_the_file_they_are_in(steps):
    table = pq.read_table(steps / "step_2.parquet")
    rewards = table["reward"].to_numpy().copy()
    rewards[5] = np.nan
    pq.write_table(table.set_column(table.schema.get_field_index("reward"), "reward", pa.array(rewards)), steps / "step_2.parquet")
    proc = run_grpo("advantages", str(steps), check=False)
    assert f"{steps / 'step_2.parquet'}: row 5 (prompt id 'gsm8k-0020'): column 'reward' is null or NaN" in proc.stderr.decode()


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


def test_threads_and_batch_sizes_give_identical_outputs(sample_parquet, tmp_path):
    outputs = []
    for threads, batch_rows in [(1, 16_384), (2, 7), (3, 64)]:
        out = tmp_path / f"o{threads}.parquet"
        figures = objective_file(str(sample_parquet), str(out), threads=threads, batch_rows=batch_rows)
        outputs.append((pq.read_table(out), figures))
    for table, figures in outputs[1:]:
        assert table.equals(outputs[0][0]) and figures == outputs[0][1]


def test_progress_bar_goes_to_a_terminal_stderr_only(sample_parquet):
    """With stderr on a terminal, the bar is drawn there; stdout carries only the data."""
    leader, follower = pty.openpty()
    proc = subprocess.run(
        [grpo_executable(), "advantages", str(sample_parquet), "-o", "-"],
        stdout=subprocess.PIPE, stderr=follower, env={**os.environ, "COLUMNS": "100", "TERM": "xterm"}, timeout=120,
    )
    os.close(follower)
    drawn = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    assert proc.returncode == 0
    assert pq.read_table(io.BytesIO(proc.stdout)).num_rows == 320
    assert b"rows " in drawn and "━".encode() in drawn and b"grpo advantages" in drawn
    assert b"row groups 1/1" in drawn
    piped = run_grpo("advantages", str(sample_parquet), "-o", "-")
    assert "━".encode() not in piped.stderr  # not a terminal: no bar


def test_summary_json_names_the_grouping(sample_parquet, tmp_path):
    run_grpo("advantages", str(sample_parquet), "--summary-json", str(tmp_path / "s.json"), "-q")
    assert read_json(tmp_path / "s.json")["grouped_by"] == "by column 'prompt_id'"


def test_advantage_column_is_read_in_the_one_streaming_pass(sample_parquet, tmp_path, monkeypatch):
    annotated = tmp_path / "adv.parquet"
    advantages_file(str(sample_parquet), str(annotated))
    expected = objective_file(str(annotated), batch_rows=7)

    def no_first_pass(self, columns):
        raise AssertionError(f"a first pass read {columns}")

    monkeypatch.setattr("grpo_cli.io.Source.read_columns", no_first_pass)
    assert objective_file(str(annotated), batch_rows=64) == expected
    assert objective_file(str(annotated), str(tmp_path / "o.parquet"), batch_rows=5, threads=2) == expected


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_bad_advantage_in_a_late_batch_names_its_row(tmp_path, fmt):
    rows = [{"prompt_id": f"p{i // 2}", "advantage": 0.5, "logprobs": [-0.1], "old_logprobs": [-0.2]} for i in range(9)]
    rows[7]["advantage"] = None
    path = tmp_path / f"r.{fmt}"
    if fmt == "parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        write_jsonl_rows(path, rows)
    with pytest.raises(InputError, match=r"row 7 \(prompt id 'p3'\): column 'advantage' is null or NaN"):
        objective_file(str(path), batch_rows=3)


def test_progress_reports_rows_and_row_groups_or_files(sample_parquet, sample_jsonl, tmp_path):
    grouped = tmp_path / "grouped.parquet"
    pq.write_table(pq.read_table(sample_parquet), grouped, row_group_size=100)  # 320 rows: 4 row groups
    calls = []
    advantages_file(str(grouped), str(tmp_path / "o.parquet"), batch_rows=64, progress=lambda *a: calls.append(a))
    assert calls[0] == (64, 320, "row groups 0/4") and calls[1] == (128, 320, "row groups 1/4")
    assert calls[-1] == (320, 320, "row groups 4/4")
    calls.clear()
    objective_file([str(sample_jsonl), str(sample_jsonl)], progress=lambda *a: calls.append(a))
    assert calls[-1] == (640, 640, "files 2/2")


def test_hive_style_folder_names_add_no_columns(sample_parquet, tmp_path):
    folder = tmp_path / "step=3"
    folder.mkdir()
    (folder / "r.parquet").write_bytes(sample_parquet.read_bytes())
    figures = advantages_file(str(folder / "r.parquet"), str(tmp_path / "o.parquet"))
    assert figures["rows"] == 320
    assert pq.read_table(tmp_path / "o.parquet").column_names == pq.read_table(sample_parquet).column_names + ["advantage"]
