"""RLOO: r - mean of the other rewards of the group."""

import numpy as np

from grpo_cli import AdvantageConfig, advantages


# the slow reference (tests/estimators/references.py)
def reference(r: np.ndarray, everything: np.ndarray) -> np.ndarray:
    return np.array([r[i] - np.delete(r, i).mean() for i in range(len(r))])


REFERENCES = {"rloo": reference}


def test_rloo_hand_checked():
    # one group [1, 2, 3]: leave-one-out baselines [2.5, 2.0, 1.5]
    cfg = AdvantageConfig(estimator="rloo", scale="none")
    assert advantages([1.0, 2.0, 3.0], [0, 0, 0], cfg).tolist() == [-1.5, 0.0, 1.5]
    cfg = AdvantageConfig(estimator="rloo", scale="group")  # population std sqrt(2/3)
    np.testing.assert_allclose(advantages([1.0, 2.0, 3.0], [0, 0, 0], cfg), [-1.8371173, 0.0, 1.8371173], rtol=1e-7)
