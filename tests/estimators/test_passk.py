"""passk: the group's best row gets its margin over the runner-up; every other row 0."""

import numpy as np

from grpo_cli import AdvantageConfig, advantages


# the slow reference (tests/estimators/references.py)
def reference(r: np.ndarray, everything: np.ndarray) -> np.ndarray:
    out = np.zeros_like(r)
    best = int(np.argmax(r))  # the first maximum
    out[best] = r[best] - sorted(r, reverse=True)[1]
    return out


REFERENCES = {"passk": reference}


def test_passk_hand_checked():
    # group a: best 3.0 (row 1), runner-up 2.0 -> margin 1; group b: best 1.0 (row 5) over 0.0
    cfg = AdvantageConfig(estimator="passk", scale="none")
    assert advantages([1.0, 3.0, 2.0, 2.0, 0.0, 1.0], list("aaaabb"), cfg).tolist() == [0, 1.0, 0, 0, 0, 1.0]
    # a tie at the top: the margin is 0 (verl: topk's two values are equal)
    assert advantages([1.0, 3.0, 3.0, 2.0], list("aaaa"), cfg).tolist() == [0.0, 0.0, 0.0, 0.0]


def test_passk_scaled_as_verl():
    # verl grpo_passk with norm_adv_by_std_in_grpo: margin / (std_sample + 1e-6)
    # group [0, 1, 0, 1]: best is row 1 (first max), margin 1 - 1 = 0 -> all 0
    # group [0, 0, 1, 0.5]: best row 2, margin 0.5; sample std = sqrt(((-.375)^2*2 + .625^2 + .125^2) / 3)
    r = np.array([0.0, 0.0, 1.0, 0.5])
    cfg = AdvantageConfig(estimator="passk", std="sample", eps=1e-6)
    expected = 0.5 / (np.sqrt((0.375**2 * 2 + 0.625**2 + 0.125**2) / 3) + 1e-6)
    np.testing.assert_allclose(advantages(r, [0] * 4, cfg), [0, 0, expected, 0], rtol=1e-15)
