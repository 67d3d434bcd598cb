"""``group_stats`` float32: verl's grpo_vectorized, its group mean and std in float32.

Reference numbers: ``ref-verl-0.9.1.json`` / ``ref-verl-0.7.0.json`` (issue 41 research, verl's
own ``compute_grpo_vectorized_outcome_advantage`` on float64 rewards), case B: groups
[1, 0.3] (n = 2), [0.1, 0.1, 0.1], [1.0, 1.0005, 1.0], [2, -2] (last: rloo's own case), and
the derivations below, step by step in float32 as ``group_mean_std`` does.
"""

import numpy as np
import pytest

from grpo_cli import AdvantageConfig, advantages
from grpo_cli.errors import UsageError
from grpo_cli.estimators.float32 import float32_stats
from grpo_cli.estimators.groups import GroupIndex, Groups

F32 = np.float32


def verl(group_stats: str = "float32", **options) -> AdvantageConfig:
    return AdvantageConfig(preset="verl" if group_stats == "float32" else "verl@0.7", group_stats=group_stats, **options)


def test_an_equal_reward_group_keeps_the_float32_rounding_of_its_mean():
    # fl32(0.1) = 0.100000001490116119384765625; 3 * fl32(0.1) in float32, / 3 rounds back to
    # it: mean = fl32(0.1); r - mean = 0 in float32, so var = 0 and std = 0 (0.9.1, no floor);
    # std + 1e-6 in float32 = fl32(1e-6); A = (0.1 - fl32(0.1)) / fl32(1e-6) in float64
    mean, divisor = float(F32(0.1)), float(F32(1e-6))
    want = (0.1 - mean) / divisor
    assert want == pytest.approx(-0.001490116117595832, rel=1e-15)  # ref-verl-0.9.1.json, case B
    got = advantages(np.array([0.1, 0.1, 0.1]), ["a"] * 3, verl())
    np.testing.assert_array_equal(got, [want] * 3)
    # the float64 statistics give an exact 0 there
    np.testing.assert_array_equal(advantages(np.array([0.1, 0.1, 0.1]), ["a"] * 3, AdvantageConfig(preset="verl")), 0.0)


def test_verl_0_7_floors_the_one_pass_variance_at_eps():
    # 0.7.0: var = (S2 - S1^2 / n) / (n - 1) in float32, below 1e-6, so std = sqrt(fl32(1e-6))
    # = fl32(0.001) and the divisor fl32(fl32(0.001) + fl32(1e-6))
    divisor = float(np.sqrt(F32(1e-6)) + F32(1e-6))
    want = (0.1 - float(F32(0.1))) / divisor
    assert want == pytest.approx(-1.4886274e-06, rel=1e-7)  # ref-verl-0.7.0.json, case B
    np.testing.assert_array_equal(advantages(np.array([0.1, 0.1, 0.1]), ["a"] * 3, verl("float32-one-pass")), [want] * 3)


def test_a_near_equal_group_and_a_group_of_one_match_verl():
    # [1.0, 1.0005, 1.0]: S1 = fl32(1 + fl32(1.0005)) + 1, mean = S1 / 3, the centred squares
    # added in row order, var / 2, sqrt: verl 0.9.1 gives 1.1508391642130589 to 1.0005 (float64
    # statistics: 1.150714347); a group of one: 0.7 / fl32(1 + 1e-6) = 0.7 / 1.00000095...
    r = np.array([1.0, 1.0005, 1.0, 0.7])
    r32 = r[:3].astype(F32)
    mean = (r32[0] + r32[1] + r32[2]) / F32(3)
    c = r32 - mean
    std = np.sqrt((c[0] * c[0] + c[1] * c[1] + c[2] * c[2]) / F32(2))
    want = list((r[:3] - float(mean)) / float(std + F32(1e-6))) + [0.7 / float(F32(1) + F32(1e-6))]
    got = advantages(r, ["b", "b", "b", "c"], verl())
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, [-0.575357025405722, 1.1508391642130589, -0.575357025405722, 0.6999993324286151], rtol=1e-15)


def test_the_float32_stats_of_scattered_and_contiguous_groups_agree():
    rng = np.random.default_rng(3)
    r = rng.normal(size=40)
    codes = rng.integers(0, 5, 40)
    order = np.argsort(codes, kind="stable")
    scattered = Groups(r, GroupIndex(np.unique(codes, return_index=True)[1], 40, codes))
    contiguous = Groups(r[order], GroupIndex(np.flatnonzero(np.diff(codes[order], prepend=-1)), 40))
    for one_pass in (False, True):
        for a, b in zip(float32_stats(scattered, one_pass, 1e-6), float32_stats(contiguous, one_pass, 1e-6)):
            np.testing.assert_array_equal(a, b)  # each group's rows added in the same (row) order


@pytest.mark.parametrize(
    "options, message",
    [
        ({"estimator": "rloo"}, "estimator 'rloo' takes no `group_stats`"),
        ({"std": "population"}, "pass `scale` 'group' and `std` 'sample'"),
        ({"scale": "batch"}, "pass `scale` 'group' and `std` 'sample'"),
        ({"eps": 0.0}, "pass `eps` > 0"),
        ({"singleton": "zero"}, "drop `singleton` 'zero'"),
    ],
)
def test_what_grpo_vectorized_does_not_take_is_refused(options, message):
    with pytest.raises(UsageError, match=message):
        verl(**options)


def test_a_reward_beyond_float32_is_refused():
    from grpo_cli.errors import InputError

    with pytest.raises(InputError, match="beyond float32"):
        advantages(np.array([1e39, 0.0]), ["a", "a"], verl())


def slow_verl_vectorized(r: list[float], groups: list[str], one_pass: bool, eps: float = 1e-6) -> list[float]:
    """verl's grpo_vectorized group by group, a float32 step at a time (rows added in order)."""
    out = []
    for i, g in enumerate(groups):
        rows = [float(F32(r[j])) for j, h in enumerate(groups) if h == g]
        n = F32(len(rows))
        if len(rows) == 1:
            mean, std = F32(0), F32(1)
        else:
            s1 = F32(0)
            for x in rows:
                s1 = F32(s1 + F32(x))
            mean = F32(s1 / n)
            if one_pass:
                s2 = F32(0)
                for x in rows:
                    s2 = F32(s2 + F32(F32(x) * F32(x)))
                var = F32(F32(s2 - F32(F32(s1 * s1) / n)) / F32(n - 1))
                std = F32(np.sqrt(max(var, F32(eps))))
            else:
                m2 = F32(0)
                for x in rows:
                    c = F32(F32(x) - mean)
                    m2 = F32(m2 + F32(c * c))
                std = F32(np.sqrt(F32(m2 / F32(n - 1))))
        out.append((r[i] - float(mean)) / float(F32(std + F32(eps))))
    return out


@pytest.mark.parametrize("group_stats", ["float32", "float32-one-pass"])
def test_matches_the_slow_reference(group_stats):
    rng = np.random.default_rng(11)
    for _ in range(20):
        n = int(rng.integers(1, 30))
        r = np.round(rng.normal(size=n) * 10.0 ** rng.integers(-3, 3), int(rng.integers(1, 6)))
        groups = [str(g) for g in rng.integers(0, 5, n)]
        want = slow_verl_vectorized(list(r), groups, group_stats == "float32-one-pass")
        np.testing.assert_array_equal(advantages(r, groups, verl(group_stats)), want)
