"""Inputs and outputs: files, folders, globs and stdin read as one dataset; one output or one
per input; JSON Lines written with exact digits and never NaN as null; readers fed garbage
only raise our errors."""

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grpo_cli import advantages_file, objective_file
from grpo_cli.errors import GrpoError

from ..conftest import examples, grpo_executable, run_grpo, write_jsonl_rows

SETTINGS = settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

finite64 = st.floats(allow_nan=False, allow_infinity=False)
finite32 = st.floats(allow_nan=False, allow_infinity=False, width=32)


def test_folder_glob_and_file_list_equal_the_single_file(steps, sample_parquet, tmp_path):
    run_grpo("advantages", str(sample_parquet), "-o", str(tmp_path / "one.parquet"), "-q")
    expected = pq.read_table(tmp_path / "one.parquet")
    files = sorted(str(p) for p in steps.iterdir())
    for inputs in ([str(steps)], [str(steps / "*.parquet")], files):
        run_grpo("advantages", *inputs, "-o", str(tmp_path / "all.parquet"), "-q")
        assert pq.read_table(tmp_path / "all.parquet").equals(expected)


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
    proc = run_grpo("advantages", str(steps), "--output-dir", str(steps), check=False)
    assert proc.returncode == 2 and "is an input file" in proc.stderr.decode()
    (tmp_path / "file").write_text("")
    proc = run_grpo("advantages", str(steps), "--output-dir", str(tmp_path / "file"), check=False)
    assert proc.stderr.decode() == f"Error: --output-dir {str(tmp_path / 'file')!r} is a file, not a folder\n"
    assert len(list(steps.iterdir())) == 4


def test_error_rows_name_the_file_they_are_in(steps):
    table = pq.read_table(steps / "step_2.parquet")
    rewards = table["reward"].to_numpy().copy()
    rewards[5] = np.nan
    pq.write_table(table.set_column(table.schema.get_field_index("reward"), "reward", pa.array(rewards)), steps / "step_2.parquet")
    proc = run_grpo("advantages", str(steps), "--on-null", "error", check=False)
    assert f"{steps / 'step_2.parquet'}: row 5 (prompt id 'gsm8k-0020'): column 'reward' is null or NaN" in proc.stderr.decode()


def test_hive_style_folder_names_add_no_columns(sample_parquet, tmp_path):
    folder = tmp_path / "step=3"
    folder.mkdir()
    (folder / "r.parquet").write_bytes(sample_parquet.read_bytes())
    figures = advantages_file(str(folder / "r.parquet"), str(tmp_path / "o.parquet"))
    assert figures["rows"] == 320
    assert pq.read_table(tmp_path / "o.parquet").column_names == pq.read_table(sample_parquet).column_names + ["advantage"]


# Datasets as they sit on disk: folders at any depth, hive partitions, `**` globs, files that
# differ in ways that do not matter, and `--output-dir` mirroring the folders.


def write_parts(folder: Path, layout: dict[str, pa.Table]) -> Path:
    """Write each table at its path below ``folder``; return ``folder``."""
    for relative, table in layout.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, folder / relative)
    return folder


def quarters(sample_parquet) -> list[pa.Table]:
    """The sample in 4 slices of 80 rows (groups of 8 stay whole)."""
    table = pq.read_table(sample_parquet)
    return [table.slice(80 * k, 80) for k in range(4)]


def annotated(tmp_path, *args: str) -> pa.Table:
    """`grpo advantages` on ``args`` written to one parquet file, read back."""
    out = tmp_path / f"annotated{len(list(tmp_path.glob('annotated*')))}.parquet"
    run_grpo("advantages", *args, "-o", str(out), "-q")
    return pq.read_table(out)


def test_folders_are_read_at_any_depth_in_path_order(sample_parquet, tmp_path):
    q = quarters(sample_parquet)
    data = write_parts(
        tmp_path / "data",
        {
            "b/0.parquet": q[2],
            "a/y.parquet": q[1],
            "c.parquet": q[3],
            "a/x/1.parquet": q[0],
            # skipped, as Spark and pyarrow skip them: hidden files, _SUCCESS, _temporary/
            "_temporary/0/part-0.parquet": q[0],
            ".cache/part-0.parquet": q[0],
        },
    )
    (data / "_SUCCESS").write_text("")
    (data / "a" / "notes.txt").write_text("not a rollout file")
    assert annotated(tmp_path, str(data)).equals(annotated(tmp_path, str(sample_parquet)))


def test_files_are_taken_in_natural_order_numbers_as_numbers(sample_parquet, tmp_path):
    """Per-rank and per-step dumps: rank2 before rank10, 9.jsonl before 10.jsonl (plain
    sorting would put rank10 after rank1 and mix the consecutive blocks of prompts)."""
    q = quarters(sample_parquet)
    data = write_parts(tmp_path / "data", {"rank10/9.parquet": q[2], "rank10/10.parquet": q[3], "rank2/x.parquet": q[1], "rank1/x.parquet": q[0]})
    whole = annotated(tmp_path, str(sample_parquet))
    assert annotated(tmp_path, str(data)).equals(whole)
    assert annotated(tmp_path, str(data / "rank*" / "*.parquet")).equals(whole)


