"""Micro-batches: each framework's rule hand-derived on one case (rows of different token
counts, a row without tokens, a last shorter micro-batch), against verl's agg_loss, one
micro-batch as the input's value, and independence of the batching."""

import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grpo_cli import ObjectiveConfig, objective_file, policy_objective
from grpo_cli.errors import UsageError
from grpo_cli.objective import AGGREGATIONS
from grpo_cli.objective.aggregation import EMPTY_ROWS
from grpo_cli.objective.micro import RULES, MicroSums

from ..conftest import SAMPLE, run_grpo
from ..strategies import rollout_tables
from . import agg_case

# verl's agg_loss case (research/41 ref_verl.py, case A): the loss matrix, its mask and each
# row's response length (row 4: one token, masked). On policy (rho = 1) with these per-token
# advantages the PPO term is the advantage, so each aggregation of the objective is agg_loss
# of the matrix. Row sums S = [0.4, 1.1, 0.2, 0.0, 0, 2.0], counted tokens n = [3, 4, 2, 4, 0, 1],
# row means S/n = [0.4/3, 0.275, 0.1, 0, -, 2.0] (sum 0.508333 over rows 0-3).
LOSS_MAT, MASK, LENGTHS = agg_case.LOSS, agg_case.MASK, agg_case.LENGTHS


def objective(width: str = "padded", **options) -> float:
    """The case's objective; ``width`` padded: every row 5 tokens, jagged: its response's."""
    cut = LENGTHS if width == "jagged" else [5] * len(LOSS_MAT)
    adv = [row[:k] for row, k in zip(LOSS_MAT, cut)]
    mask = [[bool(m) for m in row[:k]] for row, k in zip(MASK, cut)]
    lp = [[-1.0] * k for k in cut]
    return policy_objective(lp, lp, advantage_values=adv, mask=mask, **options)


# verl 0.7.0's dp_actor (ref-verl-0.7.0.json, "trainer_0.7.0_dp_actor"): agg_loss on each
# micro-batch, rows without tokens left out, times its rows / 6.
# [3, 3]: token-mean (1.7/9 + 2.0/5)/2; seq-mean-token-sum (1.7/3 + 2.0/2)/2 (row 4 left out);
# seq-mean-token-mean (0.508333/3 + 2.0/2)/2; seq-mean-token-sum-norm, L = 5: (1.7/5 + 2.0/5)/2.
# [2, 2, 2]: token-mean (1.5/7 + 0.2/6 + 2.0/1)/3; seq-mean-token-sum (1.5/2 + 0.2/2 + 2.0/1)/3;
# seq-mean-token-mean ((0.4/3 + 0.275)/2 + 0.1/2 + 2.0)/3; norm (1.5/5 + 0.2/5 + 2.0/5)/3.
VERL_07 = {
    3: {
        "token-mean": 0.29444444444444445,
        "seq-mean-token-sum": 0.7833333333333334,
        "seq-mean-token-mean": 0.5847222169502315,
        "token-sum-norm": 0.37,
    },
    2: {
        "token-mean": 0.7492063492063492,
        "seq-mean-token-sum": 0.95,
        "seq-mean-token-mean": 0.7513888819502316,
        "token-sum-norm": 0.24666666666666665,
    },
}


@pytest.mark.parametrize("size", sorted(VERL_07))
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "token-sum-norm"])
def test_verl_07_aggregates_each_micro_batch_alone(size, agg):
    want = VERL_07[size][agg]
    got = objective(preset="verl@0.7", agg=agg, micro_batch_size=size, **({"max_length": 5} if agg == "token-sum-norm" else {}))
    assert got == pytest.approx(want, rel=1e-7)  # verl's seq-mean-token-mean divides by n + 1e-8


