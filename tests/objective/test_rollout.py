"""Rollout correction: importance weights (token, sequence; cap, mask; TRL's names), rejection
(k1, k2, k3 per token, row sum or row mean; verl's names), and the mismatch figures."""

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grpo_cli import ObjectiveConfig, policy_objective
from grpo_cli.errors import UsageError

from ..conftest import run_grpo
from ..strategies import logprob_rollout, unpack
from . import openrlhf_twinkle_case, verl_case

L2 = math.log(2.0)
# one row, two tokens, new = old (rho = 1), rollout such that w = exp(old - rollout) = 2 and 0.5
NEW = OLD = [[-1.0, -1.0]]
ROLLOUT = [[-1.0 - L2, -1.0 + L2]]


def objective(**options):
    return policy_objective(NEW, OLD, advantage_values=[1.0], rollout_log_probs=ROLLOUT, agg="token-sum", details=True, **options)


def test_token_weights_multiply_each_term_then_cap_or_mask():
    assert objective(is_level="token")["objective"] == pytest.approx(2.5, rel=1e-14)  # 1 * 2 + 1 * 0.5
    capped = objective(is_level="token", is_cap=1.5)
    assert capped["objective"] == pytest.approx(2.0, rel=1e-14) and capped["rollout"]["is"]["truncated_tokens"] == 1
    masked = objective(is_level="token", is_mask=(0.6, 3.0))  # 0.5 < 0.6: weight 0, the token still counted
    assert masked["objective"] == pytest.approx(2.0, rel=1e-14) and masked["rollout"]["is"]["masked_tokens"] == 1
    assert masked["tokens"] == 2 and masked["rollout"]["is"]["weight_mean"] == pytest.approx(1.0)
    # TRL's mode names: the level and the one bound they take
    assert objective(is_level="token_truncate", is_cap=1.5)["objective"] == capped["objective"]
    assert objective(is_level="token_mask", is_mask=(0.6, 3.0))["objective"] == masked["objective"]


def test_sequence_weight_is_exp_of_the_row_sum_on_every_token():
    assert objective(is_level="sequence")["objective"] == pytest.approx(2.0, rel=1e-14)  # exp(log 2 - log 2) = 1, twice
    rollout = [[-1.0 - L2, -1.0 - L2]]  # w = exp(2 log 2) = 4 on both tokens, capped at 3
    out = policy_objective(NEW, OLD, advantage_values=[1.0], rollout_log_probs=rollout, agg="token-sum", is_level="sequence", is_cap=3.0)
    assert out == pytest.approx(6.0, rel=1e-14)


def test_the_kl_penalty_is_not_weighted():
    ref = [[-1.5, -1.5]]  # d = new - ref = 0.5 per token, k1 = 0.5
    out = policy_objective(
        NEW, OLD, advantage_values=[1.0], rollout_log_probs=ROLLOUT, ref_log_probs=ref, agg="token-sum", is_level="token", beta=0.1, kl="k1"
    )
    assert out == pytest.approx(2.5 - 0.1 * 1.0, rel=1e-14)


def test_token_rejection_takes_tokens_out_of_the_mask():
    # k1 = rollout - old = -log 1.2 (kept: within log(1/1.5), log 1.5) and -log 2 (rejected)
    rollout = [[-1.0 - math.log(1.2), -1.0 - L2]]
    out = policy_objective(
        NEW, OLD, advantage_values=[1.0], rollout_log_probs=rollout, agg="token-mean", reject="k1", reject_threshold="1.5", details=True
    )
    assert out["objective"] == 1.0 and out["tokens"] == 1
    assert out["rollout"]["rejected"] == {"tokens": 1, "rows": 1, "token_share": 0.5}
    assert list(out["rows"]["rejected_tokens"]) == [1] and list(out["rows"]["n_tokens"]) == [1]
    # asymmetric k1 bounds are on rollout / old (verl's sign): [0.4, 0.9] keeps 1/1.2 = 0.833, rejects 1/2 = 0.5
    kept = policy_objective(
        NEW, OLD, advantage_values=[1.0], rollout_log_probs=rollout, agg="token-sum", reject="k1", reject_threshold="0.6,0.9", details=True
    )
    assert kept["tokens"] == 1


