"""Aggregations: each hand-derived, with rows without counted tokens under both ``empty_rows``
rules, against verl's agg_loss, the unit-ratio property, and independence of the batching."""

import re
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grpo_cli import ObjectiveConfig, objective_file, policy_objective
from grpo_cli.errors import UsageError
from grpo_cli.objective import AGGREGATIONS, ALIASES, row_terms
from grpo_cli.objective.aggregation import EMPTY_ROWS
from grpo_cli.objective.summary import ObjectiveSummary
from grpo_cli.tokens import Tokens

from ..strategies import logprob_rollout, rollout_tables, unpack
from . import agg_case
from .references import reference_aggregate

OVER_ROWS = [name for name, a in AGGREGATIONS.items() if a.over_rows]
NORMED = {"max_length": 4}


def normed(agg: str) -> dict:
    return NORMED if AGGREGATIONS[agg].needs_max_length else {}


# rho = 1 everywhere: row 0 has 3 tokens with A = 1, row 1 has 1 token with A = -2.
AGG_NEW = [[-1.0, -1.0, -1.0], [-1.0]]
HAND_DERIVED = {
    "seq-mean-token-sum": (3 - 2) / 2,
    "seq-mean-token-mean": (1 - 2) / 2,
    "token-mean": (3 - 2) / 4,
    "token-sum": 3 - 2,
    "seq-mean-token-sum-norm": (3 - 2) / (2 * 4),
    "token-sum-norm": (3 - 2) / 4,
    # T = 3, the longest row; row 1's 2 padding positions add A = -2 each: (3 * 3 + 1 * (-2 - 2 * 2)) / (2 rows * 3)
    "luspo-padded": (3 * 3 + 1 * (-2 - 2 * 2)) / (2 * 3),
}


@pytest.mark.parametrize("agg", AGGREGATIONS)
def test_each_aggregation_hand_derived(agg):
    assert policy_objective(AGG_NEW, AGG_NEW, advantage_values=[1.0, -2.0], agg=agg, **normed(agg)) == HAND_DERIVED[agg]


# The same two rows and two without counted tokens: row 2 has 2 tokens, both masked (A = 5),
# row 3 none (A = 7). S = [3, -2, 0, 0], n = [3, 1, 0, 0], N = 4, L = 4; a mean over rows is
# over B = 4 rows (count: the empty rows add 0) or B = 2 (skip).
EMPTY_NEW = [[-1.0, -1.0, -1.0], [-1.0], [-1.0, -1.0], []]
EMPTY_MASK = [[1, 1, 1], [1], [0, 0], []]
WITH_EMPTY_ROWS = {
    ("seq-mean-token-sum", "count"): (3 - 2) / 4,
    ("seq-mean-token-sum", "skip"): (3 - 2) / 2,
    ("seq-mean-token-mean", "count"): (3 / 3 - 2 / 1) / 4,
    ("seq-mean-token-mean", "skip"): (3 / 3 - 2 / 1) / 2,
    ("seq-mean-token-sum-norm", "count"): (3 - 2) / (4 * 4),
    ("seq-mean-token-sum-norm", "skip"): (3 - 2) / (2 * 4),
    ("token-mean", None): (3 - 2) / 4,
    ("token-sum", None): 3 - 2,
    ("token-sum-norm", None): (3 - 2) / 4,
    # T = 3; rows 2 and 3 have n = 0: they add nothing, and count in B or not
    ("luspo-padded", "count"): (3 * 3 + 1 * (-2 - 2 * 2)) / (4 * 3),
    ("luspo-padded", "skip"): (3 * 3 + 1 * (-2 - 2 * 2)) / (2 * 3),
}


@pytest.mark.parametrize("agg, rule", WITH_EMPTY_ROWS)
def test_each_aggregation_with_empty_rows_hand_derived(agg, rule):
    given = {} if rule is None else {"empty_rows": rule}
    out = policy_objective(
        EMPTY_NEW, EMPTY_NEW, advantage_values=[1.0, -2.0, 5.0, 7.0], mask=EMPTY_MASK, agg=agg, details=True, **normed(agg), **given
    )
    assert out["objective"] == WITH_EMPTY_ROWS[agg, rule]
    assert out["empty_rows"] == 2 and out["tokens"] == 4
    assert out["config"]["empty_rows"] == rule
    if rule == "count":  # the default
        assert (
            policy_objective(EMPTY_NEW, EMPTY_NEW, advantage_values=[1.0, -2.0, 5.0, 7.0], mask=EMPTY_MASK, agg=agg, **normed(agg))
            == out["objective"]
        )


