"""Dr.GRPO (Liu et al. 2025): the group mean as baseline, never scaled."""

import numpy as np

from .groups import Groups
from .registry import estimator


@estimator("mean", aliases=("drgrpo", "unbiased"), params=("scale",), scales=("none",), default_scale="none")
def mean(groups: Groups) -> np.ndarray:
    """r - group mean, never scaled (Dr.GRPO's unbiased baseline).

    .. math:: A_i = r_i - \\mathrm{mean}_g(r)
    """
    return groups.centered
