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
    codes, r = groups.index.codes, groups.r
    rows = np.arange(len(r))
    order = np.lexsort((rows, -r, codes))  # by group, best first, then row order
    starts = np.concatenate([[0], np.cumsum(groups.count)[:-1]]).astype(np.int64)
    best = order[starts]
    second = order[np.minimum(starts + 1, len(r) - 1)]
    margin = np.where(groups.count > 1, r[best] - r[second], 0.0)
    out = np.zeros_like(r)
    out[best] = margin
    return out
