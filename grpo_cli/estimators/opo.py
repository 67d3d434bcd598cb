"""OPO (Hao et al. 2025, On-Policy RL with Optimal reward baseline, as verl's ``opo``): the
group's length-weighted mean reward as baseline."""

import numpy as np

from .groups import Groups, group_sum
from .registry import estimator
from ..errors import present


@estimator("opo", needs=("length",), params=(), scales=("none",), default_scale="none")
def opo(groups: Groups) -> np.ndarray:
    """r - the group's mean reward weighted by response length (OPO; as verl).

    .. math:: A_i = r_i - \\frac{\\sum_{j \\in g} L_j r_j}{\\sum_{j \\in g} L_j}

    with L the row's valid tokens. A group without tokens gets the plain mean.
    """
    weights = present(groups.length, "each row's length").astype(np.float64)
    total = group_sum(weights, groups.index)
    weighted = group_sum(weights * groups.r, groups.index)
    baseline = np.where(total > 0, weighted / np.where(total > 0, total, 1.0), groups.mean)
    return groups.r - groups.per_row(baseline)
