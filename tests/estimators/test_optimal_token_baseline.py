"""The optimal token baseline (verl 0.9.1's optimal_token_baseline and
tir_optimal_token_baseline, trainer/ppo/core_algos.py:872-1121): a hand-derived case, numbers
from verl's own functions, a slow reference written from the formula, and the refusals."""

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_cli import AdvantageConfig, advantages_file, inspect_file
from grpo_cli.errors import ColumnNotFoundError, InputError, UsageError
from grpo_cli.estimators.optimal_token_baseline import EPSILON, cumulative, tail_starts

from grpo_cli.frames import annotate_advantages

from ..conftest import examples, run_grpo

OTB, TIR = "optimal-token-baseline", "tir-optimal-token-baseline"


def _write(path, prompts, masks, rewards, old, sum_pi_squared):
    table = {"uid": prompts, "reward": rewards, "response_mask": masks, "old_log_probs": old, "sum_pi_squared": sum_pi_squared}
    pq.write_table(pa.table(table), path)
    return path


def _advantages(tmp_path, source, estimator, name="out.parquet"):
    out = tmp_path / name
    advantages_file(source, out, config=AdvantageConfig(preset="verl", estimator=estimator), prompt_col="uid")
    return pq.read_table(out)["token_advantage"].to_pylist()


H, Q = math.log(0.5), math.log(0.25)


@pytest.fixture
def hand(tmp_path):
    """Group a: a0 mask 1 1 0, r 1; a1 mask 1 0 1 (a masked token inside), r 0; a2 mask 1 1 1,
    r 1 (the unique longest row: the others have 2 tokens); a3 no token. Group b: b0 alone,
    mask 1 1 0, r 0.5. pi = 1/4 on a0 and a2, 1/2 on a1 and b0; sum pi^2 = 1/2 everywhere,
    so w = 1 - 2 pi + 1/2 = 1 (pi 1/4) or 1/2 (pi 1/2)."""
    masks = [[1, 1, 0], [1, 0, 1], [1, 1, 1], [0, 0, 0], [1, 1, 0]]
    old = [[Q, Q, 0.0], [H, 0.0, H], [Q, Q, Q], [0.0, 0.0, 0.0], [H, H, 0.0]]
    return _write(tmp_path / "hand.parquet", ["a", "a", "a", "a", "b"], masks, [1.0, 0.0, 1.0, 0.0, 0.5], old, [[0.5] * 3] * 5)


def test_hand_derived(hand, tmp_path):
    """G = r on every token (the reward sits on the last); W = cumulative w over the row's valid tokens:
    a0 W 1 2, a1 W 1/2 (col 0) 1 (col 2), a2 W 1 2 3.
    Column 0: B = (1*1 + 0*1/2 + 1*1) / (1 + 1/2 + 1 + eps) = 2 / (2.5 + eps);
    column 1 (a1 masked there): B = (1*2 + 1*2) / (2 + 2 + eps) = 4 / (4 + eps);
    column 2: B = (0*1 + 1*3) / (1 + 3 + eps) = 3 / (4 + eps), but a2's B is 0 from column 2 on
    (the second-longest row has 2 tokens), so A = G = 1 there. a3: no token; b0 alone: A = G = 0.5."""
    b0, b1, b2 = 2 / (2.5 + EPSILON), 4 / (4 + EPSILON), 3 / (4 + EPSILON)
    expected = [[1 - b0, 1 - b1, 0.0], [-b0, 0.0, -b2], [1 - b0, 1 - b1, 1.0], [0.0] * 3, [0.5, 0.5, 0.0]]
    np.testing.assert_allclose(_advantages(tmp_path, hand, OTB), expected, rtol=1e-15, atol=0)


