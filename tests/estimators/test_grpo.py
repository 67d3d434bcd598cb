"""GRPO: r - group mean, scaled."""

import numpy as np

from grpo_cli import AdvantageConfig, advantages


# the slow reference (tests/estimators/references.py)
def reference(r: np.ndarray, everything: np.ndarray) -> np.ndarray:
    return r - r.mean()


REFERENCES = {"grpo": reference}


def test_grouping_by_id_with_shuffled_rows():
    groups = ["b", "a", "b", "a", "a", "b"]
    rewards = [6.0, 0.0, 2.0, 1.0, 2.0, 4.0]
    # a: [0, 1, 2] -> mean 1, pop std sqrt(2/3); b: [6, 2, 4] -> mean 4, pop std sqrt(8/3)
    sa, sb = np.sqrt(2 / 3), np.sqrt(8 / 3)
    expected = [2 / sb, -1 / sa, -2 / sb, 0.0, 1 / sa, 0.0]
    np.testing.assert_allclose(advantages(rewards, groups, AdvantageConfig()), expected, rtol=1e-12)
