"""GPG (Chu et al. 2025, Group Policy Gradient): the group mean as baseline, rescaled by the
share of rows with a nonzero reward in the whole input."""

import numpy as np

from .groups import Groups
from .registry import estimator


def alpha(groups: Groups) -> float:
    """N / max(rows with a nonzero reward, 1), over every row of the input."""
    return len(groups.r) / max(int(np.count_nonzero(groups.r)), 1)


@estimator("gpg", params=("scale",), scales=("none",), default_scale="none", scope="file", gain=alpha)
def gpg(groups: Groups) -> np.ndarray:
    """alpha (r - group mean), alpha = rows / rows with a nonzero reward (GPG; as verl).

    .. math:: A_i = \\alpha (r_i - \\mathrm{mean}_g(r)), \\quad
              \\alpha = N / \\max(|\\{j : r_j \\ne 0\\}|, 1)

    over all N rows of the input (file-wide). A group of one row gets alpha r with
    ``singleton`` 'unit-std' (verl: its mean 0 and f_norm 1; core_algos.py:771-830 of 0.9.1).
    """
    return alpha(groups) * groups.centered
