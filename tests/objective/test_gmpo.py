"""GMPO: the geometric mean of the clipped token ratios."""

import math

import pytest

from grpo_cli import ObjectiveConfig, policy_objective
from grpo_cli.errors import UsageError

from . import verl_case
from .references import ratios


# the slow reference (tests/objective/references.py)
def reference(new, old, adv, config) -> float:
    d = [math.log(r) for r in ratios(new, old, config)]
    up = math.exp(sum(min(x, config.epsilon_high) for x in d) / len(d)) if d else 1.0
    down = math.exp(sum(max(x, -config.epsilon_low) for x in d) / len(d)) if d else 1.0
    return sum(a * (up if a > 0 else down) for a in adv)


REFERENCES = {"gmpo": reference}


def test_verl_geo_mean_averages_over_every_row_an_empty_one_included():
    """verl's geo_mean (0.9.1 core_algos.py:1928-2000): per row -A_i exp(mean_t clipped d), then
    torch.mean over all 6 rows; row 4 is fully masked and adds 0. d = new - old on counted
    tokens, clipped at eps_high = 0.2 where A > 0 and floored at -0.2 where A < 0:
    row 0 (A 1):    d = .3, -.05, .1, -.4 -> .2, -.05, .1, -.4   rho = exp(-0.0375) = 0.96319
    row 1 (A -0.5): d = 1.3, .02, -.3     -> 1.3, .02, -.2      rho = exp(0.37333) = 1.45257
    row 2 (A 0.8):  d = -.5, .25          -> -.5, .2            rho = exp(-0.15)   = 0.86071
    row 3 (A -1.2): d = .15, 1.4, -.1, .05 (none below -0.2)    rho = exp(0.375)   = 1.45499
    row 5 (A 0.6):  d = -.25                                    rho = exp(-0.25)   = 0.77880
    loss = (-0.96319 + 0.72628 - 0.68857 + 1.74599 - 0.46728) / 6 = 0.0588721 (verl: 0.05887210876,
    its n_i + 1e-8 a relative 1e-8 off); ``empty_rows`` skip divides by 5."""
    new, old, mask, adv = verl_case.NEW, verl_case.OLD, verl_case.MASK, verl_case.ADV
    loss = -policy_objective(new, old, advantage_values=adv, mask=mask, loss="gmpo")
    assert loss == pytest.approx(0.05887210876223418, rel=1e-7)
    assert -policy_objective(new, old, advantage_values=adv, mask=mask, loss="gmpo", empty_rows="skip") == pytest.approx(loss * 6 / 5, rel=1e-14)


def test_trl_gmpo_adds_the_advantage_of_a_row_without_tokens():
    """TRL 1.16's experimental GMPOTrainer (experimental/gmpo/gmpo_trainer.py:101-120): per row
    coef_i = exp(sum_t m clipped d / max(sum_t m, 1)), loss_i = -coef_i A_i, then the mean over
    all rows. Row 0 (A 1): d = new - old = 0.1, -0.3, under eps_high 0.4, mean -0.1, coef e^-0.1.
    Row 1 (A -0.5) has no counted token: 0 / max(0, 1) = 0, coef e^0 = 1, its loss 0.5.
    Objective = -(mean loss) = (e^-0.1 - 0.5) / 2; verl's geo_mean (``gmpo_empty`` zero): e^-0.1 / 2."""
    new, old, mask, adv = [[-1.0, -1.3], [-1.0]], [[-1.1, -1.0], [-1.0]], [[1, 1], [0]], [1.0, -0.5]
    trl = policy_objective(new, old, advantage_values=adv, mask=mask, preset="trl", loss="gmpo", details=True)
    assert trl["objective"] == pytest.approx((math.exp(-0.1) - 0.5) / 2, rel=1e-14)
    assert trl["config"]["gmpo_empty"] == "advantage"
    assert policy_objective(new, old, advantage_values=adv, mask=mask, loss="gmpo", gmpo_empty="advantage") == trl["objective"]
    assert policy_objective(new, old, advantage_values=adv, mask=mask, preset="verl", loss="gmpo") == pytest.approx(math.exp(-0.1) / 2, rel=1e-14)


def test_trl_gmpo_numbers_and_its_plain_kl():
    # ref-trl-1.16.0.json, GMPO eps 0.4: beta 0 -> 0.012354366073550413 (its loss); beta 0.04 adds
    # 0.04 * mean_i mean_t k3 -> 0.01179654127087785 (per_token_kl is k3, not times the ratio as
    # 1.16's use_bias_correction_kl makes its GRPO loss's)
    from .trl_case import ADV, MASK, NEW, OLD, REF

    for beta, loss in ((0.0, -0.012354366073550413), (0.04, -0.01179654127087785)):
        got = policy_objective(NEW, OLD, advantage_values=ADV, mask=MASK, ref_log_probs=REF, preset="trl", loss="gmpo", beta=beta)
        assert -got == pytest.approx(loss, rel=1e-12)


def test_gmpo_empty_advantage_is_a_term_of_the_mean_of_row_means():
    with pytest.raises(UsageError, match="`gmpo_empty` 'advantage' is a row's term in the mean of the row means"):
        ObjectiveConfig(loss="gmpo", gmpo_empty="advantage", agg="token-mean")
    with pytest.raises(UsageError, match="takes no `gmpo_empty`"):
        ObjectiveConfig(loss="ppo", gmpo_empty="advantage")
