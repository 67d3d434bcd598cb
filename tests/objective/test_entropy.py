"""TRL's high-entropy token mask (top_entropy_quantile): the quantile over the input's counted
tokens, the masked tokens still counted, the KL penalty not masked, and the entropy column."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_cli import ObjectiveConfig, policy_objective
from grpo_cli.errors import UsageError
from grpo_cli.objective.entropy import entropy_threshold, scanned

from ..conftest import run_grpo
from .trl_case import ADV, ENTROPY, MASK, NEW, OLD, REF, trl_loss

# two rows, new = old (rho = 1, so the PPO term of a token is A); row 1's last token masked
ROWS_NEW = [[-1.0, -1.0, -1.0], [-1.0, -1.0, -1.0]]
ROWS_MASK = [[1, 1, 1], [1, 1, 0]]
ROWS_ENTROPY = [[0.4, 0.1, 0.3], [0.2, 0.5, 9.0]]  # 9.0 is masked: not in the quantile


def test_threshold_is_torch_quantiles_linear_interpolation():
    # counted entropies sorted: 0.1 0.2 0.3 0.4 0.5 (N = 5); rho = 0.3: q = 0.7, p = 0.7 * 4 = 2.8
    # tau = x_(2) + 0.8 (x_(3) - x_(2)) = 0.3 + 0.8 * 0.1 = 0.38
    assert entropy_threshold(scanned([np.array([0.4, 0.1, 0.3]), np.array([0.2, 0.5])]), 0.3) == pytest.approx(0.38, rel=1e-15)
    assert entropy_threshold(scanned([np.array([0.4, 0.1])]), 0.0) == 0.4  # q = 1: the largest
    assert entropy_threshold(scanned([np.array([0.4, 0.1])]), 1.0) == 0.1  # q = 0: the smallest, every token kept
    assert entropy_threshold(scanned([np.zeros(0)]), 0.5) == np.inf  # no counted token: none kept (TRL: all False)


def test_low_entropy_tokens_weigh_zero_and_stay_counted():
    # rho = 0.3: tau = 0.38 (above); kept: 0.4 (row 0) and 0.5 (row 1), each with term A
    # token-mean: (A0 * 1 + A1 * 1) / 5 counted tokens = (2 - 1) / 5 = 0.2
    got = policy_objective(
        ROWS_NEW,
        ROWS_NEW,
        advantage_values=[2.0, -1.0],
        mask=ROWS_MASK,
        entropies=ROWS_ENTROPY,
        agg="token-mean",
        top_entropy_quantile=0.3,
        details=True,
    )
    assert got["objective"] == pytest.approx(0.2, rel=1e-14)
    assert got["tokens"] == 5
    assert got["config"]["top_entropy_quantile"] == 0.3 and got["config"]["entropy_threshold"] == pytest.approx(0.38, rel=1e-15)
    # seq-mean-token-mean: (2/3 + (-1)/2) / 2 rows: the row means still divide by 3 and 2 tokens
    means = policy_objective(
        ROWS_NEW, ROWS_NEW, advantage_values=[2.0, -1.0], mask=ROWS_MASK, entropies=ROWS_ENTROPY, agg="grpo", top_entropy_quantile=0.3
    )
    assert means == pytest.approx((2 / 3 - 1 / 2) / 2, rel=1e-14)
    # rho = 1 is off: every token, (2 * 3 - 1 * 2) / 5
    off = policy_objective(ROWS_NEW, ROWS_NEW, advantage_values=[2.0, -1.0], mask=ROWS_MASK, agg="token-mean")
    assert off == pytest.approx(0.8, rel=1e-14)


def test_the_kl_penalty_is_not_masked():
    # new - ref = 0.5 on every token, k1 = 0.5; beta 0.1: the penalty is 0.1 * 0.5 on each of the 5 counted tokens
    ref = [[-1.5] * 3] * 2
    got = policy_objective(
        ROWS_NEW,
        ROWS_NEW,
        advantage_values=[2.0, -1.0],
        mask=ROWS_MASK,
        entropies=ROWS_ENTROPY,
        ref_log_probs=ref,
        agg="token-mean",
        top_entropy_quantile=0.3,
        beta=0.1,
        kl="k1",
    )
    assert got == pytest.approx(0.2 - 0.1 * 0.5, rel=1e-14)


def test_trl_reference_numbers():
    """ref-trl-1.16.0.json and ref-trl-1.9.0.json (TRL's own get_high_entropy_mask and
    _compute_loss, float64), top_entropy_quantile 0.5 on trl_case: the 14 counted entropies
    sorted are 0.05 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9 1.1 1.2 1.5 2.0, p = 0.5 * 13 = 6.5, so
    tau = (0.6 + 0.7) / 2 = 0.65 and 7 tokens keep their term (1.2 2.0 | 0.8 | 1.5 0.9 | 0.7 | 1.1);
    dapo divides their sum by the 14 counted tokens, grpo takes the row means over 4 2 3 1 0 4
    tokens and their mean over the 6 rows. Both releases give the same numbers."""
    assert trl_loss("ppo", top_entropy_quantile=0.5, entropies=ENTROPY) == pytest.approx(-0.04852808111092262, rel=1e-12)
    assert trl_loss("ppo", agg="grpo", top_entropy_quantile=0.5, entropies=ENTROPY) == pytest.approx(0.08874124134089367, rel=1e-12)


def test_the_option_and_its_column_are_checked():
    with pytest.raises(UsageError, match=r"`top_entropy_quantile` must be in \[0, 1\]"):
        ObjectiveConfig(top_entropy_quantile=1.5)
    with pytest.raises(UsageError, match="needs `entropies`"):
        policy_objective(ROWS_NEW, ROWS_NEW, advantage_values=[1.0, 1.0], top_entropy_quantile=0.5)
    with pytest.raises(UsageError, match="read only by `top_entropy_quantile` < 1"):
        policy_objective(ROWS_NEW, ROWS_NEW, advantage_values=[1.0, 1.0], entropies=ROWS_ENTROPY)


@pytest.fixture
def trl_file(tmp_path):
    """trl_case as a parquet file, with TRL's names (completion_mask, per_token_logps, entropies)."""
    path = tmp_path / "trl.parquet"
    columns = {"advantage": ADV, "per_token_logps": NEW, "old_per_token_logps": OLD, "ref_per_token_logps": REF, "completion_mask": MASK}
    pq.write_table(pa.table({**columns, "entropies": ENTROPY}), path)
    return path


