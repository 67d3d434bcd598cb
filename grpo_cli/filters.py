"""`grpo filter`: which rows to keep, from the groups' rewards and each row's flags.

Group rules look at the rewards as read (before the overlong penalty, as DAPO's ``acc``
metric): ``drop_zero_variance`` drops groups of two or more rows whose rewards are all equal
(a group of one row is kept, as verl's filter keeps it); ``keep_if`` keeps groups whose
statistic lies in bounds. Row rules: a truncated row is dropped or masked; the overlong
penalty changes the reward. Everything here is per-row numpy over the first pass's columns.
"""

from __future__ import annotations

import numpy as np

from .estimators import Groups, in_units


def statistic(groups: Groups, name: str) -> np.ndarray:
    """Per group: ``mean``, ``std`` (population), ``min`` or ``max`` of the rewards; the mean
    and std in the group's unit (:func:`~grpo_cli.estimators.in_units`), so that sums and
    squares of rewards beyond 2^500 do not overflow."""
    if name in ("min", "max"):
        return getattr(groups, name)
    scaled, u = in_units(groups, file_wide=False)
    return (scaled.std(0) if name == "std" else scaled.mean) * u


def group_rules(groups: Groups, config) -> dict[str, np.ndarray]:
    """Per group, for each rule given, whether it keeps the group."""
    rules = {}
    if config.drop_zero_variance:
        rules["zero_variance"] = groups.informative | (groups.count == 1)
    if config.keep_if is not None:
        stat, lo, lo_inclusive, hi, hi_inclusive = config.keep_bounds
        x = statistic(groups, stat)
        above = x >= lo if lo_inclusive else x > lo
        below = x <= hi if hi_inclusive else x < hi
        rules["keep_if"] = above & below
    return rules


def overlong_penalty(length: np.ndarray, config) -> np.ndarray:
    """DAPO's overlong penalty per row (0 or negative), with L the row's valid tokens.

    .. math:: p = \\min\\left(-\\frac{L - (L_{max} - B)}{B} f, 0\\right)

    >>> from grpo_cli.config import FilterConfig
    >>> overlong_penalty(np.array([10, 13, 16]), FilterConfig(overlong_buffer=4, max_length=16)).tolist()
    [0.0, -0.25, -1.0]
    """
    exceed = length - (config.max_length - config.overlong_buffer)
    return np.minimum(-exceed / config.overlong_buffer * config.overlong_factor, 0.0)


def filter_figures(groups: Groups, rules: dict[str, np.ndarray], keep: np.ndarray, truncated: np.ndarray | None,
                   penalty: np.ndarray | None, config) -> dict:
    """What was kept and why the rest was not: per rule, the groups (and their rows) it would
    drop on its own; truncated rows; the overlong penalty."""
    rows_of = lambda group_kept: int(groups.index.sizes[~group_kept].sum())  # noqa: E731
    kept_groups = int(np.count_nonzero(np.bincount(groups.index.codes[keep], minlength=groups.index.count)))
    figures = {
        "rows": len(keep), "groups": groups.index.count,
        "kept": {"rows": int(keep.sum()), "groups": kept_groups},
        "dropped": {"rows": int(len(keep) - keep.sum()), "groups": groups.index.count - kept_groups},
        "zero_variance": None, "keep_if": None, "truncated": None, "overlong": None,
        "config": config.figures,
    }
    for name, group_kept in rules.items():
        figures[name] = {"groups": int((~group_kept).sum()), "rows": rows_of(group_kept)}
    if truncated is not None:
        figures["truncated"] = {"rows": int(truncated.sum()), "action": config.truncated}
    if penalty is not None:
        hit = penalty < 0
        figures["overlong"] = {"rows": int(hit.sum()), "penalty_mean": float(penalty[hit].mean()) if hit.any() else 0.0,
                               "penalty_min": float(penalty.min()) if len(penalty) else 0.0}
    return figures
