"""GRPO (DeepSeekMath): the group mean as baseline."""

import numpy as np

from .groups import Groups
from .registry import estimator


@estimator("grpo")
def grpo(groups: Groups) -> np.ndarray:
    """r - group mean, then scaled (GRPO).

    .. math:: A_i = (r_i - \\mathrm{mean}_g(r)) / s
    """
    return groups.centered
