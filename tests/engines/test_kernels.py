"""Kernels are plain module-level functions of arrays and a plan: an engine can ship them."""

import pickle

import numpy as np
import pyarrow as pa
import pytest

from grpo_cli import AdvantageConfig
from grpo_cli.engines import kernels
from grpo_cli.errors import InputError, RowError
from grpo_cli.estimators import GroupIndex, RowInputs
from grpo_cli.io import open_source
from grpo_cli.plan import Grouping
from grpo_cli.commands.objective import objective_batch, objective_fields, plan_objective


def test_kernels_and_plans_pickle(sample_parquet, tmp_path):
    with open_source(str(sample_parquet)) as source:
        plan = plan_objective(source, output=str(tmp_path / "o.parquet"))
    for kernel in (objective_batch, kernels.row_columns, kernels.advantage_window, kernels.index, kernels.scalars):
        assert pickle.loads(pickle.dumps(kernel)) is kernel
    assert pickle.loads(pickle.dumps(plan)) == plan


def test_objective_batch_gives_columns_and_a_partial_summary(sample_parquet, tmp_path):
    with open_source(str(sample_parquet)) as source:
        plan = plan_objective(source, output=str(tmp_path / "o.parquet"), advantage_config=AdvantageConfig(estimator="mean"))
        batch = next(source.iter_batches(5))[1]
    written = objective_batch(batch, 10, plan, np.full(20, 0.5))
    columns, summary = written.columns, written.partial
    assert written.keep is None
    assert [f.name for f in objective_fields(plan)] == list(columns)
    assert columns["advantage"].to_pylist() == [0.5] * 5 and summary.counts["rows"] == 5
    assert summary.sums.start == 10 and summary.sums.stop == 15


def test_group_index_kernel():
    runs = kernels.prompt_runs(pa.chunked_array([pa.array(["a", "a", "b", "b"])]), "id")
    assert kernels.index(runs, Grouping("id", None), 4, "f").sizes.tolist() == [2, 2]
    assert kernels.index(None, Grouping(None, 2), 4, "f").first.tolist() == [0, 2]
    assert kernels.index(None, Grouping(None, None), 4, "f").count == 1
    with pytest.raises(InputError, match="f: prompt id 'a' has 2 rows, expected `num_generations` 3"):
        kernels.index(runs, Grouping("id", 3), 4, "f")
    with pytest.raises(InputError, match="f: 4 rows is not a multiple of `num_generations` 3"):
        kernels.index(None, Grouping(None, 3), 4, "f")
    with pytest.raises(RowError, match="column 'id' \\(prompt id\\) is null") as caught:
        kernels.prompt_runs(pa.array(["a", None]), "id")
    assert caught.value.row == 1


def test_pass_one_kernel_reads_runs_rewards_and_baseline():
    batch = pa.record_batch({"id": [7, 7, 8], "reward": [1.0, None, 0.5], "base": [0.1, 0.2, 0.3]})
    read = kernels.rows_read(batch, 0, kernels.RowsToRead("id", (("reward",),), ("reward",), "base"))
    assert read.runs.starts.tolist() == [0, 2] and read.runs.keys.tolist() == [7, 8] and read.runs.rows == 3
    np.testing.assert_array_equal(read.rewards, [[1.0], [np.nan], [0.5]])
    assert read.baseline.tolist() == [0.1, 0.2, 0.3]
    assert kernels.rows_read(batch, 0, kernels.RowsToRead(None)).runs is None


def test_advantage_window():
    adv, summary = kernels.advantage_window(RowInputs(np.array([0.0, 1.0, 3.0, 3.0])), GroupIndex.blocks(4, 2), AdvantageConfig())
    assert adv.tolist() == [-1.0, 1.0, 0.0, 0.0] and summary.groups == 2 and summary.zero_variance == 1
