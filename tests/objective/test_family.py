"""The policy-objective family: each loss on a hand-derived case, TRL's delta and loss_type
names, what a loss is defined with, and the on-policy reduction of the PPO family."""

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grpo_cli import ObjectiveConfig, policy_objective
from grpo_cli.errors import UsageError
from grpo_cli.objective import AGGREGATIONS
from grpo_cli.objective.aggregation import EMPTY_ROWS

from ..conftest import run_grpo
from ..strategies import logprob_rollout, unpack
from .references import reference_aggregate


def row(*log_ratios, old=-1.0):
    """One row whose tokens have these log-ratios (new - old) against old log-prob ``old``."""
    return [[old + d for d in log_ratios]], [[old] * len(log_ratios)]


def test_delta_caps_the_unclipped_ratio():
    # A = -1, rho = 5: min(min(5, 3) * -1, clip(5) * -1) = min(-3, -1.2) = -3 (the dual clip's value)
    new, old = row(math.log(5.0), old=-3.0)
    out = policy_objective(new, old, advantage_values=[-1.0], delta=3.0, details=True)
    assert out["objective"] == pytest.approx(-3.0, rel=1e-14) and out["clip_frac"]["dual"] == 1.0
    assert out["config"]["delta"] == 3.0 and out["config"]["dual_clip"] is None
    # A = +1 with delta 1.1 below 1 + eps_high = 1.2: min(min(5, 1.1), 1.2) = 1.1
    assert policy_objective(new, old, advantage_values=[1.0], delta=1.1) == pytest.approx(1.1, rel=1e-14)
    # delta >= 1 + eps_high gives verl's dual clip, term by term
    assert policy_objective(new, old, advantage_values=[-1.0], delta=3.0) == policy_objective(new, old, advantage_values=[-1.0], dual_clip=3.0)


def test_gspo_and_gspo_token_share_the_sequence_value():
    # log-ratios 0.1, 0.3: s = e^0.2 = 1.2214 on both tokens, clipped to 1.2; per-sequence mean 1.2
    new, old = row(0.1, 0.3)
    for loss in ("gspo", "gspo-token"):
        out = policy_objective(new, old, advantage_values=[1.0], loss=loss, details=True)
        assert out["objective"] == pytest.approx(1.2, rel=1e-14)
        assert out["config"]["agg"] == "seq-mean-token-mean" and out["config"]["ratio_level"] == "sequence"
    # the mean log-ratio is capped at 10 from above (verl): A = -1 gives max(e^10, 0.8) * -1
    new, old = row(12.0, 12.0, old=-20.0)
    out = policy_objective(new, old, advantage_values=[-1.0], loss="gspo", details=True)
    assert out["objective"] == pytest.approx(-math.exp(10.0), rel=1e-14) and out["clamped_tokens"] == 2
    # from below it is not clamped: exp(-30) is tiny, not e^-10
    new, old = row(-30.0, old=0.0)
    assert policy_objective(new, old, advantage_values=[1.0], loss="gspo") == pytest.approx(math.exp(-30.0), rel=1e-12)


def test_sapo_gate():
    # at rho = 1 the gate is sigma(0) * 4 / tau = 2 / tau: A = +1 with tau_pos 1 gives 2; A = -1 with tau_neg 1.05 gives -2/1.05
    new, old = row(0.0, 0.0)
    assert policy_objective(new, old, advantage_values=[1.0], loss="sapo") == pytest.approx(2.0, rel=1e-15)
    assert policy_objective(new, old, advantage_values=[-1.0], loss="sapo") == pytest.approx(-2.0 / 1.05, rel=1e-15)
    # rho = e^0.5 with tau_pos 2: sigma(2 (e^0.5 - 1)) * 4 / 2
    new, old = row(0.5)
    expected = 2.0 / (1.0 + math.exp(-2.0 * (math.exp(0.5) - 1.0)))
    out = policy_objective(new, old, advantage_values=[1.0], loss="sapo", tau_pos=2.0, details=True)
    assert out["objective"] == pytest.approx(expected, rel=1e-14) and out["clip_frac"] == {}


def test_cispo_weights_the_log_prob_with_the_clipped_ratio():
    # rho = 1.5 clipped to 1.2, log pi = -0.5, A = 2: 1.2 * 2 * -0.5 = -1.2 (token sum)
    new, old = [[-0.5]], [[-0.5 - math.log(1.5)]]
    out = policy_objective(new, old, advantage_values=[2.0], loss="cispo", agg="token-sum", details=True)
    assert out["objective"] == pytest.approx(-1.2, rel=1e-14) and out["clip_frac"] == {"low": 0.0, "high": 1.0}
    # TRL's upper-only cap 5: epsilon_low 1, epsilon_high 4; rho = 6 -> 5; rho = 0.01 stays 0.01
    new, old = [[-0.5, -5.0]], [[-0.5 - math.log(6.0), -5.0 - math.log(0.01)]]
    value = policy_objective(new, old, advantage_values=[-1.0], loss="cispo", epsilon_low=1.0, epsilon_high=4.0, agg="token-sum")
    assert value == pytest.approx(5.0 * -1.0 * -0.5 + 0.01 * -1.0 * -5.0, rel=1e-13)


