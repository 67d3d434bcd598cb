"""DataFrames in, DataFrames out: each type comes back as itself with the CLI's numbers."""

import json

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_cli import annotate_advantages, annotate_objective
from grpo_cli.errors import InputError, UnknownOptionError, UsageError

from .conftest import SAMPLE, run_grpo

TABLE = pq.read_table(SAMPLE / "rollouts_vllm.parquet")
FRAMES = {
    "pyarrow": (lambda t: t, lambda out: out),
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
    out, figures = annotate_advantages(frame, estimator="rloo", std="sample", eps=1e-6)
    assert type(out) is type(frame)
    expected, expected_figures = cli(tmp_path, "advantages", "--estimator", "rloo", "--std", "sample", "--eps", "1e-6")
    assert to_arrow(out)["advantage"].to_pylist() == expected["advantage"].to_pylist()
    assert figures["advantage"] == expected_figures["advantage"] and figures["config"] == expected_figures["config"]


@pytest.mark.parametrize("kind", FRAMES)
def test_objective_comes_back_with_every_per_row_column(kind, tmp_path):
    make, to_arrow = FRAMES[kind]
    out, figures = annotate_objective(make(TABLE), loss="sapo", is_level="token", is_cap=2.0, estimator="grpo", kl_in_reward=0.01, kl="k1")
    expected, expected_figures = cli(tmp_path, "objective", "--loss", "sapo", "--is", "token", "--is-cap", "2", "--estimator", "grpo",
                                     "--kl-in-reward", "0.01", "--kl", "k1")
    got = to_arrow(out)
    for name in ("advantage", "objective_sum", "rollout_kl_k3", "is_weight_mean"):
        np.testing.assert_array_equal(np.array(got[name].to_pylist(), dtype=float), np.array(expected[name].to_pylist(), dtype=float))
    assert figures["objective"] == expected_figures["objective"] and figures["rollout"] == expected_figures["rollout"]


def test_pandas_keeps_its_index_and_errors_name_the_frame():
    frame = TABLE.slice(0, 16).to_pandas()
    frame.index = range(100, 116)
    out, _ = annotate_advantages(frame)
    assert list(out.index) == list(range(100, 116)) and list(out.columns[:-1]) == list(frame.columns)
    bad = pa.table({"prompt_id": [0, 0], "reward": [1.0, float("inf")]})
    with pytest.raises(InputError, match=r"^<frame>: row 1 \(prompt id 0\): column 'reward' is infinite"):
        annotate_advantages(bad)
    with pytest.raises(UsageError, match="pyarrow Table, a polars DataFrame"):
        annotate_advantages([1, 2, 3])
    with pytest.raises(UnknownOptionError):
        annotate_advantages(TABLE, reward_column="reward")
