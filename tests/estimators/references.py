"""Slow, obvious references for every registered estimator and scale: Python loops over
groups. Each estimator's own test module holds its reference, ``REFERENCES = {name:
fn(r, everything)}`` (``r``: a group's rewards, ``everything``: every reward of the input);
a test fails for an estimator that has none."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from ..conftest import gathered_references


@functools.cache
def references() -> dict:
    """Every ``REFERENCES`` of the test modules beside this one."""
    return gathered_references(__package__, Path(__file__).parent)


def reference_advantages(rewards, groups, *, estimator="grpo", scale="group", ddof=0, eps=0.0) -> np.ndarray:
    """Each group's ``REFERENCES[estimator](r)`` divided by the scale; 0 for groups of one
    row or of equal rewards."""
    rewards = np.asarray(rewards, dtype=np.float64)
    out = np.zeros_like(rewards)
    batch_std = rewards.std(ddof=ddof) if rewards.size > ddof else np.nan
    for key in set(groups):
        idx = [i for i, g in enumerate(groups) if g == key]
        r = rewards[idx]
        if len(r) < 2 or r.max() == r.min():
            continue
        a = references()[estimator](r, rewards)
        if scale == "group":
            a = a / (r.std(ddof=ddof) + eps)
        elif scale == "batch":
            a = a / (batch_std + eps)
        out[idx] = a
    return out