def test_gmpo_geometric_mean_with_sign_dependent_log_clip():
    # log-ratios 0.5, -0.1 with eps 0.2. A = +1: capped at 0.2 -> mean 0.05 -> e^0.05.
    # A = -1: floored at -0.2 (nothing binds) -> mean 0.2 -> -e^0.2. Per-sequence mean: the row's value.
    new, old = row(0.5, -0.1)
    out = policy_objective(new, old, advantage_values=[1.0], loss="gmpo", details=True)
    assert out["objective"] == pytest.approx(math.exp(0.05), rel=1e-14) and out["clip_frac"] == {"low": 0.0, "high": 0.5}
    assert policy_objective(new, old, advantage_values=[-1.0], loss="gmpo") == pytest.approx(-math.exp(0.2), rel=1e-14)
    new, old = row(-0.5, 0.1)  # A = -1: -0.5 floored at -0.2 -> mean -0.05
    assert policy_objective(new, old, advantage_values=[-1.0], loss="gmpo") == pytest.approx(-math.exp(-0.05), rel=1e-14)


def test_gpg_is_the_advantage_times_the_log_prob():
    new, old = [[-0.5, -1.0]], [[-0.7, -0.2]]
    assert policy_objective(new, old, advantage_values=[2.0], loss="gpg", agg="token-sum") == pytest.approx(-3.0, rel=1e-15)


@pytest.mark.parametrize(
    "alias, agg",
    [
        ("grpo", "seq-mean-token-mean"),
        ("bnpo", "token-mean"),
        ("dapo", "token-mean"),
        ("dr_grpo", "seq-mean-token-sum-norm"),
        ("luspo", "seq-mean-token-sum"),
    ],
)
def test_trl_loss_type_names_are_aggregations(alias, agg):
    extra = {"max_length": 8} if agg.endswith("norm") else {}
    assert ObjectiveConfig(agg=alias, **extra).agg == agg
    new, old = [[-0.5, -1.0], [-0.2]], [[-0.6, -0.9], [-0.3]]
    assert policy_objective(new, old, advantage_values=[1.0, -1.0], agg=alias, **extra) == policy_objective(
        new, old, advantage_values=[1.0, -1.0], agg=agg, **extra
    )


def test_a_loss_drops_the_preset_options_it_does_not_take_and_keeps_its_own_definition():
    config = ObjectiveConfig(preset="verl", loss="sapo")
    assert config.dual_clip is None and config.agg == "seq-mean-token-mean" and config.figures["epsilon_low"] is None
    assert ObjectiveConfig(preset="verl", loss="sapo", agg="token-mean").agg == "token-mean"
    assert ObjectiveConfig(preset="verl").dual_clip == 3.0
    assert ObjectiveConfig(preset="verl", delta=4.0).dual_clip is None  # the delta given beats the preset's dual clip


@pytest.mark.parametrize(
    "options, words",
    [
        ({"loss": "gspo", "ratio_level": "token"}, "defined with `ratio_level` 'sequence'"),
        ({"loss": "gpg", "epsilon": 0.3}, "takes no `epsilon`"),
        ({"loss": "sapo", "dual_clip": 3.0}, "takes no `dual_clip`"),
        ({"dual_clip": 3.0, "delta": 3.0}, "pass one"),
        ({"delta": 1.0}, "`delta` must be > 1"),
        ({"loss": "sapo", "tau_neg": 0.0}, "`tau_neg` must be > 0"),
        ({"epsilon_low": 1.5}, "`epsilon_low` must be <= 1"),
    ],
)
def test_loss_option_errors(options, words):
    with pytest.raises(UsageError, match=words.replace("(", r"\(").replace(")", r"\)")):
        ObjectiveConfig(**options)


@pytest.mark.parametrize("loss", ["ppo", "gspo", "gspo-token", "gmpo"])
@given(
    rows=logprob_rollout,
    agg=st.sampled_from(["seq-mean-token-sum", "seq-mean-token-mean", "token-mean", "token-sum"]),
    rule=st.sampled_from(EMPTY_ROWS),
)
def test_on_policy_the_ppo_family_is_the_aggregated_advantage(loss, rows, agg, rule):
    # rho = 1 everywhere: every clip is idle and L_it = A_i, so the objective is agg(A)
    new, _, adv = unpack(rows)
    n = [len(r) for r in new]
    given = {"empty_rows": rule} if AGGREGATIONS[agg].over_rows else {}
    expected = reference_aggregate(adv * n, n, agg, rule)
    assert policy_objective(new, new, advantage_values=adv, loss=loss, agg=agg, **given) == pytest.approx(expected, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("loss", ["sapo", "cispo", "gmpo", "gpg", "gspo"])
def test_cli_runs_each_loss(loss, sample_parquet, tmp_path):
    out = tmp_path / "s.json"
    run_grpo("objective", str(sample_parquet), "--loss", loss, "-q", "--summary-json", str(out))
    figures = json.loads(out.read_text())
    assert figures["config"]["loss"] == loss and math.isfinite(figures["objective"]) and figures["loss"] == -figures["objective"]
    new_old = [policy_objective([[-0.5]], [[-0.5]], advantage_values=[1.0], loss=loss)]
    assert all(math.isfinite(v) for v in new_old)


@pytest.mark.parametrize(
    "old, loss",
    [("old", 0.1401999231645633), ("rollout", 0.1607573190171449)],
    ids=["gspo", "gspo-with-is-correction"],
)
def test_openrlhf_gspo_and_its_ratio_against_the_rollout(old, loss):
    """ref-openrlhf-0.11.2.json: GSPO, s_i = sum_t m (new - old) / max(sum_t m, 1), no clamp,
    seq-mean-token-mean forced; with is_correction on, OpenRLHF takes the rollout's log-probs in
    place of the old ones (the ratio new / rollout): the rollout column as the old policy."""
    from .openrlhf_twinkle_case import ADV, MASK, NEW, OLD, ROLLOUT

    got = policy_objective(NEW, OLD if old == "old" else ROLLOUT, advantage_values=ADV, mask=MASK, preset="openrlhf", loss="gspo")
    assert -got == pytest.approx(loss, rel=1e-9)
