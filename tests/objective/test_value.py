"""PPO's clipped value loss (``ppo_value``, twinkle-kit 0.5.1 loss/value.py:56-61).

Reference numbers: Twinkle 0.5.1's own ``PPOValueLoss`` (torch, float64) on the case below
(the issue 41 research case's mask and critic values as ``V_old``; ``V = V_old + SHIFT``;
the returns ``R`` given), run with ``venv-trl`` from ``src/twinkle-0.5.1``: epsilon 0.2 gives
0.112915625, epsilon 0.1 0.117778125.
"""

import json

import numpy as np
import pytest

from grpo_cli import ObjectiveConfig, objective_file, policy_objective
from grpo_cli.errors import UsageError

from ..conftest import run_grpo, write_jsonl_rows
from .openrlhf_twinkle_case import MASK


# the slow reference (tests/objective/references.py): a row's sum of -L_t from the critic's lists
def reference(values, old_values, returns, config) -> float:
    c = config.value_clip
    return -sum(0.5 * max((v - r) ** 2, (o + min(max(v - o, -c), c) - r) ** 2) for v, o, r in zip(values, old_values, returns))


REFERENCES = {"ppo_value": reference}

OLD_VALUES = [[0.1, 0.2, 0.3, 0.0], [0.05, -0.1, 0.4, 0.2], [0.3, 0.25, 0.0, 0.0], [0.0, 0.1, 0.15, 0.2], [0.5] * 4, [0.2, 0.9, 0.1, 0.3]]
SHIFT = [[0.3, -0.1, 0.05, 0.0], [-0.25, 0.15, 0.5, -0.05], [0.1, -0.4, 0.0, 0.0], [0.0, 0.22, -0.18, 0.35], [0.3] * 4, [-0.3, 0.0, 0.12, -0.21]]
VALUES = (np.array(OLD_VALUES) + np.array(SHIFT)).tolist()
RETURNS = [[1.0, 0.9, 0.8, 0.0], [0.1, 0.0, -0.2, 0.05], [0.5, 0.45, 0.0, 0.0], [0.2, 0.1, 0.3, 0.25], [0.0] * 4, [0.4, 0.0, 0.35, 0.3]]
LOGPROBS = [[-0.5] * 4] * 6  # read, and not by the value loss
VALUE_LOSS = ObjectiveConfig(loss="ppo_value")


def value_loss(**options) -> float:
    return -policy_objective(LOGPROBS, LOGPROBS, mask=MASK, values=VALUES, old_values=OLD_VALUES, returns=RETURNS, loss="ppo_value", **options)


def test_by_hand():
    # c = 0.2. Token 1: V = 1, V_old = 0.7, R = 0: (V - R)^2 = 1; V_old + clip(0.3) = 0.9, 0.81;
    # the max, 1, halved: 0.5. Token 2: V = V_old = 0.5, R = 1: 0.25 both: 0.125.
    # Token 3: V = 0.5, V_old = 0, R = 0.2: 0.09; V_old + 0.2 = 0.2, 0: 0.045.
    # A token mean: (0.5 + 0.125 + 0.045) / 3
    got = policy_objective(
        [[-0.5, -1.0], [-0.2]],
        [[-0.5, -1.0], [-0.2]],
        values=[[1.0, 0.5], [0.5]],
        old_values=[[0.7, 0.5], [0.0]],
        returns=[[0.0, 1.0], [0.2]],
        loss="ppo_value",
    )
    assert -got == pytest.approx((0.5 + 0.125 + 0.045) / 3, rel=1e-14)


def test_twinkle_numbers():
    # 1/2 max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2) on the counted tokens,
    # summed, / max(counted tokens, 1): 18 tokens (row 4 has none)
    m = np.array(MASK, bool)
    v, o, r = np.array(VALUES), np.array(OLD_VALUES), np.array(RETURNS)
    for eps, twinkle in ((0.2, 0.11291562500000002), (0.1, 0.11777812500000003)):
        per_token = 0.5 * np.maximum((v - r) ** 2, (o + np.clip(v - o, -eps, eps) - r) ** 2)
        assert per_token[m].sum() / m.sum() == pytest.approx(twinkle, rel=1e-14)
        assert value_loss(value_clip=eps) == pytest.approx(twinkle, rel=1e-14)
    assert value_loss() == pytest.approx(0.11291562500000002, rel=1e-14)  # value_clip 0.2, Twinkle's default


def test_rows_match_the_slow_reference():
    out = policy_objective(LOGPROBS, LOGPROBS, mask=MASK, values=VALUES, old_values=OLD_VALUES, returns=RETURNS, loss="ppo_value", details=True)
    config = ObjectiveConfig(loss="ppo_value")
    want = [reference(*([x for x, keep in zip(row, MASK[i]) if keep] for row in (VALUES[i], OLD_VALUES[i], RETURNS[i])), config) for i in range(6)]
    np.testing.assert_allclose(out["rows"]["objective_sum"], want, rtol=1e-14, atol=1e-15)
    assert "advantage" not in out["rows"]