def test_sequence_rejection_takes_the_whole_row_out():
    # verl's seq_mean_k3: k3 = exp(-d) + d - 1 with d = rollout - old = -log 2, +log 2: (1 - log 2) and (log 2 - 0.5)
    k3 = [(2 - L2 - 1), (0.5 + L2 - 1)]
    mean = sum(k3) / 2
    for threshold, tokens in ((mean * 1.01, 2), (mean * 0.99, 0)):
        out = policy_objective(
            NEW, OLD, advantage_values=[1.0], rollout_log_probs=ROLLOUT, reject="seq_mean_k3", reject_threshold=str(threshold), details=True
        )
        assert out["tokens"] == tokens and out["config"]["reject_level"] == "sequence-mean"
    out = policy_objective(
        NEW,
        OLD,
        advantage_values=[1.0],
        rollout_log_probs=ROLLOUT,
        reject="k2",
        reject_level="sequence-sum",
        reject_threshold=str(L2 * L2 * 0.99),
        details=True,
    )  # k2 sum = 2 * (log 2)^2 / 2
    assert out["tokens"] == 0 and out["rollout"]["rejected"]["rows"] == 1


def test_mismatch_figures():
    out = objective()
    r = out["rollout"]
    assert r["tokens"] == 2 and r["abs_diff_mean"] == pytest.approx(L2) and r["abs_diff_max"] == pytest.approx(L2)
    assert r["kl_k1"] == pytest.approx(0.0, abs=1e-15)
    assert r["kl_k3"] == pytest.approx(((2 - L2 - 1) + (0.5 + L2 - 1)) / 2, rel=1e-14)
    assert r["is"] is None and r["rejected"] is None and out["objective"] == 2.0  # no correction asked: no weighting