def test_hand_derived_compacted(hand, tmp_path):
    """tir: a1's valid tokens are compacted to positions 0 1 (W 1/2, 1).
    Position 1: B = (1*2 + 0*1 + 1*2) / (2 + 1 + 2 + eps) = 4 / (5 + eps); position 0 as above;
    position 2: a2 alone, in its tail: A = 1. a1 writes its position 1 back at entry 2."""
    b0, b1 = 2 / (2.5 + EPSILON), 4 / (5 + EPSILON)
    expected = [[1 - b0, 1 - b1, 0.0], [-b0, 0.0, -b1], [1 - b0, 1 - b1, 1.0], [0.0] * 3, [0.5, 0.5, 0.0]]
    np.testing.assert_allclose(_advantages(tmp_path, hand, TIR), expected, rtol=1e-15, atol=0)


# verl 0.9.1's own functions, float64 (torch CPU), on rows written right-padded as its tensors are:
# group a (rows 0-3: lengths 3, 4 with a masked token at 1, 6 (unique longest), 0), group b
# (rows 4, 5, 7: lengths 3, 3 with a gap, 1: no unique longest), group c (row 6, alone)
PROMPTS = ["a", "a", "a", "a", "b", "b", "c", "b"]
MASKS = [
    [1, 1, 1, 0, 0, 0],
    [1, 0, 1, 1, 1, 0],
    [1, 1, 1, 1, 1, 1],
    [0, 0, 0, 0, 0, 0],
    [1, 1, 1, 0, 0, 0],
    [1, 1, 0, 1, 0, 0],
    [1, 1, 1, 1, 0, 0],
    [1, 0, 0, 0, 0, 0],
]
REWARDS = [1.0, 0.0, 1.0, 0.5, 0.0, 1.0, 1.0, 0.5]
OLD = [
    [-0.781, -0.25, -0.487, -1.561, -1.415, -0.297],
    [-1.99, -0.399, -0.446, -1.088, -1.409, -1.457],
    [-1.503, -1.132, -1.016, -0.921, -0.059, -0.454],
    [-0.787, -0.072, -1.58, -1.688, -0.806, -1.914],
    [-1.93, -0.996, -1.091, -0.212, -0.773, -0.997],
    [-1.031, -1.517, -1.977, -1.625, -0.651, -1.609],
    [-1.279, -1.993, -0.381, -1.699, -1.478, -0.283],
    [-1.006, -0.348, -0.753, -0.554, -1.822, -0.945],
]
SUM_PI_SQUARED = [
    [0.555, 0.81, 0.453, 0.619, 0.241, 0.471],
    [0.426, 0.305, 0.771, 0.466, 0.885, 0.613],
    [0.624, 0.647, 0.674, 0.306, 0.508, 0.368],
    [0.482, 0.268, 0.877, 0.351, 0.67, 0.41],
    [0.812, 0.664, 0.292, 0.792, 0.861, 0.833],
    [0.599, 0.302, 0.335, 0.85, 0.587, 0.326],
    [0.819, 0.649, 0.599, 0.463, 0.488, 0.368],
    [0.227, 0.813, 0.527, 0.583, 0.426, 0.726],
]
VERL = {
    OTB: [
        [0.3879806989178778, 3.2543570060994398e-09, 0.27898693642536276, 0.0, 0.0, 0.0],
        [-0.6120193010821222, 0.0, -0.7210130635746372, -0.5991959306955905, -0.4599646441866398, 0.0],
        [0.3879806989178778, 3.2543570060994398e-09, 0.27898693642536276, 0.4008040693044095, 1.0, 1.0],
        [0.0] * 6,
        [-0.3904592072653989, -0.4168206449468666, 0.0, 0.0, 0.0, 0.0],
        [0.609540792734601, 0.5831793550531335, 0.0, 3.119990044098131e-09, 0.0, 0.0],
        [1.0, 1.0, 1.0, 1.0, 0.0, 0.0],
        [0.1095407927346011, 0.0, 0.0, 0.0, 0.0, 0.0],
    ],
    TIR: [
        [0.3879806989178778, 0.3484363609862955, 0.3644673389883979, 0.0, 0.0, 0.0],
        [-0.6120193010821222, 0.0, -0.6515636390137045, -0.6355326610116021, -0.48723960172332037, 0.0],
        [0.3879806989178778, 0.3484363609862955, 0.3644673389883979, 0.5127603982766796, 1.0, 1.0],
        [0.0] * 6,
        [-0.3904592072653989, -0.4168206449468666, -0.5109929250868483, 0.0, 0.0, 0.0],
        [0.609540792734601, 0.5831793550531335, 0.0, 0.48900707491315165, 0.0, 0.0],
        [1.0, 1.0, 1.0, 1.0, 0.0, 0.0],
        [0.1095407927346011, 0.0, 0.0, 0.0, 0.0, 0.0],
    ],
}


