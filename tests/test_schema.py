"""Column roles: resolution by option or by name, ambiguity, suggestions; messages name the
Python parameter (the CLI shows its flag)."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from grpo_cli.errors import ColumnNotFoundError, InputError, RowError, UsageError
from grpo_cli.schema import ROLES, arrow_array, check_finite_scalars, check_unique_names, list_values, resolve_column

SCHEMA = pa.schema([("uid", pa.string()), ("rewards", pa.float64()), ("logprobs", pa.list_(pa.float32()))])


def test_explicit_then_candidates():
    assert resolve_column(SCHEMA, "prompt", None) == "uid"
    assert resolve_column(SCHEMA, "reward", "rewards") == "rewards"
    assert resolve_column(SCHEMA, "ref", None, required=False) is None


def test_missing_columns_suggest_names_and_name_the_parameter():
    with pytest.raises(
        ColumnNotFoundError,
        match=r"^r.parquet: no reward column \(looked for reward, score, token_level_scores, token_level_rewards; pass `reward_col`\); did you mean 'rewards'\?$",
    ):
        resolve_column(SCHEMA, "reward", None, source="r.parquet")
    with pytest.raises(ColumnNotFoundError, match=r"no column 'score' for reward \(`reward_col`\)"):
        resolve_column(SCHEMA, "reward", "score")


def test_two_candidates_are_ambiguous():
    both = SCHEMA.append(pa.field("prompt_id", pa.string()))
    with pytest.raises(UsageError, match="columns 'prompt_id', 'uid' could each be the prompt id; pick one with `prompt_col`"):
        resolve_column(both, "prompt", None)


def test_every_role_names_an_option():
    assert all(role.param.endswith("_col") for name, role in ROLES.items() if name != "batch") and ROLES["batch"].param == "by"


def test_data_checks():
    with pytest.raises(InputError, match="duplicate column name 'a'"):
        check_unique_names(pa.schema([("a", pa.int64()), ("a", pa.int64())]), "x")
    with pytest.raises(RowError, match="column 'reward' is infinite") as caught:
        check_finite_scalars(np.array([0.0, 1.0, np.inf]), "reward")
    assert caught.value.row == 2


@given(
    st.sampled_from([np.float64, np.float32, np.int64, np.int32, np.bool_]).flatmap(
        lambda dtype: st.tuples(hnp.arrays(dtype, st.integers(0, 70)), st.data())
    ),
    st.booleans(),
    st.integers(0, 3),
)
def test_arrow_array_is_pa_array(drawn, masked, step):
    """The same array as ``pa.array(values, mask=mask)``: type, values (NaN kept as a value),
    nulls; from a strided view too."""
    values, data = drawn
    values = values[::step] if step else values
    mask = data.draw(hnp.arrays(np.bool_, len(values))) if masked else None
    built, expected = arrow_array(values, mask), pa.array(values, mask=mask)
    assert built.type == expected.type and built.is_null().equals(expected.is_null())
    assert built.equals(expected) or np.array_equal(built.to_numpy(zero_copy_only=False), expected.to_numpy(zero_copy_only=False), equal_nan=True)


@given(
    st.lists(st.one_of(st.none(), st.lists(st.floats(allow_nan=False), max_size=4)), max_size=12),
    st.booleans(),
    st.integers(0, 12),
    st.integers(0, 12),
)
def test_list_values_are_flatten_sliced_or_not(rows, large, start, length):
    """`list_values` (a list column's entries read by its offsets, not pyarrow.compute) is
    `flatten`, for lists and large lists, sliced anywhere, with null lists or without."""
    lists = pa.array(rows, pa.large_list(pa.float64()) if large else pa.list_(pa.float64())).slice(start, length)
    assert list_values(lists).equals(lists.flatten())