def test_double_star_in_a_glob_matches_any_depth(sample_parquet, tmp_path):
    q = quarters(sample_parquet)
    data = write_parts(tmp_path / "data", {"x/step=0/a.parquet": q[0], "x/step=1/a.parquet": q[1], "y/b.parquet": q[2], "z.parquet": q[3]})
    assert annotated(tmp_path, str(data / "**" / "*.parquet")).equals(annotated(tmp_path, str(sample_parquet)))


def test_hive_partitions_are_columns_when_asked_for(sample_parquet, tmp_path):
    q = quarters(sample_parquet)
    layout = {
        "run=exp%201/step=0/part-0.parquet": q[0],
        "run=exp%201/step=1/part-0.parquet": q[1],
        "run=exp%202/step=2/part-0.parquet": q[2],
        "run=__HIVE_DEFAULT_PARTITION__/step=10/part-0.parquet": q[3],
    }
    data = write_parts(tmp_path / "data", layout)
    order = sorted(layout, key=Path)  # path order: run=__HIVE... first
    one = tmp_path / "one.parquet"
    pq.write_table(pa.concat_tables([layout[p] for p in order]), one)
    expected = annotated(tmp_path, str(one))

    assert annotated(tmp_path, str(data)).equals(expected)  # folder names add no columns unless asked
    with_partitions = annotated(tmp_path, str(data), "--hive")
    assert with_partitions.column_names == expected.column_names[:-1] + ["run", "step", "advantage"]
    assert with_partitions.schema.field("step").type == pa.int64() and with_partitions.schema.field("run").type == pa.string()
    assert with_partitions.select(expected.column_names).equals(expected)
    assert with_partitions["step"].to_pylist() == [10] * 80 + [0] * 80 + [1] * 80 + [2] * 80
    assert with_partitions["run"].to_pylist() == [None] * 80 + ["exp 1"] * 160 + ["exp 2"] * 80

    # a partition column plays a role like any other column
    summary = tmp_path / "s.json"
    run_grpo("advantages", str(data / "**" / "*.parquet"), "--hive", "--prompt-col", "step", "--summary-json", str(summary), "-q")
    figures = json.loads(summary.read_text())
    assert figures["groups"] == 4 and figures["group_sizes"] == {"80": 4}
    proc = run_grpo("advantages", str(data), "--prompt-col", "step", check=False)
    assert proc.returncode == 1 and "no column 'step' for prompt id (--prompt-col)" in proc.stderr.decode()


def test_hive_with_nothing_to_read_or_a_clash_is_refused(sample_parquet, steps, tmp_path):
    proc = run_grpo("advantages", str(steps), "--hive", check=False)
    assert proc.returncode == 2 and proc.stderr.decode() == (
        "Error: --hive reads the key=value folders below a folder or glob input as columns, and no input file is in one; drop --hive\n"
    )
    data = write_parts(tmp_path / "data", {"prompt_id=p/part-0.parquet": quarters(sample_parquet)[0]})
    proc = run_grpo("advantages", str(data), "--hive", check=False)
    assert proc.returncode == 1 and proc.stderr.decode() == (
        f"Error: {data / 'prompt_id=p' / 'part-0.parquet'}: column 'prompt_id' is both in the file and a partition folder; "
        "rename one, or drop --hive\n"
    )


def float32_exact(n: int, rng) -> np.ndarray:
    return rng.normal(size=n).astype(np.float32).astype(np.float64)


def test_float_widths_and_int_rewards_across_files_give_the_numbers_of_one_consistent_file(tmp_path):
    rng = np.random.default_rng(3)
    n, lengths = 48, rng.integers(0, 6, 48)
    rewards = np.concatenate([float32_exact(16, rng), rng.normal(size=16), rng.integers(-3, 4, 16)])
    logprobs = lambda: pa.array([-np.abs(float32_exact(k, rng)) for k in lengths], pa.list_(pa.float64()))  # noqa: E731
    whole = pa.table({"prompt_id": np.arange(n) % 6, "reward": rewards, "logprobs": logprobs(), "old_logprobs": logprobs()})
    narrow = pa.schema(
        [("prompt_id", pa.int64()), ("reward", pa.float32()), ("logprobs", pa.list_(pa.float32())), ("old_logprobs", pa.list_(pa.float32()))]
    )
    data = write_parts(
        tmp_path / "data",
        {
            "a.parquet": whole.slice(0, 16).cast(narrow),  # float32 rewards and log-probs
            "b.parquet": whole.slice(16, 16),  # float64
            "c.parquet": whole.slice(32, 16).cast(narrow.set(1, pa.field("reward", pa.int64()))),  # integer rewards
        },
    )
    pq.write_table(whole, tmp_path / "whole.parquet")
    for run in (advantages_file, objective_file):
        assert run(str(data), str(tmp_path / "d.parquet")) == run(str(tmp_path / "whole.parquet"), str(tmp_path / "w.parquet"))
        assert pq.read_table(tmp_path / "d.parquet").equals(pq.read_table(tmp_path / "w.parquet"))
    assert pq.read_schema(data / "a.parquet").field("reward").type == pa.float32()  # inputs untouched


def unused_columns_that_differ(sample_parquet, tmp_path) -> Path:
    """The sample in 4 files: an extra `note` (string), a missing `response`, `note` as int64
    (no one type holds both), and one as it is."""
    q = quarters(sample_parquet)
    return write_parts(
        tmp_path / "data",
        {
            "0.parquet": q[0].append_column("note", pa.array(["x"] * 80)),
            "1.parquet": q[1].drop(["response"]),
            "2.parquet": q[2].append_column("note", pa.array(np.arange(80))),
            "3.parquet": q[3],
        },
    )