@pytest.mark.parametrize("estimator", [OTB, TIR])
def test_matches_verl(tmp_path, estimator):
    """Also split over two files (batches), group a across them: the sums merge."""
    source = _write(tmp_path / "verl.parquet", PROMPTS, MASKS, REWARDS, OLD, SUM_PI_SQUARED)
    np.testing.assert_allclose(_advantages(tmp_path, source, estimator), VERL[estimator], rtol=1e-13, atol=1e-15)
    (tmp_path / "parts").mkdir()
    table = pq.read_table(source)
    pq.write_table(table.slice(0, 2), tmp_path / "parts" / "0.parquet")
    pq.write_table(table.slice(2), tmp_path / "parts" / "1.parquet")
    np.testing.assert_allclose(_advantages(tmp_path, tmp_path / "parts", estimator, "parts.parquet"), VERL[estimator], rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("estimator", [OTB, TIR])
def test_batches_of_one_table_merge_their_sums(estimator):
    """Batches of 3 rows on the engine's threads: group a spans two, group b three."""
    table = pa.table({"uid": PROMPTS, "reward": REWARDS, "response_mask": MASKS, "old_log_probs": OLD, "sum_pi_squared": SUM_PI_SQUARED})
    out = annotate_advantages(table, batch_rows=3, config=AdvantageConfig(preset="verl", estimator=estimator))
    np.testing.assert_allclose(out["token_advantage"].to_pylist(), VERL[estimator], rtol=1e-13, atol=1e-15)


def test_the_cli_names_the_columns_it_read(hand, tmp_path):
    summary = tmp_path / "summary.json"
    run_grpo("advantages", str(hand), "--estimator", OTB, "--summary-json", str(summary), "-q")
    columns = json.loads(summary.read_text())["columns"]
    assert (columns["old_logprobs"], columns["sum_pi_squared"], columns["mask"]) == ("old_log_probs", "sum_pi_squared", "response_mask")
    assert inspect_file(str(hand))["columns"]["sum_pi_squared"] == {
        "column": "sum_pi_squared",
        "why": "found by name (looked for sum_pi_squared)",
        "option": "sum_pi_squared_col",
    }
    assert "sum_pi_squared" not in inspect_file(str(hand), sum_pi_squared_col="none")["columns"]
    ran = run_grpo("advantages", str(hand), "--estimator", TIR, "--sum-pi-squared-col", "spp", check=False)
    assert ran.returncode != 0 and "no column 'spp' for sum of pi^2 (--sum-pi-squared-col)" in ran.stderr.decode()


def reference(prompts, masks, rewards, old, sum_pi_squared, compact):
    """Loops over groups, positions and rows, from the formula (the reward on the last valid token)."""
    rows = []
    for mask, o, s in zip(masks, old, sum_pi_squared):
        valid = [t for t, m in enumerate(mask) if m]
        w = np.cumsum([1 - 2 * math.exp(o[t]) + s[t] for t in valid])
        rows.append({(k if compact else t): (k, wk) for k, (t, wk) in enumerate(zip(valid, w))})
    out = [[0.0] * len(m) for m in masks]
    for g in set(prompts):
        members = [i for i, p in enumerate(prompts) if p == g]
        lengths = sorted(len(rows[i]) for i in members)
        second = lengths[-2] if len(lengths) > 1 else 0
        for i in members:
            valid = [t for t, m in enumerate(masks[i]) if m]
            unique_longest = len(rows[i]) == lengths[-1] > second
            for p, (k, _) in rows[i].items():
                num = sum(rewards[j] * rows[j][p][1] for j in members if p in rows[j])
                den = sum(rows[j][p][1] for j in members if p in rows[j])
                b = 0.0 if unique_longest and p >= second else num / (den + EPSILON)
                out[i][valid[k]] = rewards[i] - b
    return out


@st.composite
def groups_of_rows(draw):
    n = draw(st.integers(1, 9))
    width = draw(st.integers(1, 6))
    prompts = draw(st.lists(st.sampled_from("abc"), min_size=n, max_size=n))
    masks = draw(st.lists(st.lists(st.sampled_from([0, 1]), min_size=width, max_size=width), min_size=n, max_size=n))
    rewards = draw(st.lists(st.sampled_from([0.0, 1.0, 0.5, -1.0]), min_size=n, max_size=n))
    old = draw(st.lists(st.lists(st.floats(-3, 0), min_size=width, max_size=width), min_size=n, max_size=n))
    spp = draw(st.lists(st.lists(st.floats(0.05, 1), min_size=width, max_size=width), min_size=n, max_size=n))
    return prompts, masks, rewards, old, spp


@pytest.mark.parametrize("estimator", [OTB, TIR])
@settings(max_examples=examples(25), deadline=None)
@given(case=groups_of_rows())
def test_matches_slow_reference(tmp_path_factory, estimator, case):
    tmp_path = tmp_path_factory.mktemp("otb")
    source = _write(tmp_path / "case.parquet", *case)
    expected = reference(*case, compact=estimator == TIR)
    np.testing.assert_allclose(np.concatenate(_advantages(tmp_path, source, estimator)), np.concatenate(expected), rtol=1e-10, atol=1e-12)


def test_cumulative_and_tails():
    assert cumulative(np.array([0.5, 0.25, 1.0, 2.0]), np.array([2, 0, 2])).tolist() == [0.5, 0.75, 1.0, 3.0]
    # group 0: lengths 3 3 (no unique longest); group 1: 5, 2, 0 -> the 5 is zero from 2 on; group 2: alone
    tails = tail_starts(np.array([3, 5, 3, 2, 0, 4]), np.array([0, 1, 0, 1, 1, 2]))
    no = np.iinfo(np.int64).max
    assert tails.tolist() == [no, 2, no, no, no, 0]


def test_refusals(hand, tmp_path):
    with pytest.raises(UsageError, match=r"estimator 'optimal-token-baseline' gives a group of one row its returns \(as verl\); drop `singleton`"):
        AdvantageConfig(estimator=OTB, singleton="zero")
    with pytest.raises(UsageError, match=r"carries its returns past masked tokens \(as verl\); drop `masked_steps` 'count'"):
        AdvantageConfig(estimator=TIR, masked_steps="count")
    with pytest.raises(UsageError, match=r"`advantage_clip` clips a row's r - b, and estimator 'optimal-token-baseline' has a baseline per token"):
        AdvantageConfig(estimator=OTB, advantage_clip=(-1, 1))
    assert AdvantageConfig(preset="openrlhf", estimator=OTB).advantage_clip is None
    with pytest.raises(UsageError, match=r"estimator 'optimal-token-baseline' takes no `gamma`"):
        AdvantageConfig(estimator=OTB, gamma=0.9)
    with pytest.raises(UsageError, match=r"`sum_pi_squared_col` is not read: estimator 'grpo' reads no token column"):
        advantages_file(hand, sum_pi_squared_col="sum_pi_squared")
    with pytest.raises(UsageError, match=r"`sum_pi_squared_col` is read only by estimators 'optimal-token-baseline', 'tir-optimal-token-baseline'"):
        advantages_file(hand, config=AdvantageConfig(estimator="reinforce"), sum_pi_squared_col="sum_pi_squared")


def test_a_negative_sum_of_pi_squared_is_refused(tmp_path):
    path = _write(tmp_path / "neg.parquet", ["a", "a"], [[1, 1], [1, 0]], [1.0, 0.0], [[-0.5, -0.5], [-0.5, 0.0]], [[0.5, 0.5], [0.5, -1.0]])
    advantages_file(path, config=AdvantageConfig(estimator=OTB))  # a masked entry is never read
    pq.write_table(pq.read_table(path).set_column(4, "sum_pi_squared", pa.array([[0.5, 0.5], [-0.5, 0.0]])), path)
    with pytest.raises(InputError, match=r"row 1 .*column 'sum_pi_squared' has a negative sum of pi\^2"):
        advantages_file(path, config=AdvantageConfig(estimator=OTB))


def test_missing_columns_name_their_option(tmp_path):
    path = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"uid": ["a", "a"], "reward": [1.0, 0.0], "old_log_probs": [[-0.5], [-0.5]]}), path)
    with pytest.raises(ColumnNotFoundError, match=r"no sum of pi\^2 column \(looked for sum_pi_squared; pass `sum_pi_squared_col`\)"):
        advantages_file(path, config=AdvantageConfig(estimator=OTB))
    pq.write_table(pa.table({"uid": ["a", "a"], "reward": [1.0, 0.0], "response_mask": [[1], [1]], "sum_pi_squared": [[0.5], [0.5]]}), path)
    with pytest.raises(ColumnNotFoundError, match=r"estimator 'tir-optimal-token-baseline' needs the old log-probs .*; pass `old_logprobs_col`"):
        advantages_file(path, config=AdvantageConfig(estimator=TIR))


