"""Pass@k training (Chen et al. 2025, as verl's ``grpo_passk``): only each group's best row
is credited, by its margin over the runner-up."""

import numpy as np

from .groups import Groups
from .registry import estimator


@estimator("passk")
def passk(groups: Groups) -> np.ndarray:
    """The group's best row gets r_max - r_second, every other row 0; then scaled (pass@k, verl).

    .. math:: A_i = [i = \\arg\\max_g r] \\, (r_{(1)} - r_{(2)}) / s

    The best row is the first of the group's maxima (in row order); on a tie the margin is 0.
    """
    r = groups.r
    rows = np.arange(len(r))
    best = groups.reduce(np.minimum, np.where(r == groups.per_row(groups.max), rows, len(r)))  # first of the maxima
    others = r.copy()
    others[best] = -np.inf
    out = np.zeros_like(r)
    out[best] = np.where(groups.count > 1, r[best] - groups.reduce(np.maximum, others), 0.0)
    return out
