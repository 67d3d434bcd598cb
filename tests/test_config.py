"""Options: each default written once, values checked, and an option that does not apply to
the resolved configuration refused with what to do instead."""

import numpy as np
import pytest

from grpo_cli import AdvantageConfig, GRPOAdvantage, ObjectiveConfig, UsageError
from grpo_cli.config import REWARD_OPTIONS, defaults
from grpo_cli.objective import LOSSES, Flag, Loss, SignedFactors


def test_defaults_are_resolved_and_what_was_given_is_recorded():
    config = AdvantageConfig()
    assert (config.estimator, config.scale, config.std, config.eps) == ("grpo", "group", "population", 0.0)
    assert config.given == frozenset() and AdvantageConfig(std="sample").given == {"std"}
    objective = ObjectiveConfig(epsilon=0.1, epsilon_high=0.28)
    assert (objective.epsilon_low, objective.epsilon_high, objective.kl, objective.agg) == (0.1, 0.28, "k3", "seq-mean-token-sum")
    assert defaults(ObjectiveConfig)["epsilon"] == 0.2 and defaults(AdvantageConfig)["std"] == "population"


def test_the_estimator_conventions_of_issue_41():
    # advantage_clip: an estimator option (advantages and objective), not a reward one; off by default
    assert defaults(AdvantageConfig)["advantage_clip"] is None and "advantage_clip" not in REWARD_OPTIONS
    assert "multi_reward" in REWARD_OPTIONS and AdvantageConfig(advantage_clip=(-10, 10)).advantage_clip == (-10.0, 10.0)
    # GDPO over tokens is whitened as verl's masked_whiten once its whitening options are given
    gdpo = AdvantageConfig(multi_reward="normalize-then-sum-tokens", whiten_eps_at="var")
    assert gdpo.whiten and gdpo.figures["whiten_eps_at"] == "var"
    assert "advantage_clip" not in AdvantageConfig().figures  # recorded only when given: older summaries unchanged


def test_mean_with_explicit_scale_is_an_error():
    with pytest.raises(UsageError, match="never scaled"):
        AdvantageConfig(estimator="mean", scale="group")
    assert AdvantageConfig(estimator="mean", scale="none").scale == "none"  # the one it takes


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown `scale` 'gdpo' \(valid: group, batch, none\)"):
        GRPOAdvantage()([0.0, 1.0], num_generations=2, scale="gdpo")
    with pytest.raises(UsageError, match="unknown `estimator` 'ppo'"):
        AdvantageConfig(estimator="ppo")


@pytest.mark.parametrize(
    "options, message",
    [
        ({"estimator": "mean", "std": "sample"}, "estimator 'mean' takes no `std`; it is never scaled"),
        ({"estimator": "drgrpo", "eps": 1e-6}, "estimator 'drgrpo' takes no `eps`; it is never scaled"),
        (
            {"scale": "none", "std": "sample"},
            "`std` applies only to scaled advantages and `scale` is 'none'; drop `std`, or pass `scale` 'group' or 'batch'",
        ),
        ({"estimator": "rloo", "scale": "none", "eps": 1e-8}, "`eps` applies only to scaled advantages"),
        ({"eps": -1.0}, r"`eps` must be >= 0 and finite \(found -1.0\)"),
        ({"advantage_clip": (2.0, 2.0)}, r"`advantage_clip` must be LO < HI \(found 2.0, 2.0\)"),
        ({"multi_reward": "normalize-then-sum-tokens", "kl_in_reward": 0.1}, "`kl_in_reward` subtracts from one reward"),
        ({"multi_reward": "normalize-then-sum-tokens", "estimator": "reinforce"}, "estimator 'reinforce' is token-level"),
        ({"singleton": "none"}, r"unknown `singleton` 'none' \(valid: zero, reward, unit-std, batch, error\)"),
    ],
)
def test_advantage_options_that_do_not_apply_are_refused(options, message):
    with pytest.raises(UsageError, match=message):
        AdvantageConfig(**options)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"epsilon": 0.0}, r"`epsilon` must be > 0 and finite \(found 0.0\)"),
        ({"epsilon": -0.1}, r"`epsilon` must be > 0"),
        ({"dual_clip": 1.0}, r"`dual_clip` must be > 1 and finite \(found 1.0\)"),
        ({"agg": "mean"}, r"unknown `agg` 'mean' \(valid: seq-mean-token-sum, "),
    ],
)
def test_option_errors(options, message):
    with pytest.raises(UsageError, match=message):
        ObjectiveConfig(**options)


def test_norm_aggregation_needs_max_length():
    with pytest.raises(UsageError, match="needs `max_length`"):
        ObjectiveConfig(agg="seq-mean-token-sum-norm")


@pytest.mark.parametrize(
    "options, message",
    [
        (
            {"max_length": 512},
            "`max_length` applies only to `agg` 'seq-mean-token-sum-norm' or 'token-sum-norm' \\(found `agg` 'seq-mean-token-sum'\\); drop it",
        ),
        (
            {"epsilon": 0.2, "epsilon_low": 0.1, "epsilon_high": 0.3},
            "`epsilon_low` and `epsilon_high` both override `epsilon`; drop one of the three",
        ),
        (
            {"loss": "nope"},
            r"unknown `loss` 'nope' \(valid: cispo, clip_cov, dppo_kl, dppo_tv, dro, gmpo, gpg, gspo, gspo-token, kl_cov, ppo, ppo_value, rloo, sapo, vespo\)",
        ),
    ],
)
def test_objective_options_that_do_not_apply_are_refused(options, message):
    with pytest.raises(UsageError, match=message):
        ObjectiveConfig(**options)


def test_a_loss_refuses_the_options_of_other_losses(monkeypatch):
    """The clip options belong to the losses that declare them: with a loss that takes none,
    giving one is an error."""
    unclipped = Loss("unclipped", lambda ratio, config: SignedFactors(ratio, ratio, {}), params=(), flags=(Flag("low", -1),))
    monkeypatch.setitem(LOSSES, "unclipped", unclipped)
    assert ObjectiveConfig(loss="unclipped", agg="token-mean").loss == "unclipped"
    with pytest.raises(UsageError, match="loss 'unclipped' takes no `dual_clip`"):
        ObjectiveConfig(loss="unclipped", dual_clip=3.0)
    assert np.isfinite(ObjectiveConfig(dual_clip=3.0).dual_clip)
