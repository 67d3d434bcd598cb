"""The Python API: Twinkle-style callables (seeds 001 and 004), seed 000's normalize_group,
advantages() on any grouping, and seed 002's policy_objective."""

import importlib
import math

import numpy as np
import pytest

from grpo_cli import GRPOAdvantage, RLOOAdvantage, UnknownOptionError, UsageError, advantages, advantages_file, normalize_group, policy_objective
from grpo_cli.errors import InputError

from .conftest import SAMPLE

SEED_004_REWARDS = [0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]
SEED_NEW = [[-0.2, -0.3], [-0.1, -0.4]]
SEED_OLD = [[-0.5, -0.6], [-0.4, -0.7]]


# Seed 000: population std, rounded to 4 decimals.
@pytest.mark.parametrize(
    "rewards, expected",
    [
        ([0.0, 1.0, 0.0, 1.0], [-1.0, 1.0, -1.0, 1.0]),
        ([0.2, 0.5, 0.8, 0.3, 0.7], [-1.3156, 0.0, 1.3156, -0.8771, 0.8771]),
        ([-0.5, 0.0, 0.5, 1.0], [-1.3416, -0.4472, 0.4472, 1.3416]),
    ],
)
def test_seed_000_normalize_group(rewards, expected):
    assert normalize_group(rewards) == expected


def test_seed_004_listed_numbers_are_scale_none():
    adv = GRPOAdvantage()(SEED_004_REWARDS, num_generations=4, scale="none")
    assert adv.tolist() == [-0.5, 0.5, -0.5, 0.5, 0.75, -0.25, -0.25, -0.25]


def test_seed_004_group_scale_uses_sample_std_like_twinkle():
    adv = GRPOAdvantage()(SEED_004_REWARDS, num_generations=4, scale="group")
    # group 1: 0.5 / (sqrt(1/3) + 1e-8); group 2: 0.75 / (0.5 + 1e-8), -0.25 / (0.5 + 1e-8)
    s1, s2 = np.sqrt(1 / 3) + 1e-8, 0.5 + 1e-8
    np.testing.assert_allclose(adv, [-0.5 / s1, 0.5 / s1, -0.5 / s1, 0.5 / s1, 0.75 / s2, -0.25 / s2, -0.25 / s2, -0.25 / s2], rtol=1e-15)
    assert adv[1] == pytest.approx(0.866025, abs=1e-6)
    assert adv[4] == pytest.approx(1.5, abs=1e-6)


def test_seed_004_group_scale_population_std():
    adv = GRPOAdvantage()(SEED_004_REWARDS, num_generations=4, scale="group", std="population", eps=0.0)
    np.testing.assert_allclose(adv[:4], [-1.0, 1.0, -1.0, 1.0])


def test_rloo_seed_001_interface():
    adv = RLOOAdvantage()(SEED_004_REWARDS, num_generations=4, scale="none")
    np.testing.assert_allclose(adv[:4], [-2 / 3, 2 / 3, -2 / 3, 2 / 3])
    np.testing.assert_allclose(adv[4:], [1.0, -1 / 3, -1 / 3, -1 / 3])


def test_num_generations_edge_cases():
    # num_generations=1: every group has one row -> all zeros (Twinkle would return raw rewards)
    assert GRPOAdvantage()([0.3, 0.9], num_generations=1).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="do not split into groups"):
        GRPOAdvantage()([0.0, 1.0, 0.0], num_generations=2)


def test_two_dimensional_rewards_are_summed_like_twinkle():
    adv = GRPOAdvantage()([[0.0, 0.0], [1.0, 0.0], [0.5, 0.5], [0.0, 0.0]], num_generations=2, scale="none")
    assert adv.tolist() == [-0.5, 0.5, 0.5, -0.5]


def test_torch_tensor_in_gives_tensor_of_same_dtype_out():
    torch = pytest.importorskip("torch")
    rewards = torch.tensor(SEED_004_REWARDS, dtype=torch.float32)
    adv = GRPOAdvantage()(rewards, num_generations=4, scale="none")
    assert isinstance(adv, torch.Tensor) and adv.dtype == torch.float32
    assert adv.tolist() == [-0.5, 0.5, -0.5, 0.5, 0.75, -0.25, -0.25, -0.25]


def test_numpy_in_gives_float64_numpy_out():
    adv = GRPOAdvantage()(np.array(SEED_004_REWARDS, dtype=np.float32), num_generations=4, scale="none")
    assert isinstance(adv, np.ndarray) and adv.dtype == np.float64