@pytest.mark.parametrize("size", [2, 3, 4, 6])
def test_verl_091_micro_batches_leave_the_value(size):
    """ref-verl-0.9.1.json, "trainer_0.9.1_engine": every split gives the mini-batch's value:
    token-mean 3.7/14, token-sum 3.7, seq-mean-token-sum 3.7/6, seq-mean-token-mean 2.508333/6,
    seq-mean-token-sum-norm with loss_scale_factor 8: 3.7/(6 8)."""
    want = {"token-mean": 3.7 / 14, "token-sum": 3.7, "seq-mean-token-sum": 3.7 / 6, "seq-mean-token-mean": 0.4180555519502316}
    for agg, value in want.items():
        assert objective(preset="verl", agg=agg, micro_batch_size=size) == pytest.approx(value, rel=1e-7)
        assert objective(preset="verl", agg=agg, micro_batch_size=size) == objective(preset="verl", agg=agg)
    normed = objective(preset="verl", agg="seq-mean-token-sum-norm", max_length=8, micro_batch_size=size)
    assert normed == pytest.approx(3.7 / 48, rel=1e-14)


@pytest.mark.parametrize(
    "size, want",
    [
        (6, 3.7 / (6 * 5)),
        (3, 1.7 / (6 * 5) + 2.0 / (6 * 4)),
        (2, 1.5 / (6 * 5) + 0.2 / (6 * 4) + 2.0 / (6 * 1)),
        (4, 1.7 / (6 * 5) + 2.0 / (6 * 1)),
    ],
)
def test_verl_091_norm_without_a_constant_divides_each_micro_batch_by_its_longest_row(size, want):
    """verl 0.9.1, loss_scale_factor null: agg_loss divides micro-batch j by global_batch_size
    x loss_mask.shape[-1], its padded width, the longest response among its rows (lengths 3, 5,
    2, 4, 1, 1); verl's agg_loss on the micro-batches cut to that width gives 0.12333333333333334,
    0.14, 0.39166666666666666, 0.39 (research/41, scratch run of core_algos 0.9.1)."""
    verl = {6: 0.12333333333333334, 3: 0.14, 2: 0.39166666666666666, 4: 0.39}[size]
    got = objective("jagged", preset="verl", agg="seq-mean-token-sum-norm", micro_batch_size=size)
    assert got == pytest.approx(want, rel=1e-14)
    assert got == pytest.approx(verl, rel=1e-14)


# Micro-batches of 4: rows 0-3 (S 1.7, 13 tokens, row means 0.508333) and rows 4-5 (S 2.0, 1
# token, row 4 empty, row means 2.0).
THREE_RULES = {
    # verl 0.9.1: the mini-batch's denominators: 3.7/14 and 2.508333/6
    "verl": {"token-mean": 3.7 / 14, "seq-mean-token-mean": (0.4 / 3 + 0.275 + 0.1 + 2.0) / 6},
    # verl 0.7.0: (4/6) x value of rows 0-3 + (2/6) x value of rows 4-5, row 4 left out
    "verl@0.7": {"token-mean": 4 / 6 * 1.7 / 13 + 2 / 6 * 2.0, "seq-mean-token-mean": 4 / 6 * (0.4 / 3 + 0.275 + 0.1) / 4 + 2 / 6 * 2.0},
    # Twinkle: the mean of the two values, row 4 counted in its micro-batch's rows
    "twinkle": {"token-mean": (1.7 / 13 + 2.0) / 2, "seq-mean-token-mean": ((0.4 / 3 + 0.275 + 0.1) / 4 + 2.0 / 2) / 2},
}


@pytest.mark.parametrize("preset", sorted(THREE_RULES))
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_the_three_rules_on_a_last_shorter_micro_batch(preset, agg):
    got = objective(preset=preset, agg=agg, dual_clip=None, micro_batch_size=4)
    assert got == pytest.approx(THREE_RULES[preset][agg], rel=1e-14)
    values = {p: THREE_RULES[p][agg] for p in THREE_RULES}
    assert len({round(v, 10) for v in values.values()}) == 3  # three different numbers


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("empty_rows", EMPTY_ROWS)
@pytest.mark.parametrize("agg", [name for name, a in AGGREGATIONS.items() if not a.padded])  # luspo-padded refuses micro-batches
def test_one_micro_batch_is_the_input(rule, empty_rows, agg):
    options = {"agg": agg, **({"max_length": 5} if AGGREGATIONS[agg].needs_max_length else {})}
    if AGGREGATIONS[agg].over_rows:
        options["empty_rows"] = empty_rows
    whole = objective(**options)
    for size in (6, 7, 100):
        got = objective(micro_batch_size=size, micro_batch_rule=rule, **options)
        assert got == pytest.approx(whole, rel=1e-14, abs=1e-15)


