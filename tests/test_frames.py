"""DataFrames in, DataFrames out: each kind comes back as itself with the CLI's numbers."""

import inspect
import json

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from grpo_cli import AdvantageConfig, ObjectiveConfig, annotate_advantages, annotate_objective
from grpo_cli.errors import InputError, UnknownOptionError, UsageError

from .conftest import SAMPLE, run_grpo

TABLE = pq.read_table(SAMPLE / "rollouts_vllm.parquet")
FRAMES = {
    "pyarrow": (lambda t: t, lambda out: out),
    "pyarrow-chunked": (lambda t: pa.Table.from_batches(t.to_batches(max_chunksize=7)), lambda out: out),
    "record-batch": (lambda t: t.combine_chunks().to_batches()[0], lambda out: pa.Table.from_batches([out])),
    "record-batch-reader": (lambda t: pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=50)), lambda out: out.read_all()),
    "dataset": (lambda t: ds.dataset(t), lambda out: out.to_table()),
    "polars": (pl.from_arrow, lambda out: out.to_arrow()),
    "polars-lazy": (lambda t: pl.from_arrow(t).lazy(), lambda out: out.collect().to_arrow()),
    "pandas": (lambda t: t.to_pandas(), lambda out: pa.Table.from_pandas(out, preserve_index=False)),
}


def cli(tmp_path, command, *args):
    out, summary = tmp_path / "cli.parquet", tmp_path / "cli.json"
    run_grpo(command, str(SAMPLE / "rollouts_vllm.parquet"), *args, "-o", str(out), "-q", "--summary-json", str(summary))
    return pq.read_table(out), json.loads(summary.read_text())


@pytest.mark.parametrize("kind", FRAMES)
def test_advantages_come_back_as_the_same_type_with_the_clis_numbers(kind, tmp_path):
    make, to_arrow = FRAMES[kind]
    frame = make(TABLE)
    out, figures = annotate_advantages(frame, config=AdvantageConfig(estimator="rloo", std="sample", eps=1e-6), figures=True)
    assert type(out) is type(frame)
    expected, expected_figures = cli(tmp_path, "advantages", "--estimator", "rloo", "--std", "sample", "--eps", "1e-6")
    assert to_arrow(out)["advantage"].to_pylist() == expected["advantage"].to_pylist()
    assert figures["advantage"] == expected_figures["advantage"] and figures["config"] == expected_figures["config"]


@pytest.mark.parametrize("kind", FRAMES)
def test_objective_comes_back_with_every_per_row_column(kind, tmp_path):
    make, to_arrow = FRAMES[kind]
    out, figures = annotate_objective(
        make(TABLE),
        config=ObjectiveConfig(loss="sapo", is_level="token", is_cap=2.0, kl="k1"),
        advantage_config=AdvantageConfig(estimator="grpo", kl_in_reward=0.01, kl="k1"),
        figures=True,
    )
    expected, expected_figures = cli(
        tmp_path, "objective", "--loss", "sapo", "--is", "token", "--is-cap", "2", "--estimator", "grpo", "--kl-in-reward", "0.01", "--kl", "k1"
    )
    got = to_arrow(out)
    for name in ("advantage", "objective_sum", "rollout_kl_k3", "is_weight_mean"):
        np.testing.assert_array_equal(np.array(got[name].to_pylist(), dtype=float), np.array(expected[name].to_pylist(), dtype=float))
    assert figures["objective"] == expected_figures["objective"] and figures["rollout"] == expected_figures["rollout"]


def test_pandas_keeps_its_index_and_errors_name_the_frame():
    frame = TABLE.slice(0, 16).to_pandas()
    frame.index = range(100, 116)
    out = annotate_advantages(frame)
    assert list(out.index) == list(range(100, 116)) and list(out.columns[:-1]) == list(frame.columns)
    bad = pa.table({"prompt_id": [0, 0], "reward": [1.0, float("inf")]})
    with pytest.raises(InputError, match=r"^<frame>: row 1 \(prompt id 0\): column 'reward' is infinite"):
        annotate_advantages(bad)
    with pytest.raises(UsageError, match=r"^`frame` is a pyarrow Table, RecordBatch, RecordBatchReader or Dataset, .* \(found list\)"):
        annotate_advantages([1, 2, 3])


