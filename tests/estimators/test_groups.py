"""Rows in groups: the two ways of finding groups (runs, hash), windows of whole groups, and
each group's sufficient statistics."""

import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grpo_cli import AdvantageConfig
from grpo_cli.estimators import GroupIndex, Groups, Runs, advantage, group_index


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
        by_runs = advantage(Groups(rewards[order], group_index(pa.array(keys[order]))), config)
        by_hash = advantage(Groups(rewards[shuffled], group_index(pa.array(keys[shuffled]))), config)
        # the same numbers up to the order the rewards are summed in
        np.testing.assert_allclose(by_runs[np.argsort(order)], by_hash[np.argsort(shuffled)], rtol=1e-12, atol=1e-12)


@given(st.lists(st.integers(-3, 3), min_size=1, max_size=40), st.booleans())
def test_integer_keys_in_numpy_and_their_strings_in_arrow_give_the_same_groups(keys, contiguous):
    keys = sorted(keys) if contiguous else keys
    by_numpy, by_arrow = group_index(pa.array(keys, pa.int16())), group_index(pa.array([str(k) for k in keys]))
    assert by_numpy.first.tolist() == by_arrow.first.tolist() and by_numpy.codes.tolist() == by_arrow.codes.tolist()
    assert by_numpy.contiguous == by_arrow.contiguous


@given(st.lists(st.integers(-2, 2), max_size=40), st.lists(st.integers(0, 40), max_size=4), st.booleans())
def test_runs_joined_from_batches_are_the_runs_of_the_whole(keys, cuts, as_text):
    """Pass 1 finds runs a batch at a time: joined, they give the index of the whole column,
    whatever the batch edges cut (ids in numpy, or in arrow as text; groups contiguous or not)."""
    column = pa.array([str(k) for k in keys]) if as_text else pa.array(keys, pa.int64())
    edges = [0, *sorted(min(c, len(keys)) for c in cuts), len(keys)]
    joined = Runs.joined([Runs.of(column[lo:hi]) for lo, hi in zip(edges, edges[1:])])
    whole = Runs.of(column)
    assert joined.starts.tolist() == whole.starts.tolist() and joined.rows == len(keys)
    assert list(joined.keys.tolist() if isinstance(joined.keys, np.ndarray) else joined.keys.to_pylist()) == list(
        whole.keys.tolist() if isinstance(whole.keys, np.ndarray) else whole.keys.to_pylist()
    )
    by_batches, by_column = joined.index(), group_index(column)
    assert by_batches.first.tolist() == by_column.first.tolist() and by_batches.codes.tolist() == by_column.codes.tolist()
    assert [joined.key_at(row) for row in range(len(keys))] == column.to_pylist()


def test_keys_without_an_order_are_grouped_by_hash():
    keys = pa.array([{"a": 1}, {"a": 2}, {"a": 1}])  # structs: pyarrow compares none
    runs = Runs.of(keys)
    assert runs.starts.tolist() == [0, 1, 2]
    assert group_index(keys).codes.tolist() == [0, 1, 0] and group_index(keys[:2]).contiguous


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


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(-50, 50)), min_size=1, max_size=40))
def test_sufficient_statistics_of_contiguous_and_scattered_groups(rows):
    keys = np.array([k for k, _ in rows])
    r = np.array([v / 4 for _, v in rows])  # quarters: every sum here is exact
    for order in (np.argsort(keys, kind="stable"), np.arange(len(rows))):
        groups = Groups(r[order], group_index(pa.array(keys[order])))
        first_keys = keys[order][groups.index.first]
        for k, key in enumerate(first_keys):
            values = r[keys == key]
            assert groups.count[k] == len(values) and groups.sum[k] == values.sum()
            assert groups.min[k] == values.min() and groups.max[k] == values.max()
            assert groups.m2[k] == pytest.approx(((values - values.mean()) ** 2).sum(), rel=1e-12, abs=1e-12)
            assert groups.informative[k] == (len(set(values)) > 1)
    if len(r) > 1:
        assert Groups(r, GroupIndex.whole(len(r))).std(1)[0] == pytest.approx(r.std(ddof=1), rel=1e-12, abs=1e-12)


SCRIPT = """
import hashlib, numpy as np
from grpo_cli import advantages, AdvantageConfig
rng = np.random.default_rng(0)
g = rng.integers(0, 25_000, 200_000)
r = rng.normal(size=200_000) * 1e3 + rng.uniform(size=200_000)
for cfg in (AdvantageConfig(), AdvantageConfig(estimator="rloo", scale="batch", std="sample")):
    print(hashlib.sha256(advantages(r, g, cfg).tobytes()).hexdigest())
"""


def digests(threads: int) -> str:
    env = {**os.environ, "POLARS_MAX_THREADS": str(threads)}
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, check=True, text=True).stdout


@given(st.integers(1, 6), st.integers(1, 8), st.integers(0, 3), st.integers(0, 2**32 - 1))
def test_set_rows_sets_the_rows_of_the_groups_asked_for(k, count, extra, seed):
    """Groups all of k rows (a groups x k view), and groups of other sizes or scattered (a per-row
    mask): each sets exactly the rows of the groups asked for, as a per-row np.where does."""
    rng = np.random.default_rng(seed)
    sizes = np.r_[np.full(count, k), rng.integers(1, 5, size=extra)]
    codes = np.repeat(np.arange(len(sizes)), sizes)
    for keys in (codes, rng.permutation(codes)):
        groups = Groups(rng.normal(size=len(keys)), group_index(pa.array(keys)))
        of = rng.integers(0, 2, size=groups.index.count).astype(bool)
        a = rng.normal(size=len(keys))
        expected = np.where(groups.per_row(of), 0.0, a)
        groups.set_rows(a, of, 0.0)
        assert a.tolist() == expected.tolist()


@pytest.mark.slow  # three processes, each 400,000 advantages
def test_advantages_are_bit_identical_across_thread_counts():
    assert digests(1) == digests(2) == digests(4)


@given(st.integers(1, 12), st.integers(0, 40), st.integers(0, 2**32 - 1), st.integers(-300, 300), st.sampled_from([None, 0, 1]))
def test_groups_of_one_size_give_the_bits_of_np_bincount(k, extra, seed, exponent, decimals):
    rows = k * (k + extra)  # at least k groups: the layout by position
    r = np.random.default_rng(seed).normal(size=rows)
    r = (r * 1e3 if decimals is None else np.round(r, decimals)) * 2.0**exponent  # rounded: ties, groups of equal rewards
    regular = Groups(r, GroupIndex.blocks(rows, k))
    assert regular.positions is not None
    codes = np.repeat(np.arange(rows // k), k)
    by_codes = Groups(r, GroupIndex(regular.index.first, rows, codes))  # the same groups, summed with np.bincount
    assert by_codes.positions is None
    for stat in ("sum", "m2", "min", "max", "informative"):
        assert getattr(regular, stat).tobytes() == getattr(by_codes, stat).tobytes(), stat
    assert regular.per_row(regular.mean).tobytes() == by_codes.per_row(by_codes.mean).tobytes()


def test_groups_of_one_size_fewer_than_their_size_are_summed_with_np_bincount():
    assert GroupIndex.blocks(12, 4).size is None and GroupIndex.blocks(12, 3).size == 3
    assert GroupIndex(np.array([0, 2, 4]), 7).size is None  # sizes 2, 2, 3
