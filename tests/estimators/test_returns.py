"""Token-level estimators: REINFORCE++ returns and GAE, against loops written from verl's
compute_reinforce_plus_plus_outcome_advantage and compute_gae_advantage_return."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_cli import AdvantageConfig, advantages_file
from grpo_cli.errors import UsageError
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


@pytest.fixture
def gapped(tmp_path):
    """Row a: entries 1 1 0 1 1 of the mask (a masked token inside the row), reward 1; row b:
    three valid tokens, reward 0; values 0.5, 9 (masked: never read), 0.25 for GAE."""
    path = tmp_path / "gaps.parquet"
    table = pa.table(
        {
            "prompt_id": ["a", "b"],
            "reward": [1.0, 0.0],
            "response_mask": pa.array([[1, 1, 0, 1, 1], [1, 1, 1]]),
            "values": pa.array([[0.5, 0.5, 9.0, 0.5, 0.25], [0.0, 0.0, 0.0]]),
        }
    )
    pq.write_table(table, path)
    return path


@pytest.mark.parametrize(
    "mode, returns",
    [
        # skip: the valid tokens are the steps: G = 1, 1/2, 1/4, 1/8 backwards (the masked entry holds 0)
        ("skip", [0.125, 0.25, 0.0, 0.5, 1.0]),
        # restart (verl 0.7): the return restarts after the masked token: the first run sums no reward
        ("restart", [0.0, 0.0, 0.0, 0.5, 1.0]),
        # count (OpenRLHF): the masked entry is a step of reward 0: G_2 = 1/4 (not written), G_1 = 1/8, G_0 = 1/16
        ("count", [0.0625, 0.125, 0.0, 0.5, 1.0]),
    ],
)
def test_reinforce_masked_steps(gapped, tmp_path, mode, returns):
    """REINFORCE++'s return G_t = r_t + gamma G_{t+1}, gamma 1/2, over row a's steps as `masked_steps` says."""
    out = tmp_path / "o.parquet"
    advantages_file(gapped, out, config=AdvantageConfig(estimator="reinforce", gamma=0.5, masked_steps=mode))
    assert pq.read_table(out)["token_return"].to_pylist()[0] == returns


def test_gae_counts_a_masked_token_as_a_step_of_value_0(gapped, tmp_path):
    """GAE, gamma 1/2, lambda 1, delta_t = r_t + gamma V_{t+1} - V_t, A_t = delta_t + gamma A_{t+1},
    R = A + V, on row a: V 0.5 0.5 [masked] 0.5 0.25, reward 1 on the last entry.
    count (the masked entry a step of value 0): delta_4 = 0.75, delta_3 = 0.125 - 0.5 = -0.375,
    delta_2 = 0.25, delta_1 = 0 - 0.5 = -0.5; A_4 = 0.75, A_3 = 0, A_2 = 0.25, A_1 = -0.375:
    R_1 = 0.125. skip (V_{t+1} of step 1 is step 3's): delta_1 = 0.25 - 0.5 = -0.25,
    A_1 = -0.25 + 0.5 * 0 = -0.25: R_1 = 0.25. R_3 = 0.5 and R_4 = 1 either way."""
    for mode, r1 in (("count", 0.125), ("skip", 0.25)):
        out = tmp_path / f"{mode}.parquet"
        advantages_file(gapped, out, config=AdvantageConfig(estimator="gae", gamma=0.5, lam=1.0, masked_steps=mode))
        returns = pq.read_table(out)["token_return"].to_pylist()[0]
        assert (returns[1], returns[2], returns[3], returns[4]) == (r1, 0.0, 0.5, 1.0)


def test_masked_steps_is_refused_without_token_returns():
    with pytest.raises(UsageError, match="`masked_steps` applies to token-level returns, and estimator 'grpo' has none"):
        AdvantageConfig(masked_steps="count")


@pytest.mark.parametrize(
    "preset, estimator, mode", [("verl@0.7", "reinforce", "restart"), ("verl", "reinforce", "skip"), ("openrlhf", "gae", "count")]
)
def test_presets_set_the_frameworks_masked_steps(preset, estimator, mode):
    assert AdvantageConfig(preset=preset, estimator=estimator).masked_steps == mode
