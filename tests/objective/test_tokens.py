"""Rows of tokens: masked tokens count nowhere; per-row sums."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from grpo_cli import policy_objective
from grpo_cli.tokens import reduce_rows


def test_masked_tokens_count_nowhere():
    # the masked middle token has rho = e^3 (would clip) and must not count in sums or counts
    new = [[-1.0, -1.0, -1.0]]
    old = [[-1.0, -4.0, -1.0]]
    out = policy_objective(new, old, advantage_values=[2.0], mask=[[1, 0, 1]], agg="token-mean", details=True)
    assert out["objective"] == 2.0 and out["tokens"] == 2
    assert out["clip_frac"]["high"] == 0.0 and out["ratio"]["max"] == 1.0
    assert policy_objective(new, old, advantage_values=[2.0], mask=[[True, False, True]]) == 4.0


@given(st.lists(st.integers(0, 3000), min_size=1, max_size=12), st.integers(0, 2**32 - 1))
def test_row_sums_cast_first_are_the_sums_reduceat_casts_in_its_buffers(lengths, seed):
    """`reduce_rows` casts float32 log-probs (or bool flags) to the sum's dtype before
    `reduceat` (whose cast in its buffers holds the GIL): the same sums, bit for bit."""
    lengths = np.array(lengths)
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=int(lengths.sum())) * 10.0 ** rng.integers(-4, 4)).astype(np.float32)
    starts = (np.cumsum(lengths) - lengths)[lengths > 0]
    as_before = np.zeros(len(lengths))
    as_before[lengths > 0] = np.add.reduceat(x, starts, dtype=np.float64) if len(starts) else []
    assert np.array_equal(reduce_rows(x, lengths, dtype=np.float64), as_before)
    flags = x > 0
    counts = np.zeros(len(lengths), dtype=np.int64)
    counts[lengths > 0] = np.add.reduceat(flags, starts, dtype=np.int64) if len(starts) else []
    assert np.array_equal(reduce_rows(flags, lengths, empty=0, dtype=np.int64), counts)