# verl's agg_loss on a loss matrix of 6 rows, width 5, row 4 fully masked (9.0: padding):
# S = [0.5-0.2+0.1, 1.0+0.3-0.4+0.2, -0.6+0.8, 0.25+0.25-1.0+0.5, 0, 2.0] = [0.4, 1.1, 0.2, 0, 0, 2.0],
# n = [3, 4, 2, 4, 0, 1], sum S = 3.7, N = 14; sum of S_i/n_i = 0.4/3 + 0.275 + 0.1 + 0 + 2 = 2.508333...
# verl 0.9.1's trainer divides by the whole mini-batch, B = 6 (workers/utils/losses.py:65-68,
# core_algos.py:1140-1205): seq-mean-token-sum 3.7/6, seq-mean-token-mean 2.508333/6,
# seq-mean-token-sum-norm 3.7/(6*5) with L the width 5. verl 0.7.0's actor (one micro-batch, no
# global info, core_algos.py:772-827) over the 5 rows with tokens: 3.7/5, 2.508333/5, and its
# seq-mean-token-sum-norm 3.7/L with no rows (L = 5: 0.74, L = 8: 0.4625). verl adds 1e-8 to n_i
# (a relative 1e-8). Numbers: verl's own agg_loss, /work/research/41/ref-verl-{0.9.1,0.7.0}.json.
VERL_LOSS, VERL_MASK = np.array(agg_case.LOSS), np.array(agg_case.MASK)
VERL_LOSSES = [
    ("token-mean", {}, 0.2642857142857143),
    ("token-sum", {}, 3.7),
    ("seq-mean-token-sum", {}, 0.6166666666666667),
    ("seq-mean-token-mean", {}, 0.41805555195023153),
    ("seq-mean-token-sum-norm", {"max_length": 5}, 0.12333333333333334),
    ("seq-mean-token-sum-norm", {"max_length": 8}, 0.07708333333333334),
    ("seq-mean-token-sum", {"empty_rows": "skip"}, 0.74),
    ("seq-mean-token-mean", {"empty_rows": "skip"}, 0.5016666623402779),
    ("token-sum-norm", {"max_length": 5}, 0.74),
    ("token-sum-norm", {"max_length": 8}, 0.4625),
]


@pytest.mark.parametrize("agg, options, expected", VERL_LOSSES)
def test_verl_agg_loss_with_an_empty_row(agg, options, expected):
    # rho = 1 and per-token A = -loss: the loss is verl's loss matrix aggregated
    logp = np.full(VERL_LOSS.shape, -1.0)
    out = policy_objective(logp, logp, advantage_values=-VERL_LOSS, mask=VERL_MASK, agg=agg, details=True, **options)
    assert out["loss"] == pytest.approx(expected, rel=1e-7)
    assert out["empty_rows"] == 1


@given(logprob_rollout, st.sampled_from(sorted(AGGREGATIONS)), st.sampled_from(EMPTY_ROWS))
def test_unit_ratio_gives_aggregated_advantage(rows, agg, rule):
    new, _, adv = unpack(rows)
    n = [len(r) for r in new]
    given = {"empty_rows": rule} if AGGREGATIONS[agg].over_rows else {}
    out = policy_objective(new, new, advantage_values=adv, agg=agg, **normed(agg), **given)
    expected = reference_aggregate(adv * n, n, agg, rule, **normed(agg))
    assert out == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_empty_rows_applies_only_to_a_mean_over_rows():
    assert ObjectiveConfig().empty_rows == "count" and ObjectiveConfig().figures["empty_rows"] == "count"
    assert ObjectiveConfig(agg="token-mean").figures["empty_rows"] is None
    with pytest.raises(UsageError, match=r"`empty_rows` applies only to the means over rows, .* \(found `agg` 'token-mean'\); drop it"):
        ObjectiveConfig(agg="dapo", empty_rows="skip")
    with pytest.raises(UsageError, match=r"unknown `empty_rows` 'drop' \(valid: count, skip, refuse\)"):
        ObjectiveConfig(empty_rows="drop")


def test_trl_luspo_is_the_mean_of_row_sums():
    # TRL 1.16's luspo: mean_i sum_t m_it L_it over every row (grpo_trainer.py:3179)
    assert ALIASES["luspo"] == "seq-mean-token-sum"
    assert policy_objective(EMPTY_NEW, EMPTY_NEW, advantage_values=[1.0, -2.0, 5.0, 7.0], mask=EMPTY_MASK, agg="luspo") == (3 - 2) / 4


@st.composite
def rows_with_empty_ones(draw):
    """A :class:`Tokens` batch where many rows have no tokens, a per-row advantage, and cuts
    into consecutive batches."""
    lengths = np.array(draw(st.lists(st.integers(0, 3), min_size=1, max_size=20)))
    n = int(lengths.sum())
    logp = st.floats(-4.0, 0.0, allow_nan=False, width=32)
    new, old = (np.array(draw(st.lists(logp, min_size=n, max_size=n)), dtype=np.float32) for _ in range(2))
    adv = np.array(draw(st.lists(st.floats(-2, 2), min_size=len(lengths), max_size=len(lengths))))
    cuts = sorted(set(draw(st.lists(st.integers(1, len(lengths)), max_size=4))) - {len(lengths)})
    return Tokens(lengths, new, old), adv, cuts


