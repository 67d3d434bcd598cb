"""RLOO (Ahmadian et al. 2024): leave-one-out baseline."""

import numpy as np

from .groups import Groups
from .registry import estimator


@estimator("rloo")
def rloo(groups: Groups) -> np.ndarray:
    """r - mean of the other rewards of the group, then scaled (RLOO).

    .. math:: A_i = (r_i - \\frac{1}{G - 1} \\sum_{j \\ne i} r_j) / s = \\frac{G}{G - 1} (r_i - \\mathrm{mean}_g(r)) / s

    (inf for groups of one row, which have no signal and get 0.)
    """
    n = groups.count.astype(np.float64)
    return groups.per_row(n / (n - 1.0)) * groups.centered