# verl 0.9.1's own functions again, with rollout correction on: rollout_is_weights (0 on padding,
# as verl's) scale each token's w by the weight squared, W_t = sum_{k <= t} w_k rho_k^2
IS_WEIGHTS = [
    [0.5, 1.2, 0.8, 0.0, 0.0, 0.0],
    [0.8, 0.0, 1.1, 0.7, 1.4, 0.0],
    [1.1, 0.7, 1.4, 1.0, 0.6, 1.3],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.6, 1.3, 0.9, 0.0, 0.0, 0.0],
    [0.9, 0.5, 0.0, 0.8, 0.0, 0.0],
    [1.2, 0.8, 1.5, 1.1, 0.0, 0.0],
    [1.5, 0.0, 0.0, 0.0, 0.0, 0.0],
]
VERL_IS = {
    OTB: [
        [0.3173963396208356, 4.096677885812028e-09, 0.2304311981314877, 0.0, 0.0, 0.0],
        [-0.6826036603791644, 0.0, -0.7695688018685123, -0.7138370960372781, -0.48242551133339023, 0.0],
        [0.3173963396208356, 4.096677885812028e-09, 0.2304311981314877, 0.2861629039627219, 1.0, 1.0],
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        [-0.535624612249992, -0.30650142373030814, 0.0, 0.0, 0.0, 0.0],
        [0.464375387750008, 0.6934985762696919, 0.0, 5.361397437120274e-09, 0.0, 0.0],
        [1.0, 1.0, 1.0, 1.0, 0.0, 0.0],
        [-0.03562461224999203, 0.0, 0.0, 0.0, 0.0, 0.0],
    ],
    TIR: [
        [0.3173963396208356, 0.3529204833481081, 0.27888216434907165, 0.0, 0.0, 0.0],
        [-0.6826036603791644, 0.0, -0.6470795166518919, -0.7211178356509284, -0.4904664790194975, 0.0],
        [0.3173963396208356, 0.3529204833481081, 0.27888216434907165, 0.5095335209805025, 1.0, 1.0],
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        [-0.535624612249992, -0.30650142373030814, -0.4164163104716339, 0.0, 0.0, 0.0],
        [0.464375387750008, 0.6934985762696919, 0.0, 0.5835836895283661, 0.0, 0.0],
        [1.0, 1.0, 1.0, 1.0, 0.0, 0.0],
        [-0.03562461224999203, 0.0, 0.0, 0.0, 0.0, 0.0],
    ],
}