@pytest.mark.parametrize("agg", OVER_ROWS)
@pytest.mark.parametrize("rule", EMPTY_ROWS)
@given(rows_with_empty_ones())
def test_summaries_merged_over_batches_with_empty_rows_are_the_whole(agg, rule, drawn):
    tokens, adv, cuts = drawn
    config = ObjectiveConfig(agg=agg, empty_rows=rule, **normed(agg))
    whole = ObjectiveSummary.of(row_terms(tokens, adv, config)).figures(config)
    merged = ObjectiveSummary()
    for a, b in zip([0, *cuts], [*cuts, tokens.rows]):
        merged = merged.merge(ObjectiveSummary.of(row_terms(tokens.rows_slice(a, b), adv[a:b], config), a))
    assert merged.figures(config) == whole
    assert whole["empty_rows"] == int((tokens.n_counted == 0).sum())


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rollout_tables(), st.sampled_from(OVER_ROWS), st.sampled_from(EMPTY_ROWS), st.integers(1, 3))
def test_objective_file_does_not_depend_on_batch_size_with_empty_rows(table, agg, rule, batch_rows):
    config = ObjectiveConfig(agg=agg, empty_rows=rule, **normed(agg))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "rows.parquet"
        pq.write_table(table, path)
        given = {"config": config, "prompt_col": "prompt_id"}  # (its ids may all differ)
        assert objective_file(str(path), batch_rows=batch_rows, **given) == objective_file(str(path), **given)


def test_a_row_emptied_by_sequence_rejection_is_an_empty_row():
    # rho = 1; row 0 (A = 1, 2 tokens) matches its sampler, row 1 (A = 3) is off by log 2 per
    # token: seq_sum_k1 with bounds [1/1.5, 1.5] rejects row 1 as a whole (sum 2 log 2 > log 1.5).
    # seq-mean-token-mean: (2/2 + 0) / 2 counting the emptied row, 2/2 / 1 skipping it
    new = [[-1.0, -1.0], [-1.0, -1.0]]
    rollout = [[-1.0, -1.0], [-1.0 + np.log(2), -1.0 + np.log(2)]]
    options = {"advantage_values": [1.0, 3.0], "rollout_log_probs": rollout, "reject": "seq_sum_k1", "reject_threshold": "1.5"}
    count = policy_objective(new, new, agg="grpo", details=True, **options)
    assert count["objective"] == 0.5 and count["empty_rows"] == 1 and count["rollout"]["rejected"]["rows"] == 1
    assert policy_objective(new, new, agg="grpo", empty_rows="skip", **options) == 1.0


# TRL 1.16's GRPOTrainer._compute_loss (grpo_trainer.py:3152-3184) on 6 rows of width 4, row 4
# fully masked: L_it = -min(rho A_i, clip(rho, 0.8, 1.2) A_i); grpo (and sapo) = mean over ALL 6
# rows of sum_t m L / max(n_i, 1), the empty row adding 0; dr_grpo = sum m L / (6 * 4); luspo =
# mean over the 6 rows of sum_t m L. Numbers: TRL's own code, /work/research/41/ref-trl-1.16.0.json.
TRL_NEW = [[-1.0, -0.5, -2.0, -0.3], [-0.7, -1.2, 0.0, 0.0], [-0.2, -3.0, -0.9, 0.0], [-1.5, 0.0, 0.0, 0.0], [0.0] * 4, [-0.4, -0.6, -0.8, -1.0]]
TRL_OLD = [[-1.1, -0.4, -1.5, -0.35], [-0.9, -1.0, 0.0, 0.0], [-0.25, -2.0, -1.0, 0.0], [-1.2, 0.0, 0.0, 0.0], [0.0] * 4, [-0.5, -0.55, -1.4, -0.9]]
TRL_MASK = [[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]]
TRL_ADVANTAGES = [0.7558146775799328, -1.133722016369899, 0.3779073387899664, -0.7067070073327899, 0.0, 0.7067070073327899]
TRL_LOSSES = [
    ({"agg": "grpo"}, -0.004064822725369195),
    ({"agg": "dr_grpo", "max_length": 4}, -0.15785876277155392),
    ({"agg": "luspo"}, -0.6314350510862159),
    ({"agg": "luspo", "ratio_level": "sequence"}, -0.6610451479944427),
    ({"loss": "sapo"}, -0.05772409692997438),
    # TRL 1.9.0's token-level luspo (ref-trl-1.9.0.json): rows x T = 6 x 4; below
    ({"agg": "luspo", "preset": "trl@1.9"}, -0.6250491635443458),
]