def test_columns_a_run_does_not_read_may_differ_across_files(sample_parquet, tmp_path):
    data = unused_columns_that_differ(sample_parquet, tmp_path)
    for run in (advantages_file, objective_file):  # summary only: nothing refused
        assert run(str(data)) == run(str(sample_parquet))

    out = tmp_path / "out"  # one output per input: each keeps its own columns
    run_grpo("objective", str(data), "--output-dir", str(out), "-q")
    run_grpo("objective", str(sample_parquet), "-o", str(tmp_path / "whole.parquet"), "-q")
    whole = pq.read_table(tmp_path / "whole.parquet")
    for k in range(4):
        written, given = pq.read_table(out / f"{k}.parquet"), pq.read_table(data / f"{k}.parquet")
        assert written.column_names[: given.num_columns] == given.column_names
        assert written.select(given.column_names).equals(given)
        assert written.drop(given.column_names).equals(whole.slice(80 * k, 80).drop(pq.read_schema(sample_parquet).names))

    proc = run_grpo("objective", str(data), "-o", str(tmp_path / "one.parquet"), check=False)
    assert proc.returncode == 1 and proc.stderr.decode() == (
        f"Error: {data / '2.parquet'}: column 'note' is int64 but string in {data / '0.parquet'}, "
        "which one output cannot hold (--output-dir writes one output per input file)\n"
    )
    assert not (tmp_path / "one.parquet").exists()

    (data / "2.parquet").unlink()  # one output: the union of the columns, null where a file has none
    pq.write_table(quarters(sample_parquet)[2], data / "2.parquet")
    one = annotated(tmp_path, str(data))
    expected = annotated(tmp_path, str(sample_parquet))
    assert one.column_names == expected.column_names[:-1] + ["note", "advantage"]
    assert one["note"].to_pylist() == ["x"] * 80 + [None] * 240
    assert one["response"].to_pylist() == expected["response"].to_pylist()[:80] + [None] * 80 + expected["response"].to_pylist()[160:]
    assert one.drop(["note", "response"]).equals(expected.drop(["response"]))


def test_a_column_the_run_reads_missing_from_one_file_is_one_line(steps, tmp_path):
    pq.write_table(pq.read_table(steps / "step_2.parquet").drop(["ref_logprobs"]), steps / "step_2.parquet")
    proc = run_grpo("objective", str(steps), "-o", str(tmp_path / "o.parquet"), check=False)
    assert proc.returncode == 1 and proc.stderr.decode() == (
        f"Error: {steps / 'step_2.parquet'}: no column 'ref_logprobs', which this run reads (other input files have it)\n"
    )
    assert not (tmp_path / "o.parquet").exists()
    written = annotated(tmp_path, str(steps))  # `grpo advantages` does not read it: null where it is missing
    assert written["ref_logprobs"].null_count == 80 and written.num_rows == 320


def test_output_dir_is_made_and_mirrors_the_input_folders(sample_parquet, tmp_path):
    q = quarters(sample_parquet)
    data = write_parts(tmp_path / "data", {f"step={k}/part-0.parquet": q[k] for k in range(4)})
    out = tmp_path / "new" / "out"
    run_grpo("objective", str(data), "--output-dir", str(out), "-q")
    run_grpo("objective", str(sample_parquet), "-o", str(tmp_path / "whole.parquet"), "-q")
    whole = pq.read_table(tmp_path / "whole.parquet")
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*.parquet")) == [f"step={k}/part-0.parquet" for k in range(4)]
    for k in range(4):
        assert pq.read_table(out / f"step={k}" / "part-0.parquet").equals(whole.slice(80 * k, 80))
    run_grpo("advantages", str(data / "*" / "*.parquet"), "--output-dir", str(tmp_path / "js"), "--output-format", "jsonl", "-q")
    assert sorted(str(p.relative_to(tmp_path / "js")) for p in (tmp_path / "js").rglob("*.*")) == [f"step={k}/part-0.jsonl" for k in range(4)]


def test_output_dir_refuses_true_collisions_and_leaves_nothing_when_a_run_fails(sample_parquet, tmp_path):
    q = quarters(sample_parquet)
    data = write_parts(tmp_path / "data", {f"step={k}/part-0.parquet": q[k] for k in range(4)})
    other = write_parts(tmp_path / "other", {"step=0/part-0.parquet": q[0]})
    proc = run_grpo("advantages", str(data), str(other), "--output-dir", str(tmp_path / "out"), check=False)
    assert proc.returncode == 2 and proc.stderr.decode() == (
        f"Error: --output-dir would write both {data / 'step=0' / 'part-0.parquet'} and {other / 'step=0' / 'part-0.parquet'} "
        f"to {tmp_path / 'out' / 'step=0' / 'part-0.parquet'}; run them separately, or pass the folder that holds both\n"
    )

    last = q[3].to_pylist()
    last[-1]["logprobs"] = [0.5]  # a positive log-prob in the last row of the last file
    last[-1]["old_logprobs"] = last[-1]["ref_logprobs"] = [-0.5]
    pq.write_table(pa.Table.from_pylist(last, schema=q[3].schema), data / "step=3" / "part-0.parquet")
    proc = run_grpo("objective", str(data), "--output-dir", str(tmp_path / "new" / "out"), "--threads", "1", check=False)
    assert proc.returncode == 1 and "row 79 (prompt id 'gsm8k-0039'): column 'logprobs' has a positive log-prob" in proc.stderr.decode()
    assert not (tmp_path / "new").exists() and not (tmp_path / "out").exists()


