"""Hypothesis strategies shared by the tests: rollouts as groups of rewards, as token rows, and
as Arrow tables with every column kind a rollout file holds."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import strategies as st

from grpo_cli import AdvantageConfig
from grpo_cli.estimators import ESTIMATORS
from grpo_cli.tokens import Tokens

# Rewards on a 0.01 grid in [-10, 10]: realistic, and distinct values stay distinct under
# affine maps.
reward = st.integers(-1000, 1000).map(lambda k: k / 100)
# (group key, reward) pairs
grouped_rewards = st.lists(st.tuples(st.integers(0, 5), reward), min_size=1, max_size=60)


# the estimators that read rewards and groups alone (the others: their own tests)
REWARD_ONLY = tuple(n for n, e in ESTIMATORS.items() if e.level == "row" and not e.needs and e.grouped and not e.whitens)


@st.composite
def advantage_configs(draw, estimators=REWARD_ONLY) -> AdvantageConfig:
    """Any valid configuration of any registered estimator (options only where they apply)."""
    spec = ESTIMATORS[draw(st.sampled_from(sorted(estimators)))]
    scale = draw(st.sampled_from(spec.scales))
    scaled = {} if scale == "none" else {"std": draw(st.sampled_from(["population", "sample"])), "eps": draw(st.sampled_from([0.0, 1e-8, 1e-6]))}
    return AdvantageConfig(estimator=spec.name, scale=scale, **scaled)


def split(rows):
    """Group keys and rewards of :data:`grouped_rewards`."""
    return [g for g, _ in rows], np.array([r for _, r in rows])


# Token rows as ragged lists: (new, old) log-probs per row, and a per-row advantage.
logprob = st.floats(-5.0, 0.0, allow_nan=False)
logprob_row = st.integers(0, 6).flatmap(lambda n: st.tuples(st.lists(logprob, min_size=n, max_size=n), st.lists(logprob, min_size=n, max_size=n)))
logprob_rollout = st.lists(st.tuples(logprob_row, st.floats(-3.0, 3.0)), min_size=1, max_size=12)


def unpack(rows):
    """New log-probs, old log-probs, advantages of :data:`logprob_rollout`."""
    return [r[0][0] for r in rows], [r[0][1] for r in rows], np.array([r[1] for r in rows])


@st.composite
def token_rows(draw):
    """A :class:`Tokens` batch (float32 buffers, reference = old) and a per-row advantage."""
    lengths = np.array(draw(st.lists(st.integers(0, 9), min_size=1, max_size=30)))
    n = int(lengths.sum())
    value = st.floats(-8.0, 0.0, allow_nan=False, width=32)
    new = np.array(draw(st.lists(value, min_size=n, max_size=n)), dtype=np.float32)
    old = np.array(draw(st.lists(value, min_size=n, max_size=n)), dtype=np.float32)
    adv = np.array(draw(st.lists(st.floats(-2, 2), min_size=len(lengths), max_size=len(lengths))))
    return Tokens(lengths, new, old, ref=old), adv


@st.composite
def rollout_tables(draw) -> pa.Table:
    """Rollouts as a rollout file holds them: prompt ids (groups may repeat anywhere), rewards,
    and new/old log-prob lists (some empty) with new within 3 nats of old."""
    n = draw(st.integers(1, 10))
    sizes = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    old = [draw(st.lists(st.floats(min_value=-30.0, max_value=0.0, allow_nan=False), min_size=k, max_size=k)) for k in sizes]
    new = [[max(min(o + draw(st.floats(-3, 3)), 0.0), -30.0) for o in row] for row in old]
    groups = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    rewards = draw(st.lists(st.floats(-10, 10), min_size=n, max_size=n))
    return pa.table(
        {"prompt_id": groups, "reward": rewards, "logprobs": new, "old_logprobs": old},
        schema=pa.schema(
            [("prompt_id", pa.int64()), ("reward", pa.float64()), ("logprobs", pa.list_(pa.float64())), ("old_logprobs", pa.list_(pa.float64()))]
        ),
    )