@pytest.mark.parametrize("options, expected", TRL_LOSSES)
def test_trl_loss_types_count_the_empty_row(options, expected):
    loss = -policy_objective(TRL_NEW, TRL_OLD, advantage_values=TRL_ADVANTAGES, mask=TRL_MASK, **options)
    assert loss == pytest.approx(expected, rel=1e-12)
    skipped = -policy_objective(TRL_NEW, TRL_OLD, advantage_values=TRL_ADVANTAGES, mask=TRL_MASK, empty_rows="skip", **options)
    assert skipped == pytest.approx(expected * 6 / 5, rel=1e-12)  # 5 rows with tokens


def test_trl_19_token_level_luspo_by_hand():
    """TRL 1.9.0 grpo_trainer.py:3143-3146: ``(per_token_loss * mask.sum(1, keepdim=True)).mean()``,
    the per-token loss unmasked: each of the B x T positions of the padded block adds
    n_i L_it, a padding position (ratio 1: TRL's old log-probs are the new ones there) its
    -A_i. Two rows, new = old (rho = 1): row 0 3 tokens, A = 1; row 1 1 token then 1 masked,
    A = -2; T = 3. Loss = -(3 * (1 + 1 + 1) + 1 * (-2 + 2 * (-2))) / (2 * 3) = -(9 - 6) / 6."""
    new = [[-1.0, -1.0, -1.0], [-1.0, -0.5]]
    mask = [[1, 1, 1], [1, 0]]
    got = policy_objective(new, new, advantage_values=[1.0, -2.0], mask=mask, preset="trl@1.9", agg="luspo", details=True)
    assert got["config"]["agg"] == "luspo-padded" and -got["objective"] == pytest.approx(-(9 - 6) / 6, rel=1e-14)
    # 1.16 (and the aggregation's own name elsewhere): the mean of the row sums, (3 - 2) / 2
    assert policy_objective(new, new, advantage_values=[1.0, -2.0], mask=mask, preset="trl", agg="luspo") == pytest.approx(0.5, rel=1e-14)
    # at sequence level 1.9's per-token loss is one column per row: its mean over rows of n_i L_i
    sequence = policy_objective(new, new, advantage_values=[1.0, -2.0], mask=mask, preset="trl@1.9", agg="luspo", loss="gspo", details=True)
    assert sequence["config"]["agg"] == "seq-mean-token-sum"


def test_trl_19_luspo_with_trls_options():
    """TRL 1.9.0's own _compute_loss in float64 (a scratch run of ref-trl.py's case): luspo with
    delta 1.05 (a padding position's ratio 1 is under it: its term stays A_i), and with
    top_entropy_quantile 0.5 (TRL ands the entropy mask with the mask: padding adds 0)."""
    from .trl_case import ENTROPY

    case = {"advantage_values": TRL_ADVANTAGES, "mask": TRL_MASK, "agg": "luspo-padded"}
    assert -policy_objective(TRL_NEW, TRL_OLD, delta=1.05, **case) == pytest.approx(-0.5931290922111568, rel=1e-12)
    masked = -policy_objective(TRL_NEW, TRL_OLD, top_entropy_quantile=0.5, entropies=ENTROPY, **case)
    assert masked == pytest.approx(-0.2653415205181777, rel=1e-12)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"ratio_level": "sequence"}, "at `ratio_level` sequence it is 'seq-mean-token-sum'"),
        ({"loss": "sapo"}, "takes loss 'ppo'"),
        ({"beta": 0.04}, "adds the KL of TRL's padding positions"),
        ({"is_level": "token"}, "takes no `is_level`"),
        ({"off_policy_mask": 0.1}, "takes no `off_policy_mask`"),
        ({"micro_batch_size": 2, "micro_batch_rule": "mean"}, "not each micro-batch; drop `micro_batch_size`"),
    ],
)
def test_luspo_padded_refuses_what_its_padding_would_need(options, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        ObjectiveConfig(agg="luspo-padded", **options)


def test_trl19_sequence_luspo_refuses_a_kl_penalty():
    """TRL 1.9's sequence-level luspo is seq-mean-token-sum only without a KL: with beta, TRL's
    mean over B x T includes the KL of its padding positions."""
    assert ObjectiveConfig(preset="trl@1.9", loss="gspo", agg="luspo").agg == "seq-mean-token-sum"
    with pytest.raises(UsageError, match=re.escape("averages the KL of TRL's padding positions too")):
        ObjectiveConfig(preset="trl@1.9", loss="gspo", agg="luspo", beta=0.04)


def test_luspo_padded_refuses_per_token_advantages():
    with pytest.raises(UsageError, match="takes one advantage per row"):
        policy_objective([[-1.0]], [[-1.0]], advantage_values=[[1.0]], agg="luspo-padded")