def test_output_inside_a_folder_input_is_refused(steps):
    for args in (["-o", str(steps / "all.parquet")], ["--output-dir", str(steps / "annotated")]):
        proc = run_grpo("advantages", str(steps), *args, check=False)
        target = args[1] if args[0] == "-o" else str(steps / "annotated" / "step_0.parquet")
        assert proc.returncode == 2 and proc.stderr.decode() == (
            f"Error: output {target!r} is inside input folder {str(steps)!r}, whose sub-folders are read too: "
            "a later run would read it as input; write it outside\n"
        )
    assert sorted(p.name for p in steps.iterdir()) == [f"step_{k}.parquet" for k in range(4)]


def test_csv_and_other_formats_are_named_not_read_as_json(tmp_path):
    text = b"prompt_id,reward\na,1\na,0\n"
    (tmp_path / "r.csv").write_bytes(text)
    (tmp_path / "r.txt").write_bytes(text)
    cases = [
        (
            [str(tmp_path / "r.csv")],
            None,
            f"{tmp_path / 'r.csv'}: CSV is not supported; convert it to parquet or JSON Lines (or pass --input-format if it holds one of them)",
        ),
        (
            [str(tmp_path / "r.txt")],
            None,
            f"{tmp_path / 'r.txt'}: neither parquet nor JSON Lines (it begins {text[:24]!r}); pass --input-format if it is one",
        ),
        (["-"], text, f"<stdin>: neither parquet nor JSON Lines (it begins {text[:24]!r}); pass --input-format if it is one"),
    ]
    for args, stdin, message in cases:
        proc = run_grpo("advantages", *args, stdin=stdin, check=False)
        assert proc.returncode == 1 and proc.stderr.decode() == f"Error: {message}\n"
    # a name that does not tell, holding JSON Lines (blank lines first), is read
    write_jsonl_rows(tmp_path / "r.json", [{"prompt_id": "a", "reward": 1}, {"prompt_id": "a", "reward": 0}])
    (tmp_path / "r.json").write_text("\n" + (tmp_path / "r.json").read_text())
    assert advantages_file(str(tmp_path / "r.json"))["rows"] == 2


@st.composite
def tables(draw) -> pa.Table:
    """Rollouts with every kind of column JSON can carry: ints, float64/float32 scalars and
    lists (empty lists), strings, booleans, an all-null column."""
    n = draw(st.integers(1, 12))
    groups = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    sizes = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    optional = lambda s: st.one_of(st.none(), s)  # noqa: E731
    return pa.table(
        {
            "prompt_id": pa.array([f"p{g}" for g in groups]),
            "reward": pa.array(draw(st.lists(st.floats(-1e6, 1e6), min_size=n, max_size=n)), pa.float64()),
            "score32": pa.array(draw(st.lists(optional(finite32), min_size=n, max_size=n)), pa.float32()),
            "big": pa.array(draw(st.lists(optional(finite64), min_size=n, max_size=n)), pa.float64()),
            "step": pa.array(draw(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=n, max_size=n)), pa.int32()),
            "text": pa.array(draw(st.lists(optional(st.text(max_size=8)), min_size=n, max_size=n))),
            "ok": pa.array(draw(st.lists(optional(st.booleans()), min_size=n, max_size=n))),
            "nothing": pa.array([None] * n, pa.float64()),
            "logprobs": pa.array([draw(st.lists(finite32, min_size=k, max_size=k)) for k in sizes], pa.list_(pa.float32())),
            # Null lists and null items are left out: a list column whose items are all null is
            # read from JSON as list<null> with offsets pyarrow then rejects (found by this test;
            # known issue, not yet worked around).
            "extra": pa.array([draw(st.lists(finite64, max_size=3)) for _ in range(n)], pa.list_(pa.float64())),
        }
    )


def bits(column: pa.ChunkedArray) -> list:
    """Values with floats as their exact bit patterns (so -0.0 != 0.0 and 1 ulp shows)."""

    def one(v):
        if isinstance(v, float):
            return np.float64(v).view(np.uint64).item()
        if isinstance(v, list):
            return [one(x) for x in v]
        return v

    return [one(v) for v in column.to_pylist()]


@SETTINGS
@given(tables())
def test_parquet_jsonl_parquet_round_trip_is_bit_exact(tmp_path, table):
    pq.write_table(table, tmp_path / "a.parquet")
    # its ids may all differ; its `step` holds any integer, not a trainer's step (by: none)
    advantages_file(str(tmp_path / "a.parquet"), str(tmp_path / "b.jsonl"), prompt_col="prompt_id", by="none")
    advantages_file(str(tmp_path / "b.jsonl"), str(tmp_path / "c.parquet"), prompt_col="prompt_id", by="none")
    once = pq.read_table(tmp_path / "c.parquet")
    assert once.column_names == table.column_names + ["advantage"]
    back = once.select(table.column_names).cast(table.schema)
    for name in table.column_names:
        assert bits(back[name]) == bits(table[name]), name
    assert pq.read_table(tmp_path / "a.parquet").equals(table)  # the input is untouched
    # the JSONL file computes the very numbers the parquet does
    advantages_file(str(tmp_path / "a.parquet"), str(tmp_path / "d.parquet"), prompt_col="prompt_id", by="none")
    assert bits(once["advantage"]) == bits(pq.read_table(tmp_path / "d.parquet")["advantage"])


