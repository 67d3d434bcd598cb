"""Rows of tokens: masked tokens count nowhere."""

from grpo_cli import policy_objective


def test_masked_tokens_count_nowhere():
    # the masked middle token has rho = e^3 (would clip) and must not count in sums or counts
    new = [[-1.0, -1.0, -1.0]]
    old = [[-1.0, -4.0, -1.0]]
    out = policy_objective(new, old, advantage_values=[2.0], mask=[[1, 0, 1]], agg="token-mean", details=True)
    assert out["objective"] == 2.0 and out["tokens"] == 2
    assert out["clip_frac"]["high"] == 0.0 and out["ratio"]["max"] == 1.0
    assert policy_objective(new, old, advantage_values=[2.0], mask=[[True, False, True]]) == 4.0
