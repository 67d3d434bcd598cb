"""Slow, obvious references for every registered estimator and scale: Python loops over
groups. A test fails for an estimator that has none here."""

from __future__ import annotations

import numpy as np


def grpo(r: np.ndarray, everything: np.ndarray) -> np.ndarray:
    return r - r.mean()


def rloo(r: np.ndarray, everything: np.ndarray) -> np.ndarray:
    return np.array([r[i] - np.delete(r, i).mean() for i in range(len(r))])


def mean(r: np.ndarray, everything: np.ndarray) -> np.ndarray:
    return r - r.mean()


def passk(r: np.ndarray, everything: np.ndarray) -> np.ndarray:
    out = np.zeros_like(r)
    best = int(np.argmax(r))  # the first maximum
    out[best] = r[best] - sorted(r, reverse=True)[1]
    return out


def gpg(r: np.ndarray, everything: np.ndarray) -> np.ndarray:
    alpha = len(everything) / max(sum(1 for x in everything if x != 0), 1)
    return alpha * (r - r.mean())


REFERENCES = {"grpo": grpo, "rloo": rloo, "mean": mean, "passk": passk, "gpg": gpg}


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
        a = REFERENCES[estimator](r, rewards)
        if scale == "group":
            a = a / (r.std(ddof=ddof) + eps)
        elif scale == "batch":
            a = a / (batch_std + eps)
        out[idx] = a
    return out