json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**70), 2**70) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


keys = st.sampled_from(["prompt_id", "uid", "reward", "score", "logprobs", "old_logprobs", "mask", "x"])


def must_fail_cleanly_or_work(path) -> None:
    for run in (advantages_file, objective_file):
        try:
            run(str(path), str(path.parent / f"out{path.suffix or '.jsonl'}"))
        except GrpoError:
            pass
        assert not any(p.name.endswith(".tmp") for p in path.parent.iterdir())


@SETTINGS
@given(st.binary(max_size=400), st.sampled_from([".parquet", ".jsonl", ""]))
def test_readers_fed_random_bytes_only_raise_our_errors(tmp_path, data, suffix):
    path = tmp_path / f"in{suffix}"
    path.write_bytes(data)
    must_fail_cleanly_or_work(path)


@SETTINGS
@given(st.binary(max_size=300))
def test_parquet_reader_fed_damaged_parquet_only_raises_our_errors(tmp_path, noise):
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"prompt_id": [1, 1], "reward": [0.0, 1.0]}), sink)
    good = sink.getvalue().to_pybytes()
    cut = len(noise) % len(good)
    path = tmp_path / "in.parquet"
    path.write_bytes(good[:cut] + noise + good[cut + len(noise) :])
    must_fail_cleanly_or_work(path)


@SETTINGS
@given(st.lists(st.dictionaries(keys, json_values, max_size=5), min_size=1, max_size=6))
def test_jsonl_reader_fed_random_json_only_raises_our_errors(tmp_path, rows):
    must_fail_cleanly_or_work(write_jsonl_rows(tmp_path / "in.jsonl", rows))


def test_jsonl_lists_of_nulls_read_as_valid_arrays(tmp_path):
    """pyarrow's JSON reader gives ``[null, null]`` (type ``list<null>``) offsets past its entries;
    the reader rebuilds such lists at any depth, so every kernel can read them."""
    from grpo_cli.io.formats.jsonl import parse_chunk

    rows = [{"a": {"b": [None, None]}, "c": [[None], [None, None]], "d": None}, {"a": None, "c": None, "d": [None]}]
    table = parse_chunk("".join(json.dumps(r) + "\n" for r in rows).encode(), 1, "x.jsonl")
    table.validate(full=True)
    assert table.to_pylist() == rows


@pytest.mark.parametrize(
    "rows, message",
    [
        ([{"prompt_id": 1, "reward": [None, None]}], "every row is unscorable (its rewards are all null)"),
        ([{"prompt_id": 1, "reward": [], "mask": None}], "row 0 (prompt id 1): column 'mask' must hold a list per row (found null)"),
        ([{"prompt_id": 1, "reward": [1.0], "mask": [None]}], "row 0 (prompt id 1): column 'mask' has a null entry"),
    ],
)
def test_list_rewards_of_nulls_or_a_null_mask_are_refused_in_one_line(tmp_path, rows, message):
    """Found by the JSON fuzz test: these were internal Arrow errors."""
    path = write_jsonl_rows(tmp_path / "in.jsonl", rows)
    with pytest.raises(GrpoError, match=re.escape(message)):
        advantages_file(str(path), str(tmp_path / "out.jsonl"))
    assert [p.name for p in tmp_path.iterdir()] == ["in.jsonl"]


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_jsonl_output_refuses_nan_instead_of_writing_null(tmp_path, value):
    pq.write_table(pa.table({"prompt_id": [1, 1], "reward": [0.0, 1.0], "metric": [0.5, value]}), tmp_path / "in.parquet")
    with pytest.raises(GrpoError, match=r"row 1: column 'metric' holds NaN or infinity, which JSON Lines cannot hold"):
        advantages_file(str(tmp_path / "in.parquet"), str(tmp_path / "out.jsonl"))
    assert [p.name for p in tmp_path.iterdir()] == ["in.parquet"]


