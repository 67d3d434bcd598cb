"""GPG (Chu et al. 2025, Group Policy Gradient): the group mean as baseline, rescaled by the
share of rows with a nonzero reward in the whole input."""

import numpy as np

from .groups import Groups
from .registry import estimator


@estimator("gpg", params=("scale",), scales=("none",), default_scale="none", scope="file")
def gpg(groups: Groups) -> np.ndarray:
    """alpha (r - group mean), alpha = rows / rows with a nonzero reward (GPG; as verl).

    .. math:: A_i = \\alpha (r_i - \\mathrm{mean}_g(r)), \\quad
              \\alpha = N / \\max(|\\{j : r_j \\ne 0\\}|, 1)

    over all N rows of the input (file-wide).
    """
    alpha = len(groups.r) / max(int(np.count_nonzero(groups.r)), 1)
    return alpha * groups.centered
