"""Token-level estimators: REINFORCE++ returns and GAE, against loops written from verl's
compute_reinforce_plus_plus_outcome_advantage and compute_gae_advantage_return."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_cli.estimators import ESTIMATORS, Steps
from grpo_cli.estimators.returns import discounted_sums

from ..conftest import examples

rows = st.lists(st.lists(st.floats(-3, 3), min_size=0, max_size=40), min_size=1, max_size=12)


def _steps(row_rewards, values=None):
    lengths = np.array([len(r) for r in row_rewards])
    flat = np.concatenate([np.array(r, dtype=float) for r in row_rewards]) if lengths.sum() else np.zeros(0)
    v = None if values is None else np.concatenate([np.array(x, dtype=float) for x in values]) if lengths.sum() else np.zeros(0)
    return Steps(lengths, flat, v)


def test_reinforce_hand_derived():
    # one row, reward 1 on its last of 3 tokens, KL shaping -0.1 at each: r = (-0.1, -0.1, 0.9)
    # gamma 0.5: G_2 = 0.9, G_1 = -0.1 + 0.45 = 0.35, G_0 = -0.1 + 0.175 = 0.075
    a, returns = ESTIMATORS["reinforce"].compute(_steps([[-0.1, -0.1, 0.9]]), 0.5, 1.0)
    np.testing.assert_allclose(a, [0.075, 0.35, 0.9], rtol=1e-15)
    assert returns.tolist() == a.tolist()


def test_gae_hand_derived():
    # r = (0, 1), V = (0.5, 0.25), gamma 0.9, lambda 0.8:
    # delta_1 = 1 + 0 - 0.25 = 0.75; delta_0 = 0 + 0.9 * 0.25 - 0.5 = -0.275
    # A_1 = 0.75; A_0 = -0.275 + 0.72 * 0.75 = 0.265; returns = A + V = (0.765, 1.0)
    a, returns = ESTIMATORS["gae"].compute(_steps([[0.0, 1.0]], [[0.5, 0.25]]), 0.9, 0.8)
    np.testing.assert_allclose(a, [0.265, 0.75], rtol=1e-14)
    np.testing.assert_allclose(returns, [0.765, 1.0], rtol=1e-14)


@settings(max_examples=examples(80))
@given(rows, st.sampled_from([1.0, 0.99, 0.5, 0.0]))
def test_discounted_sums_match_the_backward_recursion(row_rewards, gamma):
    s = _steps(row_rewards)
    expected = []
    for r in row_rewards:
        g, out = 0.0, []
        for x in reversed(r):
            g = x + gamma * g
            out.append(g)
        expected += out[::-1]
    np.testing.assert_allclose(discounted_sums(s.rewards, s.ends, gamma), expected, rtol=1e-12, atol=1e-12)


@settings(max_examples=examples(60))
@given(rows, st.sampled_from([1.0, 0.95]), st.sampled_from([1.0, 0.9, 0.0]), st.randoms(use_true_random=False))
def test_gae_matches_the_backward_recursion(row_rewards, gamma, lam, rnd):
    values = [[rnd.uniform(-1, 1) for _ in r] for r in row_rewards]
    expected_a, expected_r = [], []
    for r, v in zip(row_rewards, values):
        last, nxt, out = 0.0, 0.0, []
        for t in reversed(range(len(r))):
            delta = r[t] + gamma * nxt - v[t]
            last = delta + gamma * lam * last
            nxt = v[t]
            out.append(last)
        expected_a += out[::-1]
        expected_r += [a + x for a, x in zip(out[::-1], v)]
    a, returns = ESTIMATORS["gae"].compute(_steps(row_rewards, values), gamma, lam)
    np.testing.assert_allclose(a, expected_a, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(returns, expected_r, rtol=1e-12, atol=1e-12)


def test_a_row_never_depends_on_its_neighbours():
    """Bit for bit: the same row alone, or among others, gives the same sums."""
    rng = np.random.default_rng(1)
    row = rng.normal(size=37)
    alone = discounted_sums(row, np.full(37, 37), 0.99)
    lengths = np.array([5, 37, 100])
    flat = np.concatenate([rng.normal(size=5), row, rng.normal(size=100)])
    among = discounted_sums(flat, np.repeat(np.cumsum(lengths), lengths), 0.99)[5:42]
    assert among.tolist() == alone.tolist()
