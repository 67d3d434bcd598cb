"""flash-reinforce: r - the mean reward of the whole input (OpenRLHF 0.11.2 flash_reinforce)."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_cli import AdvantageConfig, UsageError, advantages

from ..conftest import run_grpo


# the slow reference (tests/estimators/references.py): groups play no part
def reference(r: np.ndarray, everything: np.ndarray) -> np.ndarray:
    return r - sum(everything) / len(everything)


REFERENCES = {"flash-reinforce": reference}

# the fixed case of /work/research/41/openrlhf_twinkle_case.py (2 prompts x 3 rows)
REWARDS = [1.0, 0.0, 0.5, 0.2, 0.9, 0.4]


def test_hand_derived_as_openrlhf():
    # mean of all six rewards: 3.0 / 6 = 0.5, whatever the groups; OpenRLHF's
    # ref-openrlhf-0.11.2.json 'flash_reinforce' gives 0.5, -0.5, 0, -0.3, (no token), -0.1
    expected = [0.5, -0.5, 0.0, -0.3, 0.4, -0.1]
    got = advantages(REWARDS, list("aaabbb"), AdvantageConfig(estimator="flash-reinforce"))
    np.testing.assert_allclose(got, expected, rtol=1e-15, atol=1e-16)
    np.testing.assert_array_equal(advantages(REWARDS, list("abcdef"), AdvantageConfig(estimator="batch-mean")), got)  # groups of one too


def test_unscorable_rows_stay_out_of_the_mean():
    got = advantages([1.0, np.nan, 0.0, 0.5], list("abcd"), AdvantageConfig(estimator="flash-reinforce"))
    np.testing.assert_allclose(got, [0.5, 0.0, -0.5, 0.0], rtol=1e-15)


def test_never_scaled():
    with pytest.raises(UsageError, match="estimator 'flash-reinforce' is never scaled"):
        AdvantageConfig(estimator="flash-reinforce", scale="group")


def test_needs_no_group_column(tmp_path):
    src = tmp_path / "single.parquet"
    pq.write_table(pa.table({"reward": REWARDS}), src)
    out = tmp_path / "out.parquet"
    run_grpo("advantages", str(src), "--estimator", "flash-reinforce", "-o", str(out), "-q")
    np.testing.assert_allclose(pq.read_table(out)["advantage"].to_numpy(), [0.5, -0.5, 0.0, -0.3, 0.4, -0.1], rtol=1e-15, atol=1e-16)
