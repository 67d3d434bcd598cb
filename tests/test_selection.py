"""Radix selection (grpo_cli.selection): order statistics and linear quantiles equal numpy's on
any split of the values into batches, however few keys a pass may gather (so however many
passes it takes), with memory bounded by one histogram or the keys gathered."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_cli import selection
from grpo_cli.selection import keys, part, quantile, values


def scan_of(parts, counted=None):
    """A scan over ``parts`` that records each pass's wanted digits (``counted``)."""

    def scan(wanted):
        if counted is not None:
            counted.append(wanted)
        return ([part(x, d) for d in wanted] for x in parts)

    return scan


def test_keys_order_as_the_values_and_invert():
    x = np.array([-np.inf, -1e308, -2.5, -1e-320, -0.0, 0.0, 1e-320, 3.0, 1e308, np.inf])
    k = keys(x)
    assert (np.diff(k.astype(object)) > 0).all()  # strictly ascending, -0.0 just below 0.0
    assert values(k).tobytes() == x.tobytes()


floats = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(floats, min_size=1, max_size=60),
    st.floats(0, 1),
    st.integers(1, 4),
    st.sampled_from([0, 1, 3, 1 << 20]),
)
def test_quantile_is_numpys_linear_on_any_batches_and_any_pass_count(xs, q, batches, gathered):
    x = np.array(xs)
    selection.GATHERED, kept = gathered, selection.GATHERED
    try:
        got = quantile(scan_of(np.array_split(x, batches)), q)
    finally:
        selection.GATHERED = kept
    want = float(np.quantile(x, q))
    assert got == want or (np.isfinite(want) and abs(got - want) <= 1e-15 * abs(want))


def test_passes_are_few_and_memory_is_one_histogram_or_the_gathered_keys(monkeypatch):
    """1e5 values: one counting pass, then (the ranks' bucket of the first 16 bits holding at
    most GATHERED keys) one gathering pass; with GATHERED 0, 64 bits / 16 = 4 counting passes
    in all, the key then known bit for bit."""
    rng = np.random.default_rng(3)
    x = rng.gamma(1.0, 1.0, 100_000)
    passes: list = []
    assert quantile(scan_of(np.array_split(x, 7), passes), 0.8) == float(np.quantile(x, 0.8))
    assert len(passes) == 2 and passes[1][0].gathers  # count; gather
    monkeypatch.setattr(selection, "GATHERED", 0)
    passes.clear()
    assert quantile(scan_of(np.array_split(x, 7), passes), 0.8) == float(np.quantile(x, 0.8))
    assert len(passes) == 4 and all(not d.gathers for wanted in passes for d in wanted)


def test_equal_values_and_no_values():
    assert quantile(scan_of([np.full(1000, 0.7), np.full(5, 0.7)]), 0.33) == 0.7
    assert quantile(scan_of([np.zeros(0)]), 0.5) is None


@pytest.mark.parametrize("q", [0.0, 0.25, 0.5, 1.0])
def test_two_ranks_in_different_buckets(q):
    x = np.array([1e-300, 5.0, -7.0, 1e300, 0.0])
    assert quantile(scan_of([x[:2], x[2:]]), q) == float(np.quantile(x, q))
