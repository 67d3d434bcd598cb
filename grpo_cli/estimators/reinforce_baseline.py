"""REINFORCE++-baseline (Hu et al. 2025; verl ``reinforce_plus_plus_baseline``, OpenRLHF
``reinforce_baseline``): the group mean as baseline, then whitened over every valid token."""

import numpy as np

from .groups import Groups
from .registry import estimator


@estimator("reinforce-baseline", needs=("length",), params=(), scales=("none",), default_scale="none", scope="file", whitens="tokens")
def reinforce_baseline(groups: Groups) -> np.ndarray:
    """r - group mean, whitened over all valid tokens of the input (REINFORCE++-baseline).

    .. math:: A_i = \\frac{(r_i - \\mathrm{mean}_g(r)) - \\mu}{s}

    with mu and s the mean and std of ``r - mean_g`` over tokens (row i counts L_i times),
    s as ``whiten_std`` and ``whiten_eps_at`` say.
    """
    return groups.centered