@pytest.mark.parametrize("estimator", [OTB, TIR])
def test_matches_verl_with_rollout_is_weights(tmp_path, estimator):
    table = pq.read_table(_write(tmp_path / "verl.parquet", PROMPTS, MASKS, REWARDS, OLD, SUM_PI_SQUARED))
    pq.write_table(table.append_column("rollout_is_weights", pa.array(IS_WEIGHTS)), tmp_path / "is.parquet")
    got = _advantages(tmp_path, str(tmp_path / "is.parquet"), estimator)
    np.testing.assert_allclose(got, VERL_IS[estimator], rtol=1e-13, atol=1e-15)
    assert got != _advantages(tmp_path, str(tmp_path / "verl.parquet"), estimator, "plain.parquet")  # the weights change W


def test_is_weights_by_hand(hand, tmp_path):
    """The hand case with a weight of 2 on a2's tokens (w 1 -> 4, W 4 8 12) and 1 elsewhere:
    column 0: B = (1*1 + 0*1/2 + 1*4) / (1 + 1/2 + 4 + eps) = 5 / (5.5 + eps);
    column 1: B = (1*2 + 1*8) / (2 + 8 + eps) = 10 / (10 + eps); column 2: a2's tail, A = 1;
    a1 there: B = (0*1 + 1*12) / (1 + 12 + eps)."""
    table = pq.read_table(hand)
    weights = [[1.0] * 3, [1.0] * 3, [2.0] * 3, [1.0] * 3, [1.0] * 3]
    pq.write_table(table.append_column("rollout_is_weights", pa.array(weights)), tmp_path / "w.parquet")
    b0, b1, b2 = 5 / (5.5 + EPSILON), 10 / (10 + EPSILON), 12 / (13 + EPSILON)
    expected = [[1 - b0, 1 - b1, 0.0], [-b0, 0.0, -b2], [1 - b0, 1 - b1, 1.0], [0.0] * 3, [0.5, 0.5, 0.0]]
    np.testing.assert_allclose(_advantages(tmp_path, str(tmp_path / "w.parquet"), OTB), expected, rtol=1e-15, atol=0)