def test_the_columns_are_read_only_by_the_value_loss(tmp_path):
    rows = [
        {"logprobs": lp, "values": v, "old_values": o, "returns": r, "mask": m, "reward": 1.0}
        for lp, v, o, r, m in zip(LOGPROBS, VALUES, OLD_VALUES, RETURNS, MASK)
    ]
    src = write_jsonl_rows(tmp_path / "v.jsonl", rows)
    summary = objective_file(str(src), config=VALUE_LOSS, logprobs_col="logprobs", old_logprobs_col="logprobs")
    assert -summary["objective"] == pytest.approx(0.11291562500000002, rel=1e-14)
    assert summary["config"]["advantages"] == {"column": None, "per_token": False}
    assert (summary["columns"]["values"], summary["columns"]["old_values"], summary["columns"]["returns"]) == ("values", "old_values", "returns")
    with pytest.raises(UsageError, match="`values_col` is read only by a value loss \\('ppo_value'\\), and `loss` is 'ppo'; drop `values_col`"):
        objective_file(str(src), values_col="values", logprobs_col="logprobs", old_logprobs_col="logprobs")
    with pytest.raises(UsageError, match="loss 'ppo_value' reads no advantages; drop `reward_col`"):
        objective_file(str(src), config=VALUE_LOSS, reward_col="reward", logprobs_col="logprobs", old_logprobs_col="logprobs")
    with pytest.raises(UsageError, match="loss 'ppo_value' takes no `epsilon`"):
        ObjectiveConfig(loss="ppo_value", epsilon=0.1)
    with pytest.raises(UsageError, match="loss 'ppo' takes no `value_clip`"):
        ObjectiveConfig(value_clip=0.1)


def test_returns_from_gae_then_the_value_loss(tmp_path):
    # `grpo advantages --estimator gae` writes token_return = A + V_old before the whitening
    # (Twinkle's GAEAdvantage returns); the value loss finds it by name
    rows = [{"prompt_id": "p", "reward": 1.0, "old_values": [0.1, 0.2], "values": [0.3, 0.1], "logprobs": [-0.5, -0.4]}]
    src, out = write_jsonl_rows(tmp_path / "r.jsonl", rows), tmp_path / "o.jsonl"
    run_grpo("advantages", str(src), "--preset", "twinkle", "--estimator", "gae", "--values-col", "old_values", "-q", "-o", str(out))
    # gamma 1, lambda 0.95, r = 1 on the last token: delta_1 = 1 - 0.2 = 0.8 = A_1, R_1 = 0.8 + 0.2;
    # delta_0 = 0.2 - 0.1, A_0 = 0.1 + 0.95 * 0.8 = 0.86, R_0 = 0.86 + 0.1
    r = [0.86 + 0.1, 1.0]
    assert json.loads(out.read_text())["token_return"] == pytest.approx(r, rel=1e-14)
    summary = run_grpo(
        "objective", str(out), "--loss", "ppo_value", "--logprobs-col", "logprobs", "--old-logprobs-col", "logprobs", "-q", "--summary-json", "-"
    )
    # token 0: V - V_old = 0.2, inside the clip: (0.3 - R_0)^2; token 1: -0.1, inside: (0.1 - 1)^2
    want = 0.5 * ((0.3 - r[0]) ** 2 + (0.1 - 1.0) ** 2) / 2
    assert -json.loads(summary.stdout)["objective"] == pytest.approx(want, rel=1e-14)


def test_a_file_without_log_probs_and_what_the_value_loss_refuses(tmp_path):
    rows = [{"values": v, "old_values": o, "returns": r, "mask": m} for v, o, r, m in zip(VALUES, OLD_VALUES, RETURNS, MASK)]
    src = write_jsonl_rows(tmp_path / "v.jsonl", rows)
    summary = objective_file(str(src), config=VALUE_LOSS)
    assert -summary["objective"] == pytest.approx(0.11291562500000002, rel=1e-14)  # Twinkle's, as with log-probs
    assert summary["columns"]["logprobs"] is None and summary["ratio"]["mean"] == 1.0
    ran = run_grpo("objective", str(src), "--loss", "ppo_value", "-q", "-o", str(tmp_path / "o.parquet"), "--summary-json", "-")
    assert -json.loads(ran.stdout)["objective"] == pytest.approx(0.11291562500000002, rel=1e-14)
    with pytest.raises(UsageError, match="loss 'ppo_value' is the critic's, which takes no KL penalty; drop `beta`"):
        ObjectiveConfig(loss="ppo_value", beta=0.04)
    with pytest.raises(UsageError, match="loss 'ppo_value' is the critic's, which the rollout correction does not weight; drop `is_level`"):
        ObjectiveConfig(loss="ppo_value", is_level="token")


def test_the_summary_shows_no_advantage_count_for_the_value_loss(tmp_path):
    rows = [{"prompt_id": "p", "reward": 1.0, "old_values": [0.1, 0.2], "values": [0.3, 0.1], "returns": [1.0, 1.0]}]
    src = write_jsonl_rows(tmp_path / "r.jsonl", rows)
    shown = run_grpo("objective", str(src), "--loss", "ppo_value").stderr.decode()
    assert "(ppo_value)" in shown and "zero-advantage rows" not in shown
