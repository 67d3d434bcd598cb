"""From reward columns to the reward an estimator sees: which rows are scored."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grpo_cli import AdvantageConfig
from grpo_cli.estimators import GroupIndex, Groups, row_inputs
from grpo_cli.numerics import units
from grpo_cli.summaries import GroupSummary

from ..conftest import run_grpo

reward_or_null = st.one_of(st.just(np.nan), st.integers(-100, 100).map(lambda k: k / 10))


@st.composite
def reward_columns(draw) -> np.ndarray:
    """Rows x 1-3 reward columns, NaN where null."""
    columns = draw(st.integers(1, 3))
    rows = draw(st.lists(st.lists(reward_or_null, min_size=columns, max_size=columns), min_size=1, max_size=30))
    return np.array(rows, dtype=np.float64)


@given(reward_columns(), st.sampled_from(["sum-then-normalize", "normalize-then-sum"]), st.data())
def test_the_scored_rows_are_those_with_some_reward(values, mode, data):
    config = AdvantageConfig(multi_reward=mode, reward_weights=(1.0, 0.5, 2.0)[: values.shape[1]] if values.shape[1] > 1 else None)
    inputs = row_inputs(values, [f"r{k}" for k in range(values.shape[1])], config)
    some_reward = ~np.isnan(values).all(axis=1)
    assert np.array_equal(inputs.scored, some_reward)
    assert np.array_equal(inputs.scored, ~np.isnan(inputs.r))  # the mask handed on is r's own NaNs
    lo = data.draw(st.integers(0, len(values)))
    hi = data.draw(st.integers(lo, len(values)))
    assert np.array_equal(inputs.rows(slice(lo, hi)).scored, some_reward[lo:hi])


def test_a_row_whose_reward_minus_its_kl_is_nan_is_not_scored():
    # no mask is handed on with a KL: r itself says which rows are scored
    config = AdvantageConfig(kl_in_reward=0.5)
    inputs = row_inputs(np.array([[1.0], [np.nan], [2.0]]), ["r"], config, kl=np.array([0.0, 0.0, np.nan]))
    assert inputs.unscorable is None
    assert inputs.scored.tolist() == [True, False, False]


def test_units_in_range_are_float64_ones():
    assert units(np.array([3.0, 0.0, 2.0**-500])).tolist() == [1.0, 1.0, 1.0]
    assert units(np.array([3.0, 0.0])).dtype == np.float64
    assert units(np.array([1e308, 3.0])).tolist() == [2.0**1023, 1.0]


def test_group_sizes_counted_or_known():
    r = np.array([0.0, 1.0, 1.0, 1.0, 0.0, 2.0, 5.0, 5.0])
    same = GroupSummary.of(Groups(r, GroupIndex.blocks(8, 2)))  # all of 2 rows: no sizes to count
    assert (same.groups, dict(same.sizes), same.zero_variance) == (4, {2: 4}, 2)
    mixed = GroupSummary.of(Groups(r, GroupIndex(np.array([0, 3, 5]), 8)))  # 3, 2 and 3 rows
    assert (mixed.groups, dict(mixed.sizes), mixed.zero_variance) == (3, {3: 2, 2: 1}, 0)


@pytest.mark.parametrize("multi_reward", ["sum-then-normalize", "normalize-then-sum"])
def test_weighted_rewards_beyond_float64_name_the_row(tmp_path, multi_reward):
    """--reward-weights 1e308,1e308 (issue 43, class 5): the weighted sum overflows; one line
    naming the row, never Infinity or NaN in the summary, nor numpy's warnings."""
    path = tmp_path / "two.parquet"
    pq.write_table(pa.table({"prompt_id": [0, 0], "a": [1.0, 0.0], "b": [1.0, 0.5]}), path)
    args = ["--reward-col", "a", "--reward-col", "b", "--reward-weights", "1e308,1e308", "--multi-reward", multi_reward]
    proc = run_grpo("advantages", str(path), *args, "-q", check=False)
    assert proc.returncode == 1 and proc.stderr.decode() == (
        f"Error: {path}: row 0 (prompt id 0): the weighted sum of its rewards is beyond float64; rescale --reward-weights\n"
    )
