"""Every registered loss against its slow reference, with one advantage per row and with one
per token."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grpo_cli import ObjectiveConfig, policy_objective
from grpo_cli.objective import LOSSES

from ..strategies import logprob_rollout, unpack
from .references import reference_objectives, references

# values to try for each loss option
OPTION_VALUES = {
    "epsilon": [0.1, 0.2, 0.28],
    "epsilon_high": [None, 0.28],
    "dual_clip": [None, 2.0, 3.0],
    "delta": [None, 1.1, 4.0],
    "tau_pos": [0.5, 1.0],
    "tau_neg": [1.05, 3.0],
    "ratio_level": ["token", "sequence"],
    "cispo_clip": ["two-sided", "upper", "epsilon-high"],
    "dro_beta": [0.1, 0.5],
    "kl_cov_ratio": [0.0002, 0.2, 0.5],
    "ppo_kl_coef": [0.1, 1.0],
    "clip_cov_ratio": [0.0002, 0.3],
    "clip_cov_lb": [-1.0, 0.05, 1.0],
    "seed": [0, 7],
    "vespo_k_pos": [2.0, 0.5],
    "vespo_lambda_pos": [3.0, 0.0],
    "vespo_k_neg": [3.0],
    "vespo_lambda_neg": [2.0, 10.0],
}
OPTION_DRAWS = {p: st.sampled_from(values) for p, values in OPTION_VALUES.items()}  # made once: a strategy is checked when made
TOKEN_ADVANTAGE = st.sampled_from([-1.5, -0.5, 0.0, 0.5, 2.0])
POLICY_LOSSES = [name for name, loss in LOSSES.items() if not loss.critic]  # a value loss reads no advantages (test_value.py)


@st.composite
def loss_configs(draw, loss: str) -> ObjectiveConfig:
    params = [p for p in LOSSES[loss].params if p in OPTION_VALUES]
    options = {p: draw(OPTION_DRAWS[p]) for p in params}
    if options.get("dual_clip") is not None:
        options["delta"] = None  # the same cap under two names: one at a time
    return ObjectiveConfig(loss=loss, agg="token-sum", **options)


@pytest.mark.parametrize("name", LOSSES)
def test_every_loss_has_a_slow_reference(name):
    module = LOSSES[name].factors.__module__.rpartition(".")[2]
    assert name in references(), f"loss {name!r} has no slow reference (REFERENCES in tests/objective/test_{module}.py)"


@pytest.mark.parametrize("name", POLICY_LOSSES)
@given(rows=logprob_rollout, data=st.data())
def test_matches_slow_reference(name, rows, data):
    config = data.draw(loss_configs(name))
    new, old, adv = unpack(rows)
    options = {f: getattr(config, f) for f in config.given}
    out = policy_objective(new, old, advantage_values=adv, details=True, **options)
    expected = reference_objectives(new, old, list(adv), config)
    np.testing.assert_allclose(out["rows"]["objective_sum"], expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", POLICY_LOSSES)
@given(rows=logprob_rollout, data=st.data())
def test_per_token_advantages_match_slow_reference(name, rows, data):
    config = data.draw(loss_configs(name))
    new, old, _ = unpack(rows)
    adv = [[data.draw(TOKEN_ADVANTAGE) for _ in row] for row in new]
    options = {f: getattr(config, f) for f in config.given}
    out = policy_objective(new, old, advantage_values=adv, details=True, **options)
    expected = reference_objectives(new, old, list(adv), config)
    np.testing.assert_allclose(out["rows"]["objective_sum"], expected, rtol=1e-12, atol=1e-12)
    assert out["zero_advantage_rows"] == sum(not any(a) for a in adv)


@pytest.mark.parametrize("name", LOSSES)
def test_every_loss_declares_its_options_and_flags(name):
    loss = LOSSES[name]
    assert loss.help and set(loss.params) <= set(ObjectiveConfig.__dataclass_fields__)
    assert all(flag.sign in (-1, 0, 1) for flag in loss.flags)
