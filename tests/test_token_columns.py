"""Arrow list columns into validated flat token buffers: each check names the row of the batch."""

import numpy as np
import pyarrow as pa
import pytest

from grpo_cli.errors import RowError
from grpo_cli.token_columns import TokenColumns, read_tokens

COLUMNS = TokenColumns("new", "old", mask="mask", advantage="adv")


def batch(**changes) -> pa.RecordBatch:
    data = {"new": [[-0.1, -0.2], [-0.3]], "old": [[-0.1, -0.3], [-0.2]], "mask": [[1, 0], [1]], "adv": [[1.0, 0.5], [-1.0]]}
    data.update(changes)
    return pa.RecordBatch.from_pydict(data)


def test_flat_buffers():
    tokens = read_tokens(batch(), COLUMNS)
    assert tokens.lengths.tolist() == [2, 1] and tokens.new.tolist() == [-0.1, 0.0, -0.3]  # masked: 0
    assert tokens.mask.tolist() == [True, False, True] and tokens.advantage.tolist() == [1.0, 0.0, -1.0]
    assert tokens.n_counted.tolist() == [1, 1]


@pytest.mark.parametrize(
    "changes, row, message",
    [
        ({"old": [[-0.1, -0.3], [-0.2, -0.1]]}, 1, "column 'old' has 2 tokens but 1 in the log-probs column"),
        ({"new": [[0.2, -0.2], [-0.3]]}, 0, "column 'new' has a positive log-prob"),
        ({"old": [[-0.1, -0.3], [float("nan")]]}, 1, "column 'old' has a NaN or infinite log-prob"),
        ({"new": [[-0.1, -0.2], None]}, 1, "column 'new' is null"),
        ({"mask": [[1, 2], [1]]}, 0, "column 'mask' must hold 0/1 or booleans"),
        ({"mask": [[1], [1]]}, 0, "column 'mask' has 1 entries but 2 tokens"),
        ({"adv": [[1.0, 0.5], [float("inf")]]}, 1, "column 'adv' has a NaN or infinite advantage"),
        ({"new": [1.0, 2.0]}, 0, "column 'new' must hold a list per row"),
        ({"mask": [[1, None], [1]]}, 0, "column 'mask' has a null entry"),
        ({"new": [[-0.1, -0.2], [None]]}, 1, "column 'new' has a null token value"),
    ],
)
def test_bad_tokens_name_the_row_and_column(changes, row, message):
    with pytest.raises(RowError, match=message) as caught:
        read_tokens(batch(**changes), COLUMNS)
    assert caught.value.row == row


def test_float32_buffers_stay_float32():
    b = pa.RecordBatch.from_pydict({"new": pa.array([[-0.5]], pa.list_(pa.float32())), "old": pa.array([[-0.5]], pa.list_(pa.float32()))})
    tokens = read_tokens(b, TokenColumns("new", "old"))
    assert tokens.new.dtype == np.float32 and tokens.mask is None and tokens.advantage is None


def test_padding_may_hold_anything():
    """Masked tokens (padding) are not checked and read as 0: NaN, +inf, positive or null."""
    padded = batch(new=[[-0.1, float("nan")], [-0.3]], old=[[-0.1, 5.0], [-0.2]], adv=[[1.0, float("inf")], [-1.0]])
    tokens = read_tokens(padded, COLUMNS)
    assert tokens.new.tolist() == [-0.1, 0.0, -0.3] and tokens.old.tolist() == [-0.1, 0.0, -0.2]
    assert tokens.advantage.tolist() == [1.0, 0.0, -1.0]
    nulls = batch(new=[[-0.1, None], [-0.3]], old=[[-0.1, None], [-0.2]])
    assert read_tokens(nulls, COLUMNS).old.tolist() == [-0.1, 0.0, -0.2]
    with pytest.raises(RowError, match="column 'new' has a NaN or infinite log-prob"):
        read_tokens(batch(new=[[-0.1, float("nan")], [-0.3]], mask=[[1, 1], [1]]), COLUMNS)
