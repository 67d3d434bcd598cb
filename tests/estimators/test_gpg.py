"""gpg: alpha (r - group mean), alpha = rows / rows with a nonzero reward, over the whole input."""

import numpy as np

from grpo_cli import AdvantageConfig, advantages


# the slow reference (tests/estimators/references.py)
def reference(r: np.ndarray, everything: np.ndarray) -> np.ndarray:
    alpha = len(everything) / max(sum(1 for x in everything if x != 0), 1)
    return alpha * (r - r.mean())


REFERENCES = {"gpg": reference}


def test_gpg_hand_checked():
    # 6 rows, 2 with a nonzero reward: alpha = 3. Group a mean 0.25, group b mean 0.5.
    adv = advantages([1.0, 0.0, 0.0, 0.0, 0.0, 1.0], list("aaaabb"), AdvantageConfig(estimator="gpg"))
    assert adv.tolist() == [2.25, -0.75, -0.75, -0.75, -1.5, 1.5]


def test_gpg_all_zero_rewards_give_zero():
    assert advantages([0.0, 0.0], list("aa"), AdvantageConfig(estimator="gpg")).tolist() == [0.0, 0.0]
