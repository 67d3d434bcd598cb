"""Per-row terms: blocking for speed never changes a number, and k3 against the old policy."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_cli import ObjectiveConfig
from grpo_cli.objective import row_terms
from grpo_cli.tokens import Tokens

from ..conftest import examples
from ..strategies import token_rows

CONFIGS = [ObjectiveConfig(), ObjectiveConfig(dual_clip=3.0, epsilon_high=0.28, beta=0.1), ObjectiveConfig(ratio_level="sequence")]


@settings(max_examples=examples(60), deadline=None)
@given(token_rows(), st.integers(1, 12), st.sampled_from(CONFIGS))
def test_token_blocks_do_not_change_row_terms(rows, block_tokens, config):
    tokens, adv = rows
    whole = row_terms(tokens, adv, config, block_tokens=1 << 30)
    blocked = row_terms(tokens, adv, config, block_tokens=block_tokens)
    assert whole.keys() == blocked.keys()
    for key in whole:
        np.testing.assert_array_equal(whole[key], blocked[key], err_msg=key)


@settings(max_examples=examples(60), deadline=None)
@given(token_rows(), st.integers(1, 12), st.sampled_from(CONFIGS))
def test_per_token_advantages_equal_to_the_rows_give_the_row_terms(rows, block_tokens, config):
    tokens, adv = rows
    tokens.advantage = np.repeat(adv, tokens.lengths)
    per_token = row_terms(tokens, None, config, block_tokens=block_tokens)
    per_row = row_terms(tokens, adv, config)
    assert per_token.keys() == per_row.keys()
    # a row without tokens has no token advantage, so none that is nonzero
    per_row["zero_advantage"] |= tokens.lengths == 0
    for key in per_row:
        np.testing.assert_allclose(per_token[key], per_row[key], rtol=1e-12, atol=1e-12, err_msg=key)


def test_kl_old_is_k3_of_new_minus_old():
    new, old = [-0.2, -1.5, -0.01, -3.0], [-0.7, -0.1, -0.01 - 1e-6, -2.9]
    tokens = Tokens(np.array([4]), np.array(new), np.array(old))
    terms = row_terms(tokens, np.array([1.0]), ObjectiveConfig())
    expected = sum(math.exp(-(a - b)) + (a - b) - 1 for a, b in zip(new, old))
    assert terms["kl_old_sum"][0] == pytest.approx(expected, rel=1e-13)


def test_a_blocks_token_math_holds_few_arrays_at_once():
    """Each thread works on one block at a time: at 16 threads its arrays are part of the peak
    memory. ``new - old`` and ``rho - 1`` are freed once k3 against the old policy is summed,
    and the policy's arrays before the reference's KL makes its own (20.5 MiB for 2^18 tokens
    with reference log-probs before; 10.5 now): at most 6 float64 values per token at once."""
    import tracemalloc

    rng = np.random.default_rng(0)
    rows, length = 437, 600
    new = rng.normal(-1, 0.5, rows * length).astype(np.float32)
    old, ref = ((new + rng.normal(0, 0.05, new.size)).astype(np.float32) for _ in range(2))
    tokens = Tokens(np.full(rows, length), new, old, ref=ref)
    tracemalloc.start()
    try:
        row_terms(tokens, rng.normal(size=rows), ObjectiveConfig(beta=0.1))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak / new.size <= 6 * 8