def test_unknown_keyword_is_an_error_listing_the_valid_ones():
    # Twinkle's callables swallow unknown keywords: scal='none' would silently scale by the group std
    with pytest.raises(
        UnknownOptionError,
        match=r"GRPOAdvantage\(\) has no option `scal`; did you mean `scale`\? "
        r"\(valid: num_generations, scale, std, eps\)",
    ):
        GRPOAdvantage()(SEED_004_REWARDS, num_generations=4, scal="none")
    with pytest.raises(TypeError, match="RLOOAdvantage"):  # a TypeError, as for any unknown keyword
        RLOOAdvantage()(SEED_004_REWARDS, num_generations=4, epsilon=1e-6)


def test_twinkle_std_and_eps_apply_only_where_advantages_are_scaled():
    # scale='none' takes Twinkle's defaults without complaint; an explicit std does not apply there
    assert GRPOAdvantage()(SEED_004_REWARDS, num_generations=4, scale="none").tolist()[:2] == [-0.5, 0.5]
    with pytest.raises(UsageError, match="`std` applies only to scaled advantages and `scale` is 'none'"):
        GRPOAdvantage()(SEED_004_REWARDS, num_generations=4, scale="none", std="sample")


def test_seed_002_example_1():
    # The seed states 0.0. Its own steps give L1 = 0.6 + 0.6 = 1.2 (ratio e^0.3 clipped to
    # 1.2, times A = 0.5) and L2 = -1.35 (ratio rounded to 1.35, times A = -0.5, unclipped
    # because min picks the lower value), so L = (1.2 - 1.35) / 2 = -0.075; the seed then
    # divides by 2 a second time (-0.0375) and rounds to 0.0. With the exact ratio e^0.3 the
    # formula gives L = (1.2 - e^0.3) / 2.
    result = policy_objective(SEED_NEW, SEED_OLD, [1.0, 0.0], 0.2)
    assert result == pytest.approx((1.2 - math.exp(0.3)) / 2, rel=1e-14)
    assert round(result, 7) == -0.0749294


def test_seed_002_example_2_equal_rewards_give_zero():
    assert policy_objective([[-0.5, -0.5], [-0.5, -0.5]], [[-0.5, -0.5], [-0.5, -0.5]], [1.0, 1.0], 0.2) == 0.0


def test_seed_002_example_3_single_response_gives_zero():
    assert policy_objective([[-0.3, -0.4, -0.5]], [[-0.5, -0.6, -0.7]], [2.0], 0.1) == 0.0


def test_beta_without_reference_is_an_error():
    with pytest.raises(UsageError, match="needs `ref_log_probs`"):
        policy_objective(SEED_NEW, SEED_OLD, [1.0, 0.0], beta=0.1)
    with pytest.raises(UsageError, match="`kl` needs `ref_log_probs`"):
        policy_objective(SEED_NEW, SEED_OLD, [1.0, 0.0], kl="k2")


def test_policy_objective_refuses_unknown_keywords():
    with pytest.raises(UnknownOptionError, match=r"policy_objective\(\) has no option `epsilon_hi`; did you mean `epsilon_high`\?"):
        policy_objective(SEED_NEW, SEED_OLD, [1.0, 0.0], epsilon_hi=0.28)


def test_per_token_advantages():
    # per-token advantages equal to the row's reproduce the per-row objective
    row = policy_objective(SEED_NEW, SEED_OLD, advantage_values=[0.5, -0.5], details=True)
    token = policy_objective(SEED_NEW, SEED_OLD, advantage_values=[[0.5, 0.5], [-0.5, -0.5]], details=True)
    assert token["objective"] == pytest.approx(row["objective"], rel=1e-15)
    assert token["clip_frac"] == row["clip_frac"] and "advantage" not in token["rows"]
    # a token with A = 0 adds nothing; one with A < 0 is unclipped below: -1 * e^0.3
    out = policy_objective(SEED_NEW, SEED_OLD, advantage_values=[[1.0, 0.0], [0.0, -1.0]], agg="token-sum", details=True)
    assert out["objective"] == pytest.approx(1.2 - math.exp(0.3), rel=1e-14)
    assert out["clip_frac"] == {"low": 0.0, "high": 0.25, "dual": 0.0} and out["zero_advantage_rows"] == 0
    with pytest.raises(Exception, match="column 'advantage' has 1 tokens but 2 in the log-probs column"):
        policy_objective(SEED_NEW, SEED_OLD, advantage_values=[[1.0], [0.0, 1.0]])


