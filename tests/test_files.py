"""The file API: results do not depend on batch size, thread count, or how rows are split
across files; groups may span files."""

import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grpo_cli import ObjectiveConfig, advantages_file, objective_file

from .conftest import examples
from .strategies import rollout_tables
from .io.test_source import bits

SETTINGS = settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_groups_may_span_files(tmp_path):
    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"prompt_id": ["a", "b"], "reward": [0.0, 1.0]}), tmp_path / "in" / "1.parquet")
    pq.write_table(pa.table({"prompt_id": ["a", "b"], "reward": [1.0, 1.0]}), tmp_path / "in" / "2.parquet")
    figures = advantages_file(str(tmp_path / "in"), str(tmp_path / "out.parquet"))
    assert pq.read_table(tmp_path / "out.parquet")["advantage"].to_pylist() == [-1.0, 0.0, 1.0, 0.0]
    assert figures["groups"] == 2 and figures["zero_variance_groups"]["count"] == 1


def test_threads_and_batch_sizes_give_identical_outputs(sample_parquet, tmp_path):
    outputs = []
    for threads, batch_rows in [(1, 16_384), (2, 7), (3, 64)]:
        out = tmp_path / f"o{threads}.parquet"
        figures = objective_file(str(sample_parquet), str(out), threads=threads, batch_rows=batch_rows)
        outputs.append((pq.read_table(out), figures))
    for table, figures in outputs[1:]:
        assert table.equals(outputs[0][0]) and figures == outputs[0][1]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_results_do_not_depend_on_batch_size(sample_parquet, tmp_path, fmt):
    source = sample_parquet.with_suffix(f".{fmt}")
    config = ObjectiveConfig(epsilon_high=0.28, dual_clip=3.0, beta=0.01)
    outputs, summaries = [], []
    for rows in (1, 7, 64, 100_000):
        out = tmp_path / f"o{rows}.parquet"
        summaries.append(objective_file(str(source), str(out), config=config, batch_rows=rows))
        outputs.append(pq.read_table(out))
    assert all(s == summaries[0] for s in summaries)  # bit-identical figures
    assert all(o.equals(outputs[0]) for o in outputs)


@SETTINGS
@given(rollout_tables(), st.integers(1, 4), st.sampled_from(["seq-mean-token-sum", "token-mean", "seq-mean-token-mean"]))
def test_objective_is_unchanged_when_rows_are_split_across_files_and_batches(tmp_path, table, parts, agg):
    parts = min(parts, table.num_rows)  # every file has rows (an empty one is refused)
    whole = tmp_path / "whole.parquet"
    pq.write_table(table, whole)
    folder = tmp_path / f"split{parts}"
    folder.mkdir(exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    edges = np.linspace(0, table.num_rows, parts + 1).astype(int)
    for k, (a, b) in enumerate(zip(edges, edges[1:])):
        pq.write_table(table.slice(a, b - a), folder / f"part{k}.parquet")
    given = {"config": ObjectiveConfig(agg=agg), "prompt_col": "prompt_id"}  # (its ids may all differ)
    assert objective_file(str(folder), batch_rows=2, threads=3, **given) == objective_file(str(whole), **given)


def narrowed(schema: pa.Schema) -> pa.Schema:
    """``schema`` with float64 (and lists of it) as float32."""

    def narrow(t: pa.DataType) -> pa.DataType:
        return pa.float32() if t == pa.float64() else pa.list_(narrow(t.value_type)) if pa.types.is_list(t) else t

    return pa.schema([f.with_type(narrow(f.type)) for f in schema])


@SETTINGS
@given(rollout_tables(), st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=4))
def test_results_are_unchanged_when_files_differ_in_float_widths_and_unused_columns(tmp_path, table, files):
    """Each file float32 or float64, with an unused column or without: the numbers of one
    consistent file (its values float32-exact, so a float32 file holds the same values)."""
    whole = table.cast(narrowed(table.schema)).cast(table.schema)
    files = files[: whole.num_rows]  # every file has rows (an empty one is refused)
    pq.write_table(whole, tmp_path / "whole.parquet")
    folder = tmp_path / "split"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    edges = np.linspace(0, whole.num_rows, len(files) + 1).astype(int)
    for k, ((narrow, extra), a, b) in enumerate(zip(files, edges, edges[1:])):
        part = whole.slice(a, b - a).cast(narrowed(whole.schema)) if narrow else whole.slice(a, b - a)
        pq.write_table(part.append_column("note", pa.array([str(k)] * part.num_rows)) if extra else part, folder / f"part{k}.parquet")
    for run in (advantages_file, objective_file):
        given = {"prompt_col": "prompt_id"}  # (its ids may all differ)
        assert run(str(folder), batch_rows=2, threads=2, **given) == run(str(tmp_path / "whole.parquet"), **given)


@SETTINGS
@given(st.integers(1, 50), st.integers(0, 2**32 - 1), st.integers(1, 64))
def test_advantages_do_not_depend_on_batch_size_and_are_finite(tmp_path, n, seed, batch_rows):
    rng = np.random.default_rng(seed)
    table = pa.table({"prompt_id": rng.integers(0, 5, n), "reward": rng.normal(size=n) * 10.0 ** rng.integers(-5, 5)})
    pq.write_table(table, tmp_path / "r.parquet")
    advantages_file(str(tmp_path / "r.parquet"), str(tmp_path / "a.parquet"), batch_rows=batch_rows, threads=2, prompt_col="prompt_id")
    advantages_file(str(tmp_path / "r.parquet"), str(tmp_path / "b.parquet"), prompt_col="prompt_id")  # (its ids may all differ)
    a = pq.read_table(tmp_path / "a.parquet")["advantage"].to_numpy()
    assert np.isfinite(a).all()
    assert bits(pq.read_table(tmp_path / "b.parquet")["advantage"]) == bits(pa.chunked_array([a]))


def test_unknown_options_are_refused_before_anything_is_read():
    from grpo_cli import UnknownOptionError

    with pytest.raises(UnknownOptionError, match=r"objective_file\(\) has no option `advantage_column`; did you mean `advantage_col`\?"):
        objective_file("no-such-file.parquet", advantage_column="adv")
    with pytest.raises(UnknownOptionError, match=r"advantages_file\(\) has no option `round`; did you mean `round_digits`\?"):
        advantages_file("no-such-file.parquet", round=3)
