"""``empty_rows`` 'refuse': twinkle-kit 0.1 fails on a row without tokens when the advantages are
per row, and counts it as 0 when they are per token (``twinkle@0.1`` sets it).

Reference: ``ref-twinkle-0.1.json`` (issue 41 research, Twinkle 0.1's own losses in float64 on
the case of :mod:`.openrlhf_twinkle_case`, row 4 without tokens): every loss with row
advantages ``[B]`` raises ``RuntimeError: repeats must have the same size as input along dim``
(loss/grpo.py:146-149 repeats B advantages over the token counts of the B - 1 rows that have
tokens); with ``[B, T]`` advantages GRPOLoss gives 0.13750837470386748.
"""

import numpy as np
import pytest

from grpo_cli import ObjectiveConfig, policy_objective
from grpo_cli.errors import InputError, UsageError

from ..conftest import run_grpo, write_jsonl_rows
from .openrlhf_twinkle_case import ADV, MASK, NEW, OLD


def test_a_row_without_tokens_and_a_row_advantage_is_refused_under_twinkle_0_1():
    with pytest.raises(InputError, match=r"row 4: it has no counted tokens and a per-row advantage, where Twinkle 0.1 raises"):
        policy_objective(NEW, OLD, advantage_values=ADV, mask=MASK, preset="twinkle@0.1")
    with pytest.raises(InputError, match="Twinkle 0.1 raises"):  # whatever the aggregation (bnpo: a token mean)
        policy_objective(NEW, OLD, advantage_values=ADV, mask=MASK, preset="twinkle@0.1", agg="bnpo")
    # Twinkle 0.5.1 counts it as 0 (seq-mean-token-mean over B = 6 rows)
    assert np.isfinite(policy_objective(NEW, OLD, advantage_values=ADV, mask=MASK, preset="twinkle"))


def test_per_token_advantages_count_the_row_as_0():
    # GRPOLoss: L_t = -min(rho A, clip(rho, 0.8, 1.2) A), rho = exp(clamp(new - old, +-20)),
    # each row's token mean (max(n_i, 1)), then the mean over all B = 6 rows (row 4 adds 0)
    m, new, old = np.array(MASK, float), np.array(NEW), np.array(OLD)
    a = np.array(ADV)[:, None] * m
    rho = np.exp(new - old)
    loss_t = -np.minimum(rho * a, np.clip(rho, 0.8, 1.2) * a)
    want = np.mean((loss_t * m).sum(1) / np.maximum(m.sum(1), 1))
    assert want == pytest.approx(0.13750837470386748, rel=1e-12)  # ref-twinkle-0.1.json
    got = policy_objective(NEW, OLD, advantage_values=a.tolist(), mask=MASK, preset="twinkle@0.1")
    assert -got == pytest.approx(want, rel=1e-12)


def test_rows_with_tokens_are_as_twinkle_0_5():
    rows = [0, 1, 2, 3, 5]
    pick = lambda x: [x[i] for i in rows]  # noqa: E731
    args = (pick(NEW), pick(OLD))
    kw = {"advantage_values": pick(ADV), "mask": pick(MASK)}
    assert policy_objective(*args, **kw, preset="twinkle@0.1") == policy_objective(*args, **kw, preset="twinkle")


def test_the_cli_names_the_file_row_and_prompt_id(tmp_path):
    rows = [{"prompt_id": "p", "advantage": a, "logprobs": n, "old_logprobs": o, "mask": m} for a, n, o, m in zip(ADV, NEW, OLD, MASK)]
    src = write_jsonl_rows(tmp_path / "r.jsonl", rows)
    ran = run_grpo("objective", str(src), "--preset", "twinkle@0.1", "-q", check=False)
    assert ran.returncode == 1
    last = ran.stderr.decode().strip().splitlines()[-1]
    assert last.endswith(
        f"{src}: row 4 (prompt id 'p'): it has no counted tokens and a per-row advantage, where Twinkle 0.1 raises "
        "(--empty-rows 'refuse'); pass per-token advantages, or --empty-rows 'count'"
    )


def test_refuse_is_taken_with_any_aggregation():
    assert ObjectiveConfig(empty_rows="refuse", agg="token-mean").figures["empty_rows"] == "refuse"
    with pytest.raises(UsageError, match="`empty_rows` applies only to the means over rows"):
        ObjectiveConfig(empty_rows="skip", agg="token-mean")