# Seed 002's rows padded to width 4 the way trainers hold them: garbage in the padding.
PADDED_NEW = np.array([[-0.2, -0.3, np.nan, 0.0], [-0.1, -0.4, 7.0, -np.inf]])
PADDED_OLD = np.array([[-0.5, -0.6, 0.0, np.inf], [-0.4, -0.7, -1e300, 3.0]])
PADDED_MASK = np.array([[1, 1, 0, 0], [1, 1, 0, 0]])


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"])
def test_padded_2d_arrays_with_a_mask_are_the_ragged_rows(agg):
    ragged = policy_objective(SEED_NEW, SEED_OLD, [1.0, 0.0], 0.2, agg=agg, ref_log_probs=SEED_OLD, details=True)
    padded = policy_objective(PADDED_NEW, PADDED_OLD, [1.0, 0.0], 0.2, agg=agg, ref_log_probs=PADDED_OLD, mask=PADDED_MASK, details=True)
    assert padded["objective"] == ragged["objective"] and padded["tokens"] == 4
    assert padded["kl_ref"] == ragged["kl_ref"] and padded["ratio"] == ragged["ratio"]
    per_token = policy_objective(
        PADDED_NEW,
        PADDED_OLD,
        agg=agg,
        mask=PADDED_MASK.astype(bool),
        advantage_values=np.array([[0.5, 0.5, np.nan, 9.0], [-0.5, -0.5, 0.0, np.inf]]),
    )
    assert per_token == pytest.approx(ragged["objective"], rel=1e-15)


def test_padded_garbage_in_a_counted_token_is_still_refused():
    with pytest.raises(InputError, match="log-probs: row 1: column 'new' has a positive log-prob"):
        policy_objective(PADDED_NEW, PADDED_OLD, [1.0, 0.0], mask=np.array([[1, 1, 0, 0], [1, 1, 1, 0]]))


def test_padded_tensors_with_a_mask():
    torch = pytest.importorskip("torch")
    expected = policy_objective(SEED_NEW, SEED_OLD, [1.0, 0.0], 0.2)
    got = policy_objective(
        torch.tensor(PADDED_NEW, dtype=torch.float32),
        torch.tensor(PADDED_OLD),
        torch.tensor([1.0, 0.0]),
        0.2,
        mask=torch.tensor(PADDED_MASK, dtype=torch.bool),
    )
    assert got == pytest.approx(policy_objective(np.float32(SEED_NEW), SEED_OLD, [1.0, 0.0], 0.2), rel=1e-15)
    assert got == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("package", ["grpo_cli", "grpo_cli.engines", "grpo_cli.estimators", "grpo_cli.objective"])
def test_every_name_a_package_exports_is_there(package):
    module = importlib.import_module(package)
    assert [name for name in module.__all__ if not hasattr(module, name)] == []


def test_length_mismatches_name_the_parameters():
    with pytest.raises(InputError, match=r"^`rewards` and `groups` must have one entry per row \(found \(3,\) and 2\)$"):
        advantages([1.0, 0.0, 1.0], ["a", "a"])
    with pytest.raises(InputError, match=r"^1 `advantage_values` for 2 rows of `log_probs_new`$"):
        policy_objective(SEED_NEW, SEED_OLD, advantage_values=[1.0])
    with pytest.raises(InputError, match=r"^3 `rewards` for 2 rows of `log_probs_new`$"):
        policy_objective(SEED_NEW, SEED_OLD, [1.0, 0.0, 1.0], 0.2, groups=["a", "a", "b"])


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: GRPOAdvantage()([1.0, 0.0], num_generations=None), r"^`num_generations` must be an integer >= 1 \(found None\)$"),
        (lambda: policy_objective(np.array([-0.1, -0.2]), np.array([-0.1, -0.2]), [1.0, 0.0]), r"take one list per row.*\(found a 1-D array\)$"),
        (lambda: advantages_file(str(SAMPLE / "rollouts.parquet"), threads=-1), r"^`threads` must be an integer >= 1 \(found -1\)$"),
        (lambda: GRPOAdvantage()([1 + 1j, 0.0], num_generations=2), r"^`rewards` holds real numbers \(found complex128"),
        (lambda: GRPOAdvantage()(["1", "0"], num_generations=2), r"^`rewards` holds real numbers \(found <U1"),
        (lambda: policy_objective([[-0.1]], [[-0.1]], [1.0], advantage_values=[0.5]), r"^pass either `rewards` .* or `advantage_values`, not both$"),
    ],
)
def test_api_misuse_raises_the_librarys_error_naming_the_parameter(call, message):
    """Issue 43, class 15: raw IndexError, TypeError, ArrowInvalid or ValueError leaked, strings
    and complex numbers were coerced, and `rewards` was ignored beside `advantage_values`."""
    with pytest.raises(UsageError, match=message):
        call()
