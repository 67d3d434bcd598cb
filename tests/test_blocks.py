"""Blocking for speed and bounded memory never changes a number: cache-sized token blocks,
fixed row blocks for the summary sums, and the two ways of finding groups."""

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_cli import AdvantageConfig, ObjectiveConfig
from grpo_cli.estimators import advantage, group_index
from grpo_cli.objective import Tokens, row_terms
from grpo_cli.report import BlockSums, ObjectiveSummary

logprob = st.floats(-8.0, 0.0, allow_nan=False, width=32)


@st.composite
def token_rows(draw):
    lengths = np.array(draw(st.lists(st.integers(0, 9), min_size=1, max_size=30)))
    n = int(lengths.sum())
    new = np.array(draw(st.lists(logprob, min_size=n, max_size=n)), dtype=np.float32)
    old = np.array(draw(st.lists(logprob, min_size=n, max_size=n)), dtype=np.float32)
    adv = np.array(draw(st.lists(st.floats(-2, 2), min_size=len(lengths), max_size=len(lengths))))
    return Tokens(lengths, new, old, ref=old), adv


CONFIGS = [ObjectiveConfig(), ObjectiveConfig(dual_clip=3.0, epsilon_high=0.28, beta=0.1), ObjectiveConfig(ratio_level="sequence")]


@settings(max_examples=60, deadline=None)
@given(token_rows(), st.integers(1, 12), st.sampled_from(CONFIGS))
def test_token_blocks_do_not_change_row_terms(rows, block_tokens, config):
    tokens, adv = rows
    whole = row_terms(tokens, adv, config, block_tokens=1 << 30)
    blocked = row_terms(tokens, adv, config, block_tokens=block_tokens)
    assert whole.keys() == blocked.keys()
    for key in whole:
        np.testing.assert_array_equal(whole[key], blocked[key], err_msg=key)


def test_kl_old_is_k3_of_new_minus_old():
    new, old = [-0.2, -1.5, -0.01, -3.0], [-0.7, -0.1, -0.01 - 1e-6, -2.9]
    tokens = Tokens(np.array([4]), np.array(new), np.array(old))
    terms = row_terms(tokens, np.array([1.0]), ObjectiveConfig())
    expected = sum(math.exp(-(a - b)) + (a - b) - 1 for a, b in zip(new, old))
    assert terms["kl_old_sum"][0] == pytest.approx(expected, rel=1e-13)


@given(st.lists(st.floats(-1e12, 1e12), min_size=1, max_size=200), st.lists(st.integers(1, 50), min_size=1, max_size=20))
def test_block_sums_do_not_depend_on_how_rows_arrive(values, cuts):
    values = np.array(values)
    expected = BlockSums(block=7)
    expected.add({"x": values})
    pieces = BlockSums(block=7)
    bounds = np.unique(np.clip(np.cumsum(cuts), 0, len(values)))
    for chunk in np.split(values, bounds):
        pieces.add({"x": chunk})
    assert pieces.total("x") == expected.total("x")
    assert abs(pieces.total("x") - math.fsum(values)) <= 1e-12 * np.abs(values).sum()


def test_objective_summary_is_the_same_fed_in_any_batches():
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 6, 300)
    n = int(lengths.sum())
    tokens = Tokens(lengths, -rng.gamma(0.5, 1, n), -rng.gamma(0.5, 1, n))
    adv = rng.normal(size=300)
    config = ObjectiveConfig(agg="seq-mean-token-mean")
    one = ObjectiveSummary()
    one.add(row_terms(tokens, adv, config), adv)
    many = ObjectiveSummary()
    for a, b in [(0, 1), (1, 150), (150, 151), (151, 300)]:
        many.add(row_terms(tokens.rows_slice(a, b), adv[a:b], config), adv[a:b])
    assert one.figures(config) == many.figures(config)


def test_group_index_contiguous_and_scattered_paths():
    contiguous = group_index(pa.array(["b", "b", "a", "a", "a", "c"]))
    assert contiguous.codes.tolist() == [0, 0, 1, 1, 1, 2] and contiguous.first.tolist() == [0, 2, 5]
    scattered = group_index(pa.array(["b", "a", "b", "c", "a", "a"]))
    assert scattered.codes.tolist() == [0, 1, 0, 2, 1, 1] and scattered.first.tolist() == [0, 1, 3]
    assert scattered.sizes.tolist() == [2, 3, 1]


@given(st.lists(st.tuples(st.integers(0, 5), st.floats(-10, 10)), min_size=1, max_size=40), st.randoms())
def test_sorted_and_shuffled_groups_give_the_same_advantages(rows, random):
    keys = np.array([k for k, _ in rows])
    rewards = np.array([r for _, r in rows])
    order = np.argsort(keys, kind="stable")  # contiguous groups: the run-based path
    shuffled = list(range(len(rows)))
    random.shuffle(shuffled)
    for config in (AdvantageConfig(), AdvantageConfig(estimator="rloo", std="sample")):
        by_runs = advantage(rewards[order], group_index(pa.array(keys[order])), config)
        by_hash = advantage(rewards[shuffled], group_index(pa.array(keys[shuffled])), config)
        # the same numbers up to the order the rewards are summed in
        np.testing.assert_allclose(by_runs[np.argsort(order)], by_hash[np.argsort(shuffled)], rtol=1e-12, atol=1e-12)


def test_the_cli_allocator_setting_takes_on_glibc():
    import platform

    from grpo_cli.engines.memory import keep_freed_memory

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("mallopt is glibc's")
    assert keep_freed_memory() is True


@given(st.lists(st.integers(1, 30), min_size=1, max_size=60), st.integers(1, 100))
def test_windows_cover_every_group_once_in_order(sizes, rows):
    g = group_index(pa.array(np.repeat(np.arange(len(sizes)), sizes)))
    windows = g.windows(rows)
    assert [lo for lo, _ in windows] == [0] + [hi for _, hi in windows[:-1]] and windows[-1][1] == len(sizes)
    spans = [g.window(lo, hi)[0] for lo, hi in windows]
    assert spans[0].start == 0 and spans[-1].stop == sum(sizes)
    assert all(a.stop == b.start for a, b in zip(spans, spans[1:]))
    for (lo, hi), span in zip(windows, spans):
        local = g.window(lo, hi)[1]
        assert local.sizes.tolist() == sizes[lo:hi] and local.rows == span.stop - span.start