def test_is_weights_are_read_by_the_optimal_token_baselines_alone(tmp_path, hand):
    table = pq.read_table(hand).append_column("rollout_is_weights", pa.array([[1.0] * 3] * 5))
    pq.write_table(table, tmp_path / "w.parquet")
    with pytest.raises(UsageError, match="`is_weights_col` is read only by estimators 'optimal-token-baseline'"):
        advantages_file(
            str(tmp_path / "w.parquet"), config=AdvantageConfig(estimator="reinforce"), prompt_col="uid", is_weights_col="rollout_is_weights"
        )
    with pytest.raises(UsageError, match="`is_weights_col` is not read: estimator 'grpo' reads no token column"):
        advantages_file(str(tmp_path / "w.parquet"), config=AdvantageConfig(estimator="grpo"), prompt_col="uid", is_weights_col="rollout_is_weights")
    neg = table.set_column(5, "rollout_is_weights", pa.array([[1.0] * 3, [1.0, 1.0, -1.0]] + [[1.0] * 3] * 3))
    pq.write_table(neg, tmp_path / "neg.parquet")
    with pytest.raises(InputError, match="row 1 .*column 'rollout_is_weights' has a negative importance weight"):
        advantages_file(str(tmp_path / "neg.parquet"), config=AdvantageConfig(preset="verl", estimator=OTB), prompt_col="uid")
    assert inspect_file(str(tmp_path / "w.parquet"))["columns"]["is_weights"]["column"] == "rollout_is_weights"