def test_cli_reads_the_entropies_by_trls_name(trl_file, tmp_path):
    summary = tmp_path / "s.json"
    run_grpo("objective", str(trl_file), "--preset", "trl@1.9", "--top-entropy-quantile", "0.5", "-q", "--summary-json", str(summary))
    figures = json.loads(summary.read_text())
    assert figures["loss"] == pytest.approx(-0.04852808111092262, rel=1e-12)
    assert figures["columns"]["entropy"] == "entropies"
    assert figures["config"]["entropy_threshold"] == pytest.approx(0.65, rel=1e-15)
    # without the option the column is not read, and naming it is refused
    off = run_grpo("objective", str(trl_file), "--preset", "trl@1.9", "--entropy-col", "entropies", "-q", check=False)
    assert off.returncode != 0 and "--entropy-col is read only by --top-entropy-quantile < 1" in off.stderr.decode()
    plain = tmp_path / "p.json"
    run_grpo("objective", str(trl_file), "--preset", "trl@1.9", "-q", "--summary-json", str(plain))
    assert "entropy" not in json.loads(plain.read_text())["columns"]


def test_cli_refuses_a_missing_or_negative_entropy(trl_file, tmp_path):
    missing = run_grpo("objective", str(trl_file), "--top-entropy-quantile", "0.5", "--entropy-col", "nope", "-q", check=False)
    assert missing.returncode != 0 and "no column 'nope' for token entropies" in missing.stderr.decode()
    bad = tmp_path / "bad.parquet"
    pq.write_table(
        pa.table({"logprobs": NEW, "old_logprobs": OLD, "advantage": ADV, "mask": MASK, "entropy": [[0.1, -0.2, 0.0, 0.0]] + ENTROPY[1:]}), bad
    )
    proc = run_grpo("objective", str(bad), "--top-entropy-quantile", "0.5", "-q", check=False)
    assert proc.returncode != 0 and "row 0" in proc.stderr.decode() and "negative entropy" in proc.stderr.decode()


def test_inspect_shows_the_entropy_role(trl_file):
    roles = json.loads(run_grpo("inspect", str(trl_file), "--json").stdout)["columns"]
    assert roles["entropy"]["column"] == "entropies"


def test_the_quantile_is_over_the_whole_input_whatever_the_batches(trl_file):
    from grpo_cli import objective_file

    config = ObjectiveConfig(preset="trl@1.9", top_entropy_quantile=0.5)
    whole = objective_file(str(trl_file), config=config)
    assert objective_file(str(trl_file), config=config, batch_rows=1) == whole
    assert whole["config"]["entropy_threshold"] == pytest.approx(0.65, rel=1e-15)
