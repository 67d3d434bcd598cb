"""GRPO (DeepSeekMath): the group mean as baseline."""

import numpy as np

from .groups import Groups
from .registry import estimator


@estimator("grpo", params=("scale", "std", "eps", "group_stats"))
def grpo(groups: Groups) -> np.ndarray:
    """r - group mean, then scaled (GRPO).

    .. math:: A_i = (r_i - \\mathrm{mean}_g(r)) / s

    With ``group_stats`` float32 the mean and std are verl's grpo_vectorized's (:mod:`.float32`).
    """
    return groups.centered
