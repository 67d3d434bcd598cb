"""`grpo filter`: which rows to keep, from the groups' rewards and each row's flags.

Group rules look at the rewards as read (before the overlong penalty, as DAPO's ``acc``
metric): ``drop_zero_variance`` drops groups of two or more rows whose rewards are all equal
(a group of one row is kept, as verl's filter keeps it); ``keep_if`` keeps groups whose
statistic lies in bounds. Row rules: a truncated row is dropped or masked; the overlong
penalty changes the reward. Everything here is per-row numpy over the first pass's columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .config import Options, check_choice, check_range, option
from .errors import UsageError
from .estimators import Groups, in_units

KEEP_IF = re.compile(
    r"^\s*(?:(?P<lo>[-+0-9.eE]+)\s*(?P<lo_op><=?)\s*)?(?P<stat>mean|std|min|max)\s*"
    r"(?:(?P<hi_op><=?)\s*(?P<hi>[-+0-9.eE]+))?\s*$"
)
TRUNCATED = ("drop", "mask")


@dataclass(frozen=True, kw_only=True)
class FilterConfig(Options):
    """Which rows `grpo filter` keeps (see :mod:`grpo_cli.filters`).

    Attributes
    ----------
    drop_zero_variance
        Drop groups of two or more rows whose rewards are all equal (DAPO's dynamic sampling).
    keep_if
        Keep groups whose reward statistic lies in bounds, ``"LO < mean < HI"`` (OpenRLHF's
        dynamic filtering; ``<=`` for inclusive, one side may be left out; ``mean``, ``std``
        (population), ``min``, ``max``).
    truncated
        Rows a truncation column marks: ``drop`` them, or ``mask`` them (their token mask set
        to 0, as TRL's ``mask_truncated_completions``).
    overlong_buffer, max_length, overlong_factor
        DAPO's overlong penalty: ``r += min(-(L - (max_length - buffer)) / buffer * factor, 0)``
        with L the row's valid tokens.
    """

    PANEL: ClassVar[str] = "Rules"

    drop_zero_variance: bool = option(False, "Drop groups (of 2+ rows) whose rewards are all equal (DAPO dynamic sampling).")
    keep_if: str = option(
        None, "Keep groups whose reward statistic is in bounds: 'LO<mean<HI' (OpenRLHF; <= inclusive; mean, std, min, max).", metavar="RULE"
    )
    truncated: str = option(None, "Rows the truncation column marks: drop them, or mask them (token mask set to 0; TRL).", choices=TRUNCATED)
    overlong_buffer: int = option(None, "DAPO's overlong penalty: the last B tokens before --max-length are penalised linearly.", metavar="B")
    max_length: int = option(None, "The maximum response length of the overlong penalty.")
    overlong_factor: float = option(1.0, "The penalty at --max-length: r += min(-(L - (max_length - B)) / B * factor, 0).")

    def __post_init__(self) -> None:
        given = self._fill_defaults("filter")
        if self.keep_if is not None:
            self.keep_bounds  # noqa: B018  (parsed now)
        if self.truncated is not None:
            check_choice("truncated", self.truncated, TRUNCATED)
        if self.overlong_buffer is None:
            for name in sorted(given & {"max_length", "overlong_factor"}):
                raise UsageError(f"`{name}` belongs to the overlong penalty; pass `overlong_buffer` too, or drop it")
        else:
            if self.max_length is None:
                raise UsageError("`overlong_buffer` needs `max_length`, the maximum response length")
            if not 0 < self.overlong_buffer <= self.max_length:
                raise UsageError(f"`overlong_buffer` must be in [1, max_length] (found {self.overlong_buffer!r}, max_length {self.max_length!r})")
            check_range("overlong_factor", self.overlong_factor, 0)
        if not (self.drop_zero_variance or self.keep_if or self.truncated or self.overlong_buffer):
            raise UsageError("no rule given: pass `drop_zero_variance`, `keep_if`, `truncated` or `overlong_buffer`")
        self._set(_given=given)

    @property
    def keep_bounds(self) -> tuple[str, float, bool, float, bool]:
        """``keep_if`` as (statistic, lo, lo inclusive, hi, hi inclusive); a side left out is infinite.

        >>> FilterConfig(keep_if="0<mean<=1").keep_bounds
        ('mean', 0.0, False, 1.0, True)
        """
        found = KEEP_IF.match(self.keep_if)
        try:
            lo = float(found["lo"]) if found and found["lo"] else -np.inf
            hi = float(found["hi"]) if found and found["hi"] else np.inf
        except ValueError:
            found = None
        if not found or (found["lo"] is None and found["hi"] is None) or not lo < hi:
            raise UsageError(
                f"`keep_if` takes 'LO<STAT<HI' with STAT mean, std, min or max, LO < HI, one side optional, <= for inclusive (found {self.keep_if!r})"
            )
        return found["stat"], lo, found["lo_op"] == "<=", hi, found["hi_op"] == "<="

    @property
    def figures(self) -> dict:
        """The resolved options as the summary records them."""
        return {k: getattr(self, k) for k in ("drop_zero_variance", "keep_if", "truncated", "overlong_buffer", "max_length")} | {
            "overlong_factor": self.overlong_factor if self.overlong_buffer is not None else None
        }


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

    >>> overlong_penalty(np.array([10, 13, 16]), FilterConfig(overlong_buffer=4, max_length=16)).tolist()
    [0.0, -0.25, -1.0]
    """
    exceed = length - (config.max_length - config.overlong_buffer)
    return np.minimum(-exceed / config.overlong_buffer * config.overlong_factor, 0.0)


def filter_figures(
    groups: Groups, rules: dict[str, np.ndarray], keep: np.ndarray, truncated: np.ndarray | None, penalty: np.ndarray | None, config
) -> dict:
    """What was kept and why the rest was not: per rule, the groups (and their rows) it would
    drop on its own; truncated rows; the overlong penalty."""
    rows_of = lambda group_kept: int(groups.index.sizes[~group_kept].sum())  # noqa: E731
    kept_groups = int(np.count_nonzero(np.bincount(groups.index.codes[keep], minlength=groups.index.count)))
    figures = {
        "rows": len(keep),
        "groups": groups.index.count,
        "kept": {"rows": int(keep.sum()), "groups": kept_groups},
        "dropped": {"rows": int(len(keep) - keep.sum()), "groups": groups.index.count - kept_groups},
        "zero_variance": None,
        "keep_if": None,
        "truncated": None,
        "overlong": None,
        "config": config.figures,
    }
    for name, group_kept in rules.items():
        figures[name] = {"groups": int((~group_kept).sum()), "rows": rows_of(group_kept)}
    if truncated is not None:
        figures["truncated"] = {"rows": int(truncated.sum()), "action": config.truncated}
    if penalty is not None:
        hit = penalty < 0
        figures["overlong"] = {
            "rows": int(hit.sum()),
            "penalty_mean": float(penalty[hit].mean()) if hit.any() else 0.0,
            "penalty_min": float(penalty.min()) if len(penalty) else 0.0,
        }
    return figures
