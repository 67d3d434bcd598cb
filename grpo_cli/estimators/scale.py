"""Scales: what ``r - b`` is divided by. The std is ``sqrt(M2 / (n - ddof))``."""

from __future__ import annotations

import numpy as np

from .groups import GroupIndex, Groups


def group(groups: Groups, ddof: int, eps: float) -> np.ndarray:
    """s_i = std of row i's group + eps."""
    return groups.per_row(groups.std(ddof) + eps)


def batch(groups: Groups, ddof: int, eps: float) -> float:
    """s = std of every reward in the input + eps (the baseline stays per group)."""
    everything = Groups(groups.r, GroupIndex.whole(len(groups.r)))
    return float(everything.std(ddof)[0]) + eps


def none(groups: Groups, ddof: int, eps: float) -> float:
    """s = 1."""
    return 1.0


SCALE_DIVISORS = {"group": group, "batch": batch, "none": none}
