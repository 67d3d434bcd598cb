"""Summaries are built from partial summaries that merge exactly, whatever the split of rows."""

import math
from functools import reduce

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from grpo_cli import ObjectiveConfig
from grpo_cli.estimators import Groups, group_index
from grpo_cli.objective import row_terms
from grpo_cli.tokens import Tokens
from grpo_cli.numerics import unit
from grpo_cli.objective.summary import ObjectiveSummary
from grpo_cli.summaries import BlockSums, GroupSummary, Moments, Spread, bin_counts, bin_edges, describe, described, histogram

values = st.lists(st.floats(-1e12, 1e12), min_size=1, max_size=200)
cuts = st.lists(st.integers(1, 50), min_size=1, max_size=20)


def pieces(x: np.ndarray, cuts: list[int]) -> list[tuple[int, np.ndarray]]:
    """``x`` split at the running sums of ``cuts``: (first row, values) of each piece."""
    bounds = [0, *np.unique(np.clip(np.cumsum(cuts), 0, len(x))).tolist()]
    bounds = sorted(set(bounds) | {len(x)})
    return [(a, x[a:b]) for a, b in zip(bounds, bounds[1:])]


@given(values, cuts)
def test_block_sums_do_not_depend_on_how_rows_arrive(values, cuts):
    values = np.array(values)
    expected = BlockSums(block=7)
    expected.add({"x": values})
    in_order = BlockSums(block=7)
    for _, chunk in pieces(values, cuts):
        in_order.add({"x": chunk})
    merged = reduce(BlockSums.merge, [BlockSums.of({"x": chunk}, start, block=7) for start, chunk in pieces(values, cuts)])
    assert in_order.total("x") == merged.total("x") == expected.total("x")
    assert abs(merged.total("x") - math.fsum(values)) <= 1e-12 * np.abs(values).sum()


def test_block_sums_merge_only_what_follows():
    early, late = BlockSums.of({"x": np.ones(3)}, 0, block=2), BlockSums.of({"x": np.ones(3)}, 5, block=2)
    with pytest.raises(ValueError, match=r"rows \[5, 8\) do not follow rows \[0, 3\)"):
        early.merge(late)
    with pytest.raises(ValueError, match="not the input from its first row"):
        late.total("x")


@given(values, cuts)
def test_moments_spread_and_histogram_merge_exactly(values, cuts):
    x = np.array(values)
    whole = described(x, histogram=True)
    parts = pieces(x, cuts)
    moments = reduce(Moments.merge, [Moments.of(chunk, start, unit(x)) for start, chunk in parts])
    spread = reduce(Spread.merge, [Spread.of(chunk, moments, start, histogram=True) for start, chunk in parts])
    assert describe(moments, spread) == describe(*whole)
    assert histogram(moments, spread) == histogram(*whole)


def test_one_piece_figures_are_numpys():
    x = np.random.default_rng(0).normal(size=1000) * 1e3
    figures = describe(*described(x))
    assert figures == {"mean": float(np.mean(x)), "std": float(np.std(x)), "min": float(np.min(x)), "max": float(np.max(x))}
    counts, edges = np.histogram(x, bins=10)
    assert histogram(*described(x, histogram=True)) == {"edges": edges.tolist(), "counts": counts.tolist()}


@given(values, st.lists(st.integers(0, 10), max_size=20))
def test_bin_counts_are_numpys_histogram(values, on_edges):
    """Counts below each edge give np.histogram's bins, values exactly on an edge included."""
    x = np.array(values)
    span = (float(x.min()), float(x.max()))
    edges = bin_edges(span)
    assume(np.all(edges[:-1] < edges[1:]))  # numpy refuses a span of fewer than 10 float64 steps
    x = np.concatenate([x, [e for e in edges[on_edges] if span[0] <= e <= span[1]]])
    assert bin_counts(x, span).tolist() == np.histogram(x, bins=10, range=span)[0].tolist()


@given(st.lists(st.integers(1, 6), min_size=1, max_size=30), st.integers(1, 10))
def test_group_summaries_of_windows_add_up(sizes, window):
    keys = np.repeat(np.arange(len(sizes)), sizes)
    r = (np.arange(len(keys)) % 3 == 0).astype(float)
    g = group_index(pa.array(keys))
    whole = GroupSummary.of(Groups(r, g))
    parts = []
    for lo, hi in g.windows(window):
        rows, local = g.window(lo, hi)
        parts.append(GroupSummary.of(Groups(r[rows], local)))
    assert reduce(GroupSummary.merge, parts) == whole
    assert whole.groups == len(sizes) and sum(whole.sizes.values()) == len(sizes)


def test_objective_summary_is_the_same_fed_in_any_batches():
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 6, 300)
    n = int(lengths.sum())
    tokens = Tokens(lengths, -rng.gamma(0.5, 1, n), -rng.gamma(0.5, 1, n))
    adv = rng.normal(size=300)
    config = ObjectiveConfig(agg="seq-mean-token-mean")
    one = ObjectiveSummary.of(row_terms(tokens, adv, config))
    many = ObjectiveSummary()
    for a, b in [(0, 1), (1, 150), (150, 151), (151, 300)]:
        many = many.merge(ObjectiveSummary.of(row_terms(tokens.rows_slice(a, b), adv[a:b], config), a))
    assert one.figures(config) == many.figures(config)


def test_figures_of_rewards_near_the_ends_of_float64():
    """Sums and squares of +-1e308 overflow: the figures are taken in a power-of-two unit."""
    x = np.array([1e308, -1e308, 1e308, 1.0, 0.0])
    moments, spread = described(x, histogram=True)
    figures = describe(moments, spread)
    assert figures["mean"] == pytest.approx(2e307, rel=1e-12)
    assert figures["std"] == pytest.approx(math.sqrt(np.mean(((x / 1e300) - 2e7) ** 2)) * 1e300, rel=1e-12)
    assert (figures["min"], figures["max"]) == (-1e308, 1e308)
    assert histogram(moments, spread)["counts"] == [1, 0, 0, 0, 0, 2, 0, 0, 0, 2]
    tiny = described(np.array([3e-320, 1e-320]))
    assert describe(*tiny)["std"] == pytest.approx(1e-320, rel=1e-3)  # subnormal: 3 significant digits


def test_bin_edges_are_numpys_and_a_span_too_narrow_for_numpy_has_empty_bins():
    for span in [(0.0, 1.0), (-3.5, 2.25), (7.0, 7.0), (-1e300, 1e300)]:
        assert bin_edges(span).tolist() == np.histogram_bin_edges(np.empty(0), bins=10, range=span).tolist()
    one_ulp = (1e12, float(np.nextafter(1e12, np.inf)))  # numpy: "Too many bins for data range"
    x = np.array(one_ulp)
    assert bin_counts(x, one_ulp).tolist() == [0, 0, 0, 0, 0, 1, 0, 0, 0, 1]  # edges[k] <= x < edges[k + 1]; the last bin closed
    figures = histogram(*described(x, histogram=True))
    assert sum(figures["counts"]) == 2 and figures["edges"][0] == 1e12 and figures["edges"][-1] == one_ulp[1]