def test_unknown_keywords_say_which_option_is_meant():
    with pytest.raises(UnknownOptionError, match=r"^annotate_advantages\(\) has no option `reward_column`; did you mean `reward_col`\?"):
        annotate_advantages(TABLE, reward_column="reward")
    with pytest.raises(UnknownOptionError, match=r"^annotate_objective\(\) has no option `reward-col`; did you mean `reward_col`\?"):
        annotate_objective(TABLE, **{"reward-col": "reward"})
    for written in ("output_dir", "output_format", "compression"):  # the API writes no file
        with pytest.raises(UnknownOptionError, match=f"^annotate_advantages\\(\\) has no option `{written}`"):
            annotate_advantages(TABLE, **{written: None})
    with pytest.raises(UnknownOptionError, match=r"^annotate_advantages\(\) takes `std` in a config object: config=AdvantageConfig\(std=...\)$"):
        annotate_advantages(TABLE, std="sample")
    with pytest.raises(UnknownOptionError, match=r"did you mean `epsilon_high`, in a config object: config=ObjectiveConfig\(epsilon_high=...\)\?"):
        annotate_objective(TABLE, epsilon_hi=0.28)


def test_the_frame_functions_have_typed_keyword_only_signatures():
    for function in (annotate_advantages, annotate_objective):
        params = inspect.signature(function).parameters
        assert all(p.kind is not p.VAR_KEYWORD and p.annotation is not p.empty for p in params.values()), function.__name__
        assert [p.name for p in params.values() if p.kind is not p.KEYWORD_ONLY] == ["frame"]
        assert {"config", "prompt_col", "threads", "batch_rows", "figures"} <= set(params)


def test_frames_chain_with_pipe_and_give_what_one_call_gives():
    frame = pl.from_arrow(TABLE)
    sample, gspo = AdvantageConfig(std="sample"), ObjectiveConfig(loss="gspo")
    chained = frame.pipe(annotate_advantages, config=sample).pipe(annotate_objective, config=gspo)
    advantages, _ = annotate_advantages(frame, config=sample, figures=True)
    direct, figures = annotate_objective(advantages, config=gspo, figures=True)
    assert isinstance(chained, pl.DataFrame) and chained.equals(direct) and np.isfinite(figures["objective"])


def test_a_table_is_read_in_memory_and_a_reader_once(monkeypatch):
    """No temporary file holds a table's rows (only the annotated output is written); a
    one-shot RecordBatchReader is spooled once, so both passes read all of it."""
    import tempfile

    spools = []
    real = tempfile.NamedTemporaryFile
    monkeypatch.setattr(tempfile, "NamedTemporaryFile", lambda *a, **k: spools.append(k.get("prefix")) or real(*a, **k))
    annotate_advantages(TABLE)
    assert spools == []
    reader = pa.RecordBatchReader.from_batches(TABLE.schema, TABLE.to_batches(max_chunksize=64))
    out = annotate_advantages(reader).read_all()
    assert spools == ["grpo-frame-"] and out["advantage"].equals(annotate_advantages(TABLE)["advantage"])


def test_a_dataset_of_several_files_is_scanned_in_order(tmp_path):
    (tmp_path / "dataset").mkdir()
    for k, start in enumerate(range(0, TABLE.num_rows, 120)):
        pq.write_table(TABLE.slice(start, 120), tmp_path / "dataset" / f"part-{k}.parquet", row_group_size=50)
    out, figures = annotate_advantages(ds.dataset(tmp_path / "dataset"), figures=True, batch_rows=64)
    expected, expected_figures = cli(tmp_path, "advantages")
    assert out.to_table().equals(expected) and figures["advantage"] == expected_figures["advantage"]


def test_pandas_gets_the_advantages_as_float64_over_a_column_of_another_type():
    """An existing `advantage` column of strings or nullable Int64 is replaced by the float64
    advantages (pandas' metadata would give it its old dtype back; issue 43, class 10); the
    other columns keep their dtypes."""
    import pandas as pd

    for old in (["x", "y"], pd.array([1, None], dtype="Int64")):
        frame = pd.DataFrame({"prompt_id": [0, 0], "reward": [1.0, 0.0], "advantage": old, "n": pd.array([1, None], dtype="Int64")})
        out = annotate_advantages(frame)
        assert out["advantage"].dtype == "float64" and out["advantage"].tolist() == [1.0, -1.0]
        assert str(out["n"].dtype) == "Int64"