@pytest.mark.parametrize("suffix", ["parquet", "jsonl"])
def test_held_columns_give_the_batches_reading_gives(tmp_path, suffix, monkeypatch):
    """A write pass takes the first pass's columns from memory (``held``): its batches are
    those reading gives, a part that stores a column in another type reads it, and a part
    with nothing else to read is never opened."""
    from grpo_cli.io import open_source

    rows = [{"prompt_id": k // 2, "reward": k / 4, "note": f"n{k}"} for k in range(7)]
    parts = [
        pa.table({"prompt_id": pa.array([r["prompt_id"] for r in rows], t), "reward": [r["reward"] for r in rows], "note": [r["note"] for r in rows]})
        for t in (pa.int64(), pa.int32())
    ]
    paths = [tmp_path / f"{name}.{suffix}" for name in "ab"]
    for path, table in zip(paths, parts):
        if suffix == "parquet":
            pq.write_table(table, path, row_group_size=3)
        else:
            write_jsonl_rows(path, table.to_pylist())
    with open_source([str(p) for p in paths]) as source:
        held = source.read_columns(["prompt_id", "reward"])
        read = list(source.iter_batches(2))
        taken = list(source.iter_batches(2, held=held))
        assert [k for k, _ in taken] == [k for k, _ in read]
        assert all(a.equals(b) for (_, a), (_, b) in zip(taken, read))
        assert len(taken) == len(read)

    table = pa.table({"prompt_id": pa.array([r["prompt_id"] for r in rows], pa.int64()), "reward": [r["reward"] for r in rows]})
    if suffix == "parquet":
        pq.write_table(table, paths[0])
    else:
        write_jsonl_rows(paths[0], table.to_pylist())
    with open_source(str(paths[0])) as source:
        held = source.read_columns(["prompt_id", "reward"])
        expected = pa.Table.from_batches([b for _, b in source.iter_batches(2)])
        monkeypatch.setattr(type(source.reader), "batches", lambda *a: pytest.fail("a part with every column held was read again"))
        taken = [b for _, b in source.iter_batches(2, held=held)]
        assert [b.num_rows for b in taken] == [2, 2, 2, 1]
        assert pa.Table.from_batches(taken).equals(expected)


def test_a_struct_reward_field_missing_from_one_file_is_refused(tmp_path):
    """Issue 43, class 3: its rows would read null and be left unscored in silence."""
    folder = tmp_path / "structs"
    folder.mkdir()
    pq.write_table(pa.table({"prompt_id": [0, 0], "rewards": pa.array([{"acc": 1.0, "fmt": 0.0}, {"acc": 0.0, "fmt": 1.0}])}), folder / "a.parquet")
    pq.write_table(pa.table({"prompt_id": [1, 1], "rewards": pa.array([{"fmt": 0.0}, {"fmt": 1.0}])}), folder / "b.parquet")
    proc = run_grpo("advantages", str(folder), "--reward-col", "rewards.acc", check=False)
    assert (
        proc.returncode == 1
        and proc.stderr.decode() == f"Error: {folder / 'b.parquet'}: no field 'rewards.acc', which this run reads (other input files have it)\n"
    )
    run_grpo("advantages", str(folder), "--reward-col", "rewards.fmt", "-q")  # in every file: read


def test_hive_values_are_never_rounded_nor_made_infinite(tmp_path, sample_parquet):
    """Issue 43, class 4: `k=9007199254740993` beside `k=0.5` would round to ...992 as float64,
    and `k=1e400`, `k=nan` become inf, NaN: such keys are read as the strings written."""
    from grpo_cli.io.unify import typed

    assert typed(pa.array(["9007199254740993", "0.5"])).to_pylist() == ["9007199254740993", "0.5"]
    for texts in (["1e400", "2"], ["nan", "1"], ["inf", "1"]):
        assert typed(pa.array(texts)).type == pa.string()
    assert typed(pa.array(["1", "2.5"])).to_pylist() == [1.0, 2.5] and typed(pa.array(["3", "9007199254740993"])).to_pylist() == [3, 9007199254740993]


def test_symlinks_in_a_folder_input_are_followed_once(tmp_path, sample_parquet):
    """Issue 43, class 2: a `loop -> .` link read the same file 41 times, two links walked
    without end. Each real folder is entered once; a file reached by two paths is refused."""
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    pq.write_table(pq.read_table(sample_parquet), data / "sub" / "a.parquet")
    (data / "sub" / "loop").symlink_to(data)
    (data / "back").symlink_to(data / "sub")
    assert annotated(tmp_path, str(data)).equals(annotated(tmp_path, str(sample_parquet)))
    (data / "b.parquet").symlink_to(data / "sub" / "a.parquet")
    proc = run_grpo("advantages", str(data), "-q", check=False)
    assert proc.returncode == 1 and "are one file (a link): a folder is read once; remove the link" in proc.stderr.decode()


@pytest.mark.parametrize("change", ["replaced", "grown"])
def test_a_file_that_changes_between_passes_is_refused(tmp_path, sample_parquet, change):
    """Issue 43, class 6: a file replaced (`mv`) between two passes paired the first pass's ids
    and rewards with the new file's token lists (exit 0); a growing JSON Lines file was an
    internal error. Each file's size, time and identity are taken when it is first read and
    checked before every later read."""
    from grpo_cli.errors import InputError
    from grpo_cli.io import open_source

    path = tmp_path / "r.jsonl"
    rows = [{"prompt_id": "a", "reward": 1.0}, {"prompt_id": "a", "reward": 0.0}]
    write_jsonl_rows(path, rows)
    with open_source(str(path)) as source:
        source.read_columns(["reward"])  # the first pass
        if change == "replaced":
            other = write_jsonl_rows(tmp_path / "other.jsonl", [{**row, "reward": 0.5} for row in rows])
            os.replace(other, path)
        else:
            with open(path, "a") as f:
                f.write(json.dumps({"prompt_id": "b", "reward": 1.0}) + "\n")
        with pytest.raises(InputError, match=r"r\.jsonl: changed while this run read it"):
            source.read_columns(["prompt_id"])


@pytest.mark.parametrize("budget", [1, 1 << 20])
def test_parquet_row_groups_read_at_once_give_the_streamed_rows(tmp_path, monkeypatch, budget):
    """A file whose row groups fit ``threads`` times the read budget is read several runs of
    row groups at once (of about a batch's rows: a batch spans the small row groups of its
    run); the rows, their order and their types are the streamed reading's, and a damaged
    page is refused in one line either way."""
    from grpo_cli.errors import InputError
    from grpo_cli.io import open_source
    from grpo_cli.io.formats import parquet

    monkeypatch.setattr(parquet, "READ_BYTES_PER_THREAD", budget)
    rng = np.random.default_rng(3)
    lengths = rng.integers(0, 9, size=1000)
    table = pa.table(
        {
            "prompt_id": np.arange(1000) // 4,
            "reward": rng.normal(size=1000),
            "logprobs": pa.ListArray.from_arrays(
                np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32), pa.array(-rng.random(lengths.sum()), pa.float32())
            ),
        }
    )
    path = tmp_path / "r.parquet"
    pq.write_table(table, path, row_group_size=64, write_page_checksum=True)
    with open_source(str(path)) as source:
        streamed = [b for _, b in source.iter_batches(50)]
        for threads, rows in itertools.product((2, 5), (50, 200)):
            at_once = [b for _, b in source.iter_batches(rows, ["reward", "logprobs"], threads=threads)]
            assert max(b.num_rows for b in at_once) <= rows
            assert pa.Table.from_batches(at_once).equals(pa.Table.from_batches(streamed).select(["reward", "logprobs"]))
            if rows == 200 and budget > 1:  # runs of three row groups of 64 rows, a batch each
                assert [b.num_rows for b in at_once] == [192] * 5 + [40]
    assert pa.Table.from_batches(streamed).equals(table)
    data = bytearray(path.read_bytes())
    chunk = pq.read_metadata(path).row_group(9).column(1)
    data[(chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset) + chunk.total_compressed_size - 1] ^= 1
    path.write_bytes(data)
    with (
        open_source(str(path)) as source,
        pytest.raises(InputError, match=r"r\.parquet: row group 9, column 'reward': a page's checksum does not match"),
    ):
        list(source.iter_batches(50, threads=4))


@pytest.mark.parametrize("column", ["prompt_id", "reward"])
def test_a_page_whose_checksum_does_not_match_is_refused_naming_its_row_group(tmp_path, column):
    """Issue 43, class 9: a flipped bit in a file written with page checksums was read in
    silence (a prompt id or a reward changed). Pages that carry a checksum are verified; one
    that does not match names its file, row group and column."""
    table = pa.table({"prompt_id": [f"p{k // 4}" for k in range(40)], "reward": [k / 8 for k in range(40)]})
    path = tmp_path / "r.parquet"
    pq.write_table(table, path, row_group_size=20, compression="none", write_page_checksum=True)
    chunk = pq.read_metadata(path).row_group(1).column(table.column_names.index(column))
    end = chunk.data_page_offset if chunk.has_dictionary_page else chunk.data_page_offset + chunk.total_compressed_size
    data = bytearray(path.read_bytes())
    data[end - 1] ^= 1  # the last byte of the dictionary's last id, or of the last reward
    path.write_bytes(data)
    assert not pq.read_table(path).equals(table)  # read without verifying: wrong values, no error
    proc = run_grpo("advantages", str(path), check=False)
    line = f"Error: {path}: row group 1, column {column!r}: a page's checksum does not match its bytes (the file is damaged)\n"
    assert proc.returncode == 1 and proc.stderr.decode() == line
    pq.write_table(table, path, row_group_size=20, write_page_checksum=True)
    assert annotated(tmp_path, str(path)).select(table.column_names).equals(table)  # undamaged: read


def test_a_prompt_id_float64_would_round_names_its_file_and_row(tmp_path):
    """Issue 43, class 18: an integer id of 2^53+1 in one file, beside a file whose ids are
    float64, was refused without its file or row: naming the row read the ids again, which
    failed the same way. The row is named without its id."""
    pq.write_table(pa.table({"prompt_id": [1, 1, 2**53 + 1, 2**53 + 1], "reward": [0.0, 1.0, 0.5, 1.0]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"prompt_id": [3.5, 3.5], "reward": [0.0, 1.0]}), tmp_path / "b.parquet")
    proc = run_grpo("advantages", str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet"), check=False)
    assert proc.returncode == 1 and proc.stderr.decode() == (
        f"Error: {tmp_path / 'a.parquet'}: row 2: column 'prompt_id' holds the integer 9007199254740993, which float64 would round; "
        "rescale it to at most 2^53\n"
    )


def test_batches_hold_about_32_mib_or_16_when_written_and_share_128_mib_across_threads(tmp_path):
    """Rows of 4 KiB: 8,192 a batch (32 MiB), 4,096 when the rows are written (the writer holds
    row groups besides), and at 16 threads 2,048 either way (128 MiB in flight in all)."""
    from grpo_cli.io import open_source

    path = tmp_path / "wide.parquet"
    pq.write_table(pa.table({"blob": pa.array([bytes(4096)] * 100, pa.binary())}), path, compression="none", use_dictionary=False)
    with open_source(str(path)) as source:
        assert 4096 <= source.bytes_per_row < 4200
        assert [source.batch_rows(threads, written=written) for threads in (1, 2, 16) for written in (False, True)] == [
            (32 << 20) // source.bytes_per_row,
            (16 << 20) // source.bytes_per_row,
            (32 << 20) // source.bytes_per_row,
            (16 << 20) // source.bytes_per_row,
            (8 << 20) // source.bytes_per_row,
            (8 << 20) // source.bytes_per_row,
        ]


def repeated_strings(path, rows: int, distinct: int = 20, size: int = 10_000) -> pa.Table:
    """``rows`` rows whose ``system`` string, one of ``distinct`` of ``size`` bytes, pyarrow
    stores with a dictionary: the footer counts each distinct string once."""
    rng = np.random.default_rng(0)
    system = pa.array([f"{k:02d}" * (size // 2) for k in range(distinct)]).take(pa.array(rng.integers(0, distinct, rows)))
    table = pa.table({"prompt_id": np.arange(rows) // 8, "reward": rng.random(rows), "system": system})
    pq.write_table(table, path, row_group_size=rows // 4)
    return table


def test_strings_stored_with_a_dictionary_count_every_row_in_full(tmp_path):
    """Batches and row groups are sized from the bytes once read: a string column that the
    footer counts at a few bytes a row (its 20 distinct values once, then a small index per
    row) is read 10 KB a row, and so counted; the same column read as a dictionary, or not
    read, adds nothing."""
    from grpo_cli.io import open_source
    from grpo_cli.io.formats.parquet import group_bytes

    table = repeated_strings(tmp_path / "strings.parquet", 4_000)
    meta = pq.read_metadata(tmp_path / "strings.parquet")
    assert sum(meta.row_group(g).total_byte_size for g in range(4)) < table.nbytes / 20  # the footer's count
    with open_source(str(tmp_path / "strings.parquet")) as source:
        assert 0.99 < source.bytes_per_row / (table.nbytes / 4_000) < 1.02
        assert source.batch_rows(2, written=True) == (16 << 20) // source.bytes_per_row  # 1,675 rows
        assert source.layout().chunk_rows == (256 << 10) // source.bytes_per_row  # 26 rows handed to the writer at once
        part = source.parts[0]
    assert group_bytes(part, meta, ["prompt_id", "reward"]) == [meta.row_group(g).total_byte_size for g in range(4)]
    assert 0.99 < sum(group_bytes(part, meta, ["reward", "system"])) / table.nbytes < 1.02
    pq.write_table(table.set_column(2, "system", table["system"].dictionary_encode()), tmp_path / "dictionary.parquet")
    with open_source(str(tmp_path / "dictionary.parquet")) as source:
        assert source.schema.field("system").type == pa.dictionary(pa.int32(), pa.string())
        assert source.bytes_per_row < 100


def peak_kib(*args: str) -> int:
    """The peak resident memory of ``grpo args``, in KiB (measured in a process of its own)."""
    measure = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    return int(subprocess.run([sys.executable, "-c", measure, grpo_executable(), *args], capture_output=True, check=True).stdout)


@pytest.mark.slow
def test_a_run_over_strings_stored_with_a_dictionary_holds_a_few_batches(tmp_path):
    """40,000 rows of a repeated 20 KB string (800 MB once read, a 1 MB file): `advantages -o`
    peaks well under the 1.5 GiB it took when its batches were sized from the footer's count."""
    repeated_strings(tmp_path / "strings.parquet", 40_000, size=20_000)
    assert peak_kib("advantages", str(tmp_path / "strings.parquet"), "-o", str(tmp_path / "out.parquet"), "-q") < 1 << 20
    assert pq.read_table(tmp_path / "out.parquet", columns=["system"]).equals(pq.read_table(tmp_path / "strings.parquet", columns=["system"]))


def test_batches_of_long_rows_hold_a_few_rows(tmp_path):
    """Rows of 256 KiB (a long response's token lists): 128 a batch (32 MiB), 64 when written,
    16 at 16 threads; not the 1,024 rows (256 MiB) that were once the least."""
    from grpo_cli.io import open_source

    path = tmp_path / "long.parquet"
    pq.write_table(pa.table({"blob": pa.array([bytes(256 << 10)] * 20, pa.binary())}), path, compression="none", use_dictionary=False)
    with open_source(str(path)) as source:
        assert [source.batch_rows(threads, written=written) for threads in (1, 2, 16) for written in (False, True)] == [127, 63, 127, 63, 31, 31]


@pytest.mark.slow
def test_a_run_over_long_rows_holds_a_few_batches(tmp_path):
    """300 rows of 100,000 tokens in two float32 lists (229 MiB once read): the summary-only
    `objective` peaks under 0.6 GiB (0.8 GiB when a batch held at least 1,024 rows: the file)."""
    rows, n = 300, 100_000
    logprobs = pa.ListArray.from_arrays(
        pa.array(np.arange(rows + 1, dtype=np.int32) * n), -np.random.default_rng(0).random(rows * n, dtype=np.float32)
    )
    table = pa.table({"prompt_id": np.arange(rows) // 6, "reward": np.arange(rows) % 2 * 1.0, "logprobs": logprobs, "old_logprobs": logprobs})
    pq.write_table(table, tmp_path / "long.parquet", row_group_size=64, compression="none", use_dictionary=["prompt_id"])
    assert peak_kib("objective", str(tmp_path / "long.parquet"), "-q") < 0.6 * (1 << 20)
