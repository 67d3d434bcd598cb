"""GRPO with its group statistics in float32: verl's ``grpo_vectorized``.

verl's ``compute_grpo_vectorized_outcome_advantage`` takes each group's mean and std from
``group_mean_std`` (utils/groupwise.py), which casts the rewards to float32 and sums them
with ``index_add_``; the advantage is ``(r - mean_g) / (std_g + eps)`` with ``std_g + eps``
in float32. So an equal-reward group whose reward float32 does not hold gets
``(r - fl32(mean)) / eps``, not 0 (0.1, 0.1, 0.1: -0.00149 each, verl 0.9.1).

Sums are added in row order (torch's ``index_add_`` on the CPU; a GPU's atomic adds have no
fixed order) and the square root is IEEE's, as CUDA's ``sqrtf``; torch's AVX2 CPU kernel
rounds about one float32 square root in five one ulp off, so verl on a CPU differs there by
about 1e-7 relative.
"""

from __future__ import annotations

import numpy as np

from ..errors import RowError
from .groups import Groups

GROUP_STATS = ("float64", "float32", "float32-one-pass")
F32 = np.float32


def float32_stats(groups: Groups, one_pass: bool, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Each group's float32 mean and std as verl's ``group_mean_std``: ``S1 = sum r``,
    ``mean = S1 / n``; two-pass (verl 0.9.1, groupwise.py:205-211)
    ``var = sum (r - mean)^2 / (n - 1)``, ``std = sqrt(var)``; one-pass (verl 0.7.0,
    groupwise.py:205-213) ``var = (sum r^2 - S1^2 / n) / (n - 1)``, ``std = sqrt(max(var, eps))``.
    A group of one row has mean 0 and std 1."""
    codes, count = groups.index.codes, groups.count.astype(F32)
    r = groups.r.astype(F32)
    s1 = np.zeros(len(count), F32)
    np.add.at(s1, codes, r)  # float32, in row order
    n = np.maximum(count, F32(1))
    mean = s1 / n
    if one_pass:
        s2 = np.zeros(len(count), F32)
        np.add.at(s2, codes, r * r)
        var = (s2 - s1 * s1 / n) / np.maximum(count - F32(1), F32(1))
        std = np.sqrt(np.maximum(var, F32(eps)))
    else:
        c = r - mean[codes]
        m2 = np.zeros(len(count), F32)
        np.add.at(m2, codes, c * c)
        std = np.sqrt(m2 / np.maximum(count - F32(1), F32(1)))
    alone = count == 1
    mean[alone], std[alone] = 0.0, 1.0
    return mean, std


def float32_advantage(groups: Groups, config) -> np.ndarray:
    """verl's grpo_vectorized: ``A_i = (r_i - mean_g) / fl32(std_g + eps)`` with the group
    statistics of :func:`float32_stats` (``group_stats`` 'float32': verl 0.9.1,
    core_algos.py:335-358; 'float32-one-pass': verl 0.7.0, core_algos.py:332-355), ``r_i`` as
    given (float64), the rest in float64. A reward beyond float32's range is refused."""
    big = np.flatnonzero(np.abs(groups.r) > np.finfo(F32).max)
    if big.size:
        raise RowError(int(big[0]), f"its reward {groups.r[big[0]]:.3g} is beyond float32, where `group_stats` {config.group_stats!r} takes it")
    mean, std = float32_stats(groups, config.group_stats == "float32-one-pass", config.eps)
    return (groups.r - groups.per_row(mean.astype(np.float64))) / groups.per_row((std + F32(config.eps)).astype(np.float64))
