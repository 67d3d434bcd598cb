"""ReMax (Li et al. 2023, as verl's ``remax``): the reward of the greedy response to the same
prompt as baseline."""

import numpy as np

from .groups import Groups
from .registry import estimator


@estimator("remax", needs=("baseline",), params=(), scales=("none",), default_scale="none", grouped=False)
def remax(groups: Groups) -> np.ndarray:
    """r - the greedy response's reward from the baseline column (ReMax; as verl).

    .. math:: A_i = r_i - b_i, \\quad b_i = r(\\text{greedy response to } i\\text{'s prompt})

    Each row stands alone: no group statistic is used.
    """
    return groups.r - groups.baseline
