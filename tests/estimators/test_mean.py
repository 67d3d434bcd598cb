"""Dr.GRPO's mean baseline: r - group mean, never scaled (aliases drgrpo, unbiased)."""

import numpy as np

from grpo_cli import AdvantageConfig, advantages


# the slow reference (tests/estimators/references.py)
def reference(r: np.ndarray, everything: np.ndarray) -> np.ndarray:
    return r - r.mean()


REFERENCES = {"mean": reference}


def test_mean_aliases_are_unscaled():
    for name in ("mean", "drgrpo", "unbiased"):
        cfg = AdvantageConfig(estimator=name)
        assert cfg.estimator == "mean" and cfg.scale == "none"
        assert advantages([1.0, 0.0], [0, 0], cfg).tolist() == [0.5, -0.5]