def test_micro_batch_totals_do_not_depend_on_how_rows_are_split():
    rng = np.random.default_rng(7)
    x = rng.normal(size=101) * 10.0 ** rng.integers(-8, 8, size=101)
    values = {"x": x, "longest": rng.integers(0, 9, size=101).astype(float)}
    for size in (1, 3, 7, 50, 200):
        whole = MicroSums.of(values, size)
        for _ in range(5):
            cuts = np.sort(rng.choice(np.arange(1, 101), size=rng.integers(1, 12), replace=False))
            merged = MicroSums.of({k: v[:0] for k, v in values.items()}, size)
            for a, b in zip([0, *cuts], [*cuts, 101]):
                merged = merged.merge(MicroSums.of({k: v[a:b] for k, v in values.items()}, size, a))
            for key in values:
                assert np.array_equal(merged.totals[key], whole.totals[key])
        assert whole.count == -(-101 // size)
        np.testing.assert_allclose(whole.totals["x"][0], x[:size].sum(), rtol=1e-12)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=30)
@given(rollout_tables(), st.sampled_from(tuple(RULES)), st.integers(1, 4), st.integers(1, 3))
def test_objective_file_does_not_depend_on_batch_size_with_micro_batches(table, rule, size, batch_rows):
    config = ObjectiveConfig(agg="seq-mean-token-mean", empty_rows="skip", micro_batch_size=size, micro_batch_rule=rule)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "rows.parquet"
        pq.write_table(table, path)
        given = {"config": config, "prompt_col": "prompt_id"}
        assert objective_file(str(path), batch_rows=batch_rows, **given) == objective_file(str(path), **given)


def test_the_summary_states_the_micro_batches_and_their_rule():
    figures = policy_objective([[-1.0]] * 5, [[-1.0]] * 5, advantage_values=[1.0] * 5, micro_batch_size=2, micro_batch_rule="mean", details=True)
    assert figures["micro_batches"] == 3
    assert (figures["config"]["micro_batch_size"], figures["config"]["micro_batch_rule"]) == (2, "mean")
    plain = policy_objective([[-1.0]] * 5, [[-1.0]] * 5, advantage_values=[1.0] * 5, details=True)
    assert "micro_batches" not in plain and "micro_batch_size" not in plain["config"]  # summaries without them keep their keys
    shown = run_grpo("objective", str(SAMPLE / "rollouts.parquet"), "--preset", "twinkle", "--micro-batch-size", "64").stderr.decode()
    assert "micro-batches" in shown and "5, of 64 rows each (mean:" in shown


@pytest.mark.parametrize(
    "options, message",
    [
        ({"micro_batch_rule": "mean"}, "`micro_batch_rule` applies to micro-batches"),
        ({"micro_batch_size": 0}, "`micro_batch_size` must be an integer >= 1"),
        ({"micro_batch_size": 2.5}, "`micro_batch_size` must be an integer >= 1"),
        ({"micro_batch_size": 2, "loss": "clip_cov"}, "per micro-batch in verl, which is not modelled"),
        ({"micro_batch_size": 2, "micro_batch_rule": "row-weighted", "agg": "seq-mean-token-sum-norm"}, "needs `max_length`"),
        ({"micro_batch_size": 2, "micro_batch_rule": "sum"}, "micro_batch_rule"),
        ({"micro_batch_size": 2, "preset": "trl"}, "preset 'trl' does not say how its framework combines micro-batches"),
    ],
)
def test_refused(options, message):
    with pytest.raises(UsageError, match=message):
        ObjectiveConfig(**options)


def test_the_presets_set_their_framework_rule():
    assert ObjectiveConfig(preset="openrlhf", micro_batch_size=2, micro_batch_rule="mean").micro_batch_rule == "mean"
    assert [ObjectiveConfig(preset=p, micro_batch_size=2).micro_batch_rule for p in ("verl", "verl@0.7", "twinkle", "twinkle@0.1")] == [
        "global",
        "row-weighted",
        "mean",
        "mean",
    ]
