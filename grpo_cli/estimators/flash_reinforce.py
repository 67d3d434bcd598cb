"""FlashREINFORCE (OpenRLHF 0.11.2 ``flash_reinforce``): the mean reward of the whole rollout
batch as baseline, for the single-rollout regime where a prompt has no group."""

import numpy as np

from .groups import Groups
from .registry import estimator


@estimator("flash-reinforce", aliases=("batch-mean",), params=("scale",), scales=("none",), default_scale="none", scope="file", grouped=False)
def flash_reinforce(groups: Groups) -> np.ndarray:
    """r - mean of every reward of the input, never scaled nor whitened (FlashREINFORCE, OpenRLHF 0.11.2).

    .. math:: A_i = r_i - \\frac{1}{N} \\sum_{j=1}^{N} r_j

    over the N scored rows of the input, whatever their groups (OpenRLHF 0.11.2,
    trainer/ppo_utils/experience_maker.py:275-278: ``rewards - rewards.mean()``).
    """
    return groups.r - np.mean(groups.r)
