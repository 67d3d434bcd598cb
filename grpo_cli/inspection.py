"""`grpo inspect`: what a rollout file holds, before training on it.

One streaming pass over every column counts nulls and, from the token columns, each row's
entries and valid tokens (held per row as int32: rows are small, tokens are not); the first
pass of `grpo advantages` gives the groups, the rewards and the advantages under the default
estimator.
"""

from __future__ import annotations

import numpy as np

from .summaries import GroupSummary, describe, described, histogram, reward_figures


def layout(entries_min: int | None, entries_max: int | None, mask: str | None) -> str:
    """``ragged`` (lists of their own lengths), ``padded`` (one width, a mask marks the
    tokens), ``ragged with a mask``, or ``no token columns``."""
    if entries_min is None:
        return "no token columns"
    if mask is None:
        return "ragged"
    return "padded" if entries_min == entries_max else "ragged with a mask"


def token_figures(lengths: np.ndarray) -> dict:
    """Valid tokens per row: total, min, median and p99 (nearest rank: the smallest length with
    at least that share of rows at or below it), max, and how many rows reach the max."""
    if not len(lengths):
        return {"total": 0, "min": None, "median": None, "p99": None, "max": None, "rows_at_max": 0}
    median, p99 = np.quantile(lengths, [0.5, 0.99], method="inverted_cdf")
    top = int(lengths.max())
    return {
        "total": int(lengths.sum(dtype=np.int64)),
        "min": int(lengths.min()),
        "median": int(median),
        "p99": int(p99),
        "max": top,
        "rows_at_max": int((lengths == top).sum()),
    }


def inspect_figures(
    *,
    rows: int,
    roles: dict,
    nulls: dict[str, int],
    lengths: np.ndarray | None,
    entries: tuple[int, int] | None,
    mask: str | None,
    groups: GroupSummary | None,
    grouped_by: str,
    rewards: np.ndarray | None,
    advantages: np.ndarray | None,
    truncated: np.ndarray | None,
    estimator,
) -> dict:
    """The figures of `grpo inspect` (``rewards``: the scored rows' rewards; ``None``: no
    reward column)."""
    entries_min, entries_max = entries if entries is not None else (None, None)
    figures = {"rows": rows, "columns": roles, "layout": layout(entries_min, entries_max, mask), "nulls": nulls}
    if rewards is not None:
        assert groups is not None and advantages is not None  # read with the rewards
        moments = described(rewards, histogram=True)
        figures.update(reward_figures(groups, grouped_by, moments, rows))
        figures["reward_histogram"] = histogram(*moments)
        adv = described(advantages, histogram=True)
        figures.update(advantage=describe(*adv), advantage_histogram=histogram(*adv), advantage_config=estimator.figures)
    else:
        figures.update(reward=None, reward_histogram=None, advantage=None, advantage_histogram=None, advantage_config=None)
    figures["tokens"] = None if lengths is None else token_figures(lengths)
    figures["length_histogram"] = None if lengths is None or not len(lengths) else histogram(*described(lengths.astype(np.float64), histogram=True))
    figures["truncated_rows"] = None if truncated is None else int(truncated.sum())
    return figures