@pytest.mark.parametrize("loss", ["ppo", "gspo", "sapo", "cispo", "gpg"])
@given(rows=logprob_rollout, level=st.sampled_from(["token", "sequence"]))
def test_rollout_equal_to_old_changes_nothing(loss, rows, level):
    new, old, adv = unpack(rows)
    plain = policy_objective(new, old, advantage_values=adv, loss=loss)
    weighted = policy_objective(
        new, old, advantage_values=adv, loss=loss, rollout_log_probs=old, is_level=level, is_cap=2.0, reject="k3", reject_threshold="1e-9"
    )
    assert weighted == pytest.approx(plain, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize(
    "options, words",
    [
        ({"is_cap": 2.0}, "pass `is_level`"),
        ({"is_level": "token_truncate"}, "takes `is_cap`"),
        ({"is_level": "token_truncate", "is_cap": 2.0, "is_mask": (0.5, 2.0)}, "takes `is_cap`"),
        ({"is_level": "tok"}, "unknown `is_level`"),
        ({"is_level": "token", "loss": "gmpo"}, "geometric mean"),
        ({"reject": "k1"}, "needs `reject_threshold`"),
        ({"reject": "k2", "reject_threshold": "0.5,2"}, "one upper bound"),
        ({"reject": "k1", "reject_threshold": "0.5"}, "must be > 1"),
        ({"reject": "seq_sum_k1", "reject_level": "token", "reject_threshold": "2"}, "drop `reject_level`"),
        ({"reject_level": "token"}, "applies to `reject`"),
        ({"is_level": "token", "is_mask": (2.0, 1.0)}, "0 <= LO < HI"),
    ],
)
def test_rollout_option_errors(options, words):
    with pytest.raises(UsageError, match=words.replace("(", r"\(")):
        ObjectiveConfig(**options)


def test_cli_rollout_columns_and_errors(sample_parquet, tmp_path):
    table = pq.read_table(sample_parquet)
    old = table["old_logprobs"].combine_chunks()
    rollout = old.flatten().to_numpy().astype(np.float64) - 0.01
    path = tmp_path / "r.parquet"
    pq.write_table(table.append_column("rollout_logprobs", pa.ListArray.from_arrays(old.offsets, pa.array(rollout))), path)
    out, summary = tmp_path / "o.parquet", tmp_path / "s.json"
    run_grpo(
        "objective",
        str(path),
        "--is",
        "sequence_truncate",
        "--is-cap",
        "2",
        "--reject",
        "token_k1",
        "--reject-threshold",
        "1.5",
        "-o",
        str(out),
        "-q",
        "--summary-json",
        str(summary),
    )
    written = pq.read_table(out)
    for name in ("rollout_abs_diff_mean", "rollout_kl_k1", "rollout_log_weight", "train_log_ppl", "is_weight_mean", "rejected_tokens"):
        assert name in written.schema.names
    figures = json.loads(summary.read_text())
    assert figures["columns"]["rollout_logprobs"] == "rollout_logprobs" and figures["config"]["is_level"] == "sequence"
    n = np.array(written["n_tokens"].to_pylist())
    diff = np.array(written["rollout_abs_diff_mean"].to_pylist(), dtype=float)
    assert np.abs(diff[n > 0] - 0.01).max() < 1e-12
    proc = run_grpo("objective", str(sample_parquet), "--is", "token", "-q", check=False)
    assert proc.returncode == 1 and "rollout sampler's log-probs" in proc.stderr.decode() and "Traceback" not in proc.stderr.decode()


def test_floor_truncates_from_below():
    # w = 2 and 0.5: the floor 0.6 lifts 0.5 to 0.6 (TRL's clip_min; OpenRLHF's TIS clamps to [lo, hi])
    floored = objective(is_level="token", is_floor=0.6)
    assert floored["objective"] == pytest.approx(2.6, rel=1e-14) and floored["rollout"]["is"]["truncated_tokens"] == 1
    assert objective(is_level="token_truncate", is_floor=0.6)["objective"] == floored["objective"]  # TRL: truncate with clip_min only
    clamped = objective(is_level="token", is_cap=1.5, is_floor=0.6)  # both sides: 1.5 + 0.6
    assert clamped["objective"] == pytest.approx(2.1, rel=1e-14) and clamped["rollout"]["is"]["truncated_tokens"] == 2


def test_normalize_divides_by_the_mean_weight():
    # token: mu = (2 + 0.5) / (2 + 1e-8) (verl's masked mean), so sum_t w_t / mu = 2 + 1e-8
    assert objective(is_level="token", is_normalize=True)["objective"] == pytest.approx(2 + 1e-8, rel=1e-14)
    # sequence: row A (the two tokens above) w_A = exp(log 2 - log 2) = 1, row B one token w_B = exp(log 3) = 3;
    # mu = mean over rows of sum_t w / (n_i + 1e-8) = (2 / (2 + 1e-8) + 3 / (1 + 1e-8)) / 2, the token-sum 2 * 1 + 3 over mu
    rollout = [ROLLOUT[0], [-1.0 - math.log(3.0)]]
    out = policy_objective(
        [*NEW, [-1.0]],
        [*OLD, [-1.0]],
        advantage_values=[1.0, 1.0],
        rollout_log_probs=rollout,
        agg="token-sum",
        is_level="sequence",
        is_normalize=True,
    )
    mu = (2 / (2 + 1e-8) + 3 / (1 + 1e-8)) / 2
    assert out == pytest.approx(5 / mu, rel=1e-14)


def test_sequence_max_rejects_on_the_rows_largest_estimate():
    # verl 0.9.1 seq_max_k3: the row's largest k3 over counted tokens; d = rollout - old = -log 2, +log 2 give
    # k3 = exp(-d) + d - 1 = 1 - log 2 and log 2 - 0.5, the largest 1 - log 2; k2 = d^2 / 2 = (log 2)^2 / 2 on both
    for name, largest in (("seq_max_k3", 1 - L2), ("seq_max_k2", L2 * L2 / 2)):
        for threshold, tokens in ((largest * 1.01, 2), (largest * 0.99, 0)):
            out = objective(reject=name, reject_threshold=str(threshold))
            assert out["tokens"] == tokens and out["config"]["reject_level"] == "sequence-max"


def test_several_criteria_reject_what_any_rejects():
    # token_k1 2.5 keeps both ratios rollout/old = 0.5, 2 (in [0.4, 2.5]); seq_max_k3 0.25 < 1 - log 2 rejects the row
    assert objective(reject="token_k1,seq_max_k3", reject_threshold="2.5,0.25")["tokens"] == 0
    assert objective(reject="token_k1,seq_max_k3", reject_threshold="2.5,0.35")["tokens"] == 2
    assert objective(reject="token_k1,seq_max_k3", reject_threshold="0.45_1.5,0.35")["tokens"] == 1  # 2 > 1.5: rejected
    # one threshold for all (verl broadcasts it): token k2 (log 2)^2 / 2 = 0.24 <= 0.25 kept, the row's max k3 0.307 not
    assert objective(reject="token_k2,seq_max_k3", reject_threshold="0.25")["tokens"] == 0
    assert objective(reject="k2,k3", reject_level="sequence-max", reject_threshold="0.25,0.35")["tokens"] == 2


def test_veto_rejects_a_row_with_a_token_below_it():
    # verl 0.7.0's rollout_token_veto_threshold: pi_old / pi_rollout = 2 and 0.5 per token
    assert objective(reject_veto=0.6)["tokens"] == 0 and objective(reject_veto=0.6)["rollout"]["rejected"]["rows"] == 1
    assert objective(reject_veto=0.4)["tokens"] == 2


def test_rejected_tokens_can_stay_counted():
    # token_k1 1.5 rejects the token of rollout / old = 1/2; leaving the mask, token-mean is 1 / 1; counted, (1 + 0) / 2
    rollout = [[-1.0 - math.log(1.2), -1.0 - L2]]
    options = dict(advantage_values=[1.0], rollout_log_probs=rollout, agg="token-mean", reject="token_k1", reject_threshold="1.5", details=True)
    assert policy_objective(NEW, OLD, **options)["objective"] == 1.0
    counted = policy_objective(NEW, OLD, reject_counted=True, **options)
    assert counted["objective"] == 0.5 and counted["tokens"] == 2 and counted["rollout"]["rejected"]["tokens"] == 1


def test_bypass_takes_the_rollout_as_the_old_policy():
    # new - rollout = log 2, -log 2: rho = 2, 0.5; the old log-probs given are not read
    old = [[-3.0, -0.5]]
    ppo_clip = policy_objective(NEW, old, advantage_values=[1.0], rollout_log_probs=ROLLOUT, agg="token-sum", bypass="ppo_clip", details=True)
    assert ppo_clip["objective"] == pytest.approx(1.2 + 0.5, rel=1e-14) and ppo_clip["config"]["loss"] == "ppo"  # min(rho, 1 + 0.2)
    # reinforce: A log pi w, w = exp(new - rollout) = 2, 0.5 (1 without is_level): -1 * 2 - 1 * 0.5
    reinforce = dict(advantage_values=[1.0], rollout_log_probs=ROLLOUT, agg="token-sum", bypass="reinforce")
    assert policy_objective(NEW, old, is_level="token", **reinforce) == pytest.approx(-2.5, rel=1e-14)
    assert policy_objective(NEW, old, **reinforce) == pytest.approx(-2.0, rel=1e-14)
    # rejection takes new - rollout too: k1 = rollout - new = -log 2, log 2, out of [1/1.5, 1.5]
    assert policy_objective(NEW, old, reject="k1", reject_threshold="1.5", **reinforce) == 0.0


# verl's own numbers (ref-verl-losses-0.9.1.json / -0.7.0.json in the issue 41 research, verl's
# rollout_corr_helper.py and core_algos.py run in float64): 6 rows x 4 slots, row 5 fully masked
VERL_ADVANTAGES, VERL_MASK, VERL_NEW, VERL_OLD = verl_case.ADV, verl_case.MASK, verl_case.NEW, verl_case.OLD
VERL_ROLLOUT = verl_case.ROLLOUT


def verl_loss(**options):
    """verl's loss (-objective) on its case, token-mean, vanilla's dual clip 3 for PPO."""
    if options.get("bypass") != "reinforce":
        options["dual_clip"] = 3.0
    return -policy_objective(
        VERL_NEW, VERL_OLD, advantage_values=VERL_ADVANTAGES, rollout_log_probs=VERL_ROLLOUT, mask=VERL_MASK, agg="token-mean", **options
    )


@pytest.mark.parametrize(
    "options, kept",
    [  # verl 0.9.1 rollout_rs, rollout_rs_threshold
        ({"reject": "token_k1", "reject_threshold": "1.5"}, [3, 3, 1, 4, 0, 1]),
        ({"reject": "token_k1", "reject_threshold": "0.7_1.2"}, [3, 3, 1, 3, 0, 0]),
        ({"reject": "seq_sum_k1", "reject_threshold": "0.5_1.05"}, [0, 3, 2, 0, 0, 0]),
        ({"reject": "seq_mean_k1", "reject_threshold": "1.1"}, [0, 3, 0, 4, 0, 0]),
        ({"reject": "seq_sum_k2", "reject_threshold": "0.3"}, [0, 3, 2, 4, 0, 1]),
        ({"reject": "seq_max_k2", "reject_threshold": "0.1"}, [0, 3, 0, 4, 0, 1]),
        ({"reject": "seq_max_k3", "reject_threshold": "0.1"}, [0, 3, 0, 4, 0, 1]),
        ({"reject": "token_k1,seq_max_k3", "reject_threshold": "1.5,0.1"}, [0, 3, 0, 4, 0, 1]),
        # verl 0.7.0 rollout_rs on q = pi_old / pi_rollout, bounds inverted: geometric U 1.3, lower 0.95
        ({"reject": "k1", "reject_level": "sequence-mean", "reject_threshold": f"{1 / 1.3},{1 / 0.95}"}, [0, 3, 0, 0, 0, 0]),
        ({"reject_veto": 0.6}, [0, 3, 2, 4, 0, 1]),  # rollout_token_veto_threshold
    ],
)
def test_rejection_keeps_the_tokens_verl_keeps(options, kept):
    rows = policy_objective(
        VERL_NEW, VERL_OLD, advantage_values=VERL_ADVANTAGES, rollout_log_probs=VERL_ROLLOUT, mask=VERL_MASK, details=True, **options
    )["rows"]
    assert list(rows["n_tokens"]) == kept


@pytest.mark.parametrize(
    "options, factor",
    [  # rollout_is, rollout_is_threshold, rollout_is_batch_normalize: verl's rollout_is_batch_norm_factor
        ({"is_level": "token", "is_cap": 1.2}, 0.9410470228859441),
        ({"is_level": "sequence", "is_cap": 1.5}, 0.9029076923556806),
        ({"is_level": "token", "is_mask": (0.8, 1.5)}, 0.7733764601184004),
    ],
)
def test_normalize_factor_is_verls(options, factor):
    plain = verl_loss(**options)
    assert verl_loss(is_normalize=True, **options) == pytest.approx(plain / factor, rel=1e-12)  # no KL: the loss is linear in w


@pytest.mark.parametrize(
    "options, local, engine",
    [  # verl 0.9.1 bypass_mode (loss_type, rollout_is, rollout_rs); engine: denominators counted before rejection
        ({"bypass": "ppo_clip"}, 0.31969550652423095, None),
        ({"bypass": "reinforce"}, 0.08, None),
        ({"bypass": "reinforce", "is_level": "token", "is_cap": 2.0}, -0.12141665348491244, None),
        ({"bypass": "reinforce", "is_level": "sequence", "is_cap": 2.0}, -0.5327008563606449, None),
        ({"bypass": "ppo_clip", "reject": "seq_mean_k3", "reject_threshold": "0.1"}, -0.8208561869505122, -0.23453033912871776),
        (
            {"bypass": "reinforce", "is_level": "token", "is_cap": 2.0, "reject": "token_k1", "reject_threshold": "1.5"},
            -0.5095467085352258,
            -0.2547733542676129,
        ),
        (
            {"bypass": "reinforce", "is_level": "sequence", "is_cap": 2.0, "reject": "seq_max_k2", "reject_threshold": "0.2"},
            0.605797300899511,
            0.0432712357785365,
        ),
        # verl 0.7.0 ppo_clip + geometric 1.3 (its legacy worker: local counts)
        ({"bypass": "ppo_clip", "reject": "k1", "reject_level": "sequence-mean", "reject_threshold": "1.3"}, -0.7865068643630342, None),
    ],
)
def test_bypass_matches_verl(options, local, engine):
    assert verl_loss(**options) == pytest.approx(local, rel=1e-12)
    if engine is not None:
        assert verl_loss(reject_counted=True, **options) == pytest.approx(engine, rel=1e-12)


@pytest.mark.parametrize(
    "options, loss",
    [  # verl decoupled mode: weights and rejection from old - rollout, rejected tokens out of the mask
        ({"is_level": "token", "is_cap": 2.0}, 0.26868757797323733),
        ({"is_level": "sequence", "is_cap": 2.0}, 0.2910356847791415),
        ({"is_level": "token", "is_cap": 1.2, "reject": "seq_mean_k3", "reject_threshold": "0.05"}, 1.151422079447409),
        ({"is_level": "token", "is_cap": 1.2, "reject": "k1", "reject_level": "sequence-mean", "reject_threshold": "1.1"}, 1.3653637888296521),
    ],
)
def test_decoupled_matches_verl(options, loss):
    assert verl_loss(**options) == pytest.approx(loss, rel=1e-12)


@pytest.mark.parametrize(
    "options, words",
    [
        ({"is_floor": 0.5}, "pass `is_level`"),
        ({"is_normalize": True}, "pass `is_level`"),
        ({"is_level": "token", "is_cap": 2.0, "is_floor": 3.0}, "`is_floor` must be in"),
        ({"is_level": "token", "is_floor": 0.5, "is_mask": (0.5, 2.0)}, "pass one of them"),
        ({"is_level": "token_mask", "is_mask": (0.5, 2.0), "is_floor": 0.5}, "takes `is_mask`"),
        ({"reject_counted": True}, "pass `reject` or `reject_veto`"),
        ({"reject_veto": 0.0}, "`reject_veto` must be > 0"),
        ({"reject": "token_k1,seq_max_k3", "reject_threshold": "1.5,0.1,2"}, "one bound per `reject` criterion"),
        ({"reject": "k2,k2", "reject_threshold": "0.1"}, "names a criterion twice"),
        ({"reject": "k1", "reject_level": "sequence-max", "reject_threshold": "2"}, "takes k2 or k3"),
        ({"reject": "token_k1,k4", "reject_threshold": "2"}, "unknown `reject` 'k4'"),
        ({"bypass": "ppo_clip", "loss": "cispo"}, "drop `loss` 'cispo'"),
        ({"bypass": "ppo_clip", "is_level": "token"}, "drop `is_level`"),
        ({"bypass": "ppo"}, "unknown `bypass`"),
    ],
)
def test_new_rollout_option_errors(options, words):
    with pytest.raises(UsageError, match=words.replace("(", r"\(")):
        ObjectiveConfig(**options)


def test_bypass_and_veto_need_the_rollout_log_probs():
    for options in ({"bypass": "reinforce"}, {"reject_veto": 0.5}):
        with pytest.raises(UsageError, match="needs `rollout_log_probs`"):
            policy_objective(NEW, OLD, advantage_values=[1.0], **options)


@given(rows=logprob_rollout)
def test_bypass_with_the_rollout_as_old_is_the_plain_loss(rows):
    new, old, adv = unpack(rows)
    # ppo_clip with rollout = old is PPO on new - old; reinforce with rollout = new has weights exp(0) = 1: gpg
    plain = policy_objective(new, old, advantage_values=adv)
    assert policy_objective(new, new, advantage_values=adv, rollout_log_probs=old, bypass="ppo_clip") == pytest.approx(plain, rel=1e-12, abs=1e-12)
    gpg = policy_objective(new, old, advantage_values=adv, loss="gpg")
    reinforce = policy_objective(new, old, advantage_values=adv, rollout_log_probs=new, bypass="reinforce", is_level="sequence")
    assert reinforce == pytest.approx(gpg, rel=1e-12, abs=1e-12)


# OpenRLHF 0.11.2's own numbers (ref-openrlhf-0.11.2.json in the issue 41 research: its loss.py run in float64)
ORL_MASK, ORL_NEW, ORL_OLD, ORL_ROLLOUT = (
    openrlhf_twinkle_case.MASK,
    openrlhf_twinkle_case.NEW,
    openrlhf_twinkle_case.OLD,
    openrlhf_twinkle_case.ROLLOUT,
)


@pytest.mark.parametrize(
    "options, loss",
    [  # level token, mode clip: w clamped to [lo, hi] (TIS, both sides); level seq, mode mask: a row whose
        # exp(mean_t (old - rollout)) is out of [lo, hi] weighs 0 and stays counted (k1 = rollout - old: bounds 1/hi, 1/lo)
        ({"is_level": "token", "is_cap": 5.0, "is_floor": 0.5}, 0.34279302479369167),
        ({"is_level": "token", "is_cap": 1.2, "is_floor": 0.8}, 0.2874411019144747),
        (
            {"is_level": "token", "reject": "k1", "reject_level": "sequence-mean", "reject_threshold": f"{1 / 5},{1 / 0.9}", "reject_counted": True},
            0.15517505837105455,
        ),
        # 0.11.2's gatings binary_kl and tv [0, 0.05], mode mask, per token and per row (the mean over its tokens)
        *(
            ({"is_level": "token", "reject": gate, "reject_level": level, "reject_threshold": "0.05", "reject_counted": True}, loss)
            for gate, level, loss in (
                ("binary_kl", "token", 0.30017208934279266),
                ("tv", "token", 0.27482016646357565),
                ("binary_kl", "sequence-mean", 0.15517505837105455),
                ("tv", "sequence-mean", 0.08140484849043554),
            )
        ),
    ],
)
def test_openrlhf_truncation_and_sequence_mask(options, loss):
    adv = [1.2, -0.8, 0.3, -1.1, 0.5, -0.4]
    out = policy_objective(ORL_NEW, ORL_OLD, advantage_values=adv, rollout_log_probs=ORL_ROLLOUT, mask=ORL_MASK, agg="token-mean", **options)
    assert -out == pytest.approx(loss, rel=1e-12)


def test_bypass_ppo_clip_drops_a_presets_weights(monkeypatch):
    import grpo_cli.config

    weighted = {"is_level": "sequence", "is_cap": 3.0}  # a preset that weights by default (TRL's vLLM correction)
    monkeypatch.setattr(
        grpo_cli.config, "preset_values", lambda name, part, chosen: (weighted, weighted) if part == "objective" and name else ({}, {})
    )
    config = ObjectiveConfig(preset="trl", bypass="ppo_clip")
    assert config.is_level is None and config.is_cap is None and config.loss == "ppo"
    with pytest.raises(UsageError, match="drop `is_cap`"):
        ObjectiveConfig(preset="trl", bypass="ppo_clip", is_cap=2.0)


@pytest.mark.parametrize(
    "gate, level, threshold, objective",
    [
        ("tv", "token", "0.05", 0.5),
        ("binary_kl", "token", "0.02", 0.5),
        ("binary_kl", "token", "0.03", 1.1),
        ("tv", "sequence-mean", "0.05", 1.1),
        ("tv", "sequence-mean", "0.04", 0.0),
    ],
)
def test_openrlhf_gating_divergences(gate, level, threshold, objective):
    """OpenRLHF 0.11.2 is_correction_gating (models/loss.py:214-247): p = pi_rollout, q = pi_old of
    the sampled token, clamped to [1e-6, 1 - 1e-6]; tv = |p - q|, binary_kl = p log(p/q) +
    (1-p) log((1-p)/(1-q)); mode mask keeps w = exp(old - rollout) where the statistic (per token,
    or the row's mean) is in [0, delta], else 0, the token still counted. One row, new = old (rho 1),
    A = 1, so each token's term is its coefficient: p = (0.5, 0.2), q = (0.6, 0.2), w = (1.2, 1).
    tv = (0.1, 0): token 0 out at 0.05 -> (0 + 1) / 2 = 0.5; the row's mean 0.05 is in at 0.05
    -> (1.2 + 1) / 2 = 1.1, out at 0.04 -> 0. binary_kl token 0 = 0.5 log(5/6) + 0.5 log(5/4) =
    0.020411: out at 0.02 -> 0.5, in at 0.03 -> 1.1."""
    assert 0.5 * math.log(5 / 6) + 0.5 * math.log(5 / 4) == pytest.approx(0.020411, abs=1e-6)
    old, rollout = [[math.log(0.6), math.log(0.2)]], [[math.log(0.5), math.log(0.2)]]
    options = {"is_level": "token", "reject": gate, "reject_level": level, "reject_threshold": threshold, "reject_counted": True}
    got = policy_objective(old, old, advantage_values=[1.0], rollout_log_probs=rollout, agg="token-mean", **options)
    assert got == pytest.approx(objective, rel=1e-14, abs=1e-15)


def test_trl_off_policy_sequence_mask():
    """TRL 1.16 get_off_policy_mask (grpo_trainer.py:2945-2970, applied at :3140): per row
    k_i = sum_t m (sampled - new) / max(n_i, 1), sampled = the vLLM log-probs (else the old);
    the row's loss terms are kept iff A_i >= 0 or k_i <= delta; its tokens stay counted.
    new = old (rho 1, each PPO term is A), delta 0.1, token mean over 4 tokens:
    row 0 (A -1, 2 tokens): k = 0.2 > 0.1, dropped -> 0, 0; row 1 (A -1): k = 0.05, kept -> -1;
    row 2 (A 0.5): k = 0.5 but A >= 0, kept -> 0.5. Objective (0 + 0 - 1 + 0.5) / 4 = -0.125
    (-0.625 without the mask)."""
    new, rollout, adv = [[-1.0, -1.0], [-1.0], [-1.0]], [[-0.8, -0.8], [-0.95], [-0.5]], [-1.0, -1.0, 0.5]
    got = policy_objective(new, new, advantage_values=adv, rollout_log_probs=rollout, agg="token-mean", off_policy_mask=0.1, details=True)
    assert got["objective"] == pytest.approx(-0.125, rel=1e-14) and got["tokens"] == 4
    assert got["config"]["off_policy_mask"] == 0.1
    assert policy_objective(new, new, advantage_values=adv, rollout_log_probs=rollout, agg="token-mean") == pytest.approx(-0.625, rel=1e-14)
    with pytest.raises(UsageError, match="`off_policy_mask` must be >= 0"):
        ObjectiveConfig(off_policy_mask=-1.0)


def test_trl_off_policy_sequence_mask_numbers():
    # ref-trl-1.16.0.json, dapo with off_policy_mask_threshold 0.1: the old log-probs as the sampled
    # ones (no vLLM) 0.31099827945596614 (its loss); with vLLM's, and its sequence_mask [0, 3] weights,
    # 0.419984134851375
    from .trl_case import ADV, MASK, NEW, OLD, SAMPLED

    assert -policy_objective(NEW, OLD, advantage_values=ADV, mask=MASK, preset="trl", off_policy_mask=0.1) == pytest.approx(
        -0.31099827945596614, rel=1e-12
    )
    got = policy_objective(
        NEW,
        OLD,
        advantage_values=ADV,
        mask=MASK,
        rollout_log_probs=SAMPLED,
        preset="trl",
        off_policy_mask=0.1,
        is_level="sequence_mask",
        is_mask=(0, 3),
    )
    assert -got == pytest.approx(-0.419984134851375, rel=1e-12)
