"""`grpo compare`: several estimators on the same rows, side by side.

Each estimator is given as ``NAME[:key=value,...]`` (an estimator, or a preset's estimator, with
options of :class:`~grpo_cli.config.AdvantageConfig`). The figures: each estimator's mean, std,
min and max; Spearman's rank correlation between each pair (average ranks for ties); the share
of rows whose sign flips between them (one positive, the other negative); and the groups where
they differ most.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np

from .config import AdvantageConfig, from_text
from .errors import UsageError
from .estimators import GroupIndex, lookup
from .presets import NAMES
from .summaries import describe, described


COLUMN = "column"  # ``column:NAME``: advantages the input already holds (a trainer's own)


def parse_estimators(text: str, *, preset: str | None = None, **common) -> list[tuple[str, AdvantageConfig | None]]:
    """``"grpo:std=sample,eps=1e-6,rloo"`` as (label, config) pairs: a comma-separated part
    with ``=`` is an option of the estimator before it. A preset's name stands for its
    estimator; ``preset`` and the options ``common`` to every estimator (``None``: not given)
    apply where an estimator's own options do not say. ``column:NAME`` is a column of
    advantages the input holds (config ``None``).

    >>> [(label, c.estimator, c.std) for label, c in parse_estimators("grpo:std=sample,eps=1e-6,rloo")]
    [('grpo:std=sample,eps=1e-6', 'grpo', 'sample'), ('rloo', 'rloo', 'population')]
    """
    specs: list[list[str]] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            raise UsageError(f"`estimators` has an empty entry (found {text!r})")
        if "=" in part and ":" not in part:
            if not specs:
                raise UsageError(f"`estimators` starts with an option, not an estimator (found {text!r})")
            specs[-1].append(part)
        else:
            specs.append([part])
    out: list[tuple[str, AdvantageConfig | None]] = []
    for name, *options in ([*spec[0].split(":", 1), *spec[1:]] for spec in specs):
        if name == COLUMN:
            if len(options) != 1 or "=" in options[0] or not options[0]:
                raise UsageError(f"`estimators`: a column is given as column:NAME (found {':'.join([name, *options])!r})")
            out.append((f"{COLUMN}:{options[0]}", None))
            continue
        values = {**common, **dict(_option(o, name) for o in options)}
        config = AdvantageConfig(preset=name, **values) if name in NAMES else AdvantageConfig(preset=preset, estimator=name, **values)
        if lookup(config.estimator).level == "token":
            raise UsageError(f"`grpo compare` compares one advantage per row; estimator {config.estimator!r} gives one per token")
        out.append((":".join([name, ",".join(options)]) if options else name, config))
    if len(out) < 2:
        raise UsageError(f"`estimators` needs two or more to compare (found {text!r})")
    labels = [label for label, _ in out]
    if len(set(labels)) < len(labels):
        raise UsageError(f"`estimators` names one twice (found {text!r})")
    return out


def held_column(label: str) -> str:
    """The column of a ``column:NAME`` estimator."""
    return label.removeprefix(f"{COLUMN}:")


def _option(text: str, name: str) -> tuple[str, Any]:
    """``key=value`` of estimator ``name``, the value as its option takes it (several numbers
    separated by spaces: ``reward_weights=1 0.5``)."""
    key, _, value = text.partition("=")
    if not key or not value:
        raise UsageError(f"estimator {name!r}: options are key=value (found {text!r})")
    if key in ("preset", "estimator"):
        raise UsageError(f"estimator {name!r}: `{key}` is its name in `estimators`; drop `{key}={value}`")
    return key, from_text(AdvantageConfig, key, value, f"estimator {name!r}")


def column_name(label: str) -> str:
    """The written column of an estimator: ``advantage_`` and its label, punctuation as ``_``.

    >>> column_name("grpo:std=sample,eps=1e-6")
    'advantage_grpo_std_sample_eps_1e-6'
    """
    return "advantage_" + re.sub(r"[:,=]", "_", label)


def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties sharing their average rank.

    >>> average_ranks(np.array([3.0, 1.0, 3.0, 2.0])).tolist()
    [3.5, 1.0, 3.5, 2.0]
    """
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return ((ends - counts + 1 + ends) / 2.0)[inverse]


def spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    """Spearman's rank correlation (None when either side is constant)."""
    ra, rb = average_ranks(a) - (len(a) + 1) / 2.0, average_ranks(b) - (len(b) + 1) / 2.0
    denominator = np.sqrt((ra * ra).sum() * (rb * rb).sum())
    return float((ra * rb).sum() / denominator) if denominator > 0 else None


def compare_figures(labels: list[str], advantages: np.ndarray, index: GroupIndex, names: Callable[[np.ndarray], list], top: int) -> dict:
    """The figures of `grpo compare` (``advantages``: rows x estimators; ``names``: what
    names the given groups, their prompt ids)."""
    k = len(labels)
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    rows = advantages.shape[0]
    per_group_gap = np.zeros(index.count)
    for i, j in pairs:
        np.maximum.at(per_group_gap, index.codes, np.abs(advantages[:, i] - advantages[:, j]))
    worst = np.argsort(-per_group_gap, kind="stable")[:top]
    worst = worst[per_group_gap[worst] > 0]
    flips = {f"{labels[i]} / {labels[j]}": float((advantages[:, i] * advantages[:, j] < 0).sum() / rows) if rows else 0.0 for i, j in pairs}
    return {
        "rows": rows,
        "groups": index.count,
        "estimators": {label: describe(*described(advantages[:, n])) for n, label in enumerate(labels)},
        "rank_correlation": {f"{labels[i]} / {labels[j]}": spearman(advantages[:, i], advantages[:, j]) for i, j in pairs},
        "sign_flips": flips,
        "most_affected_groups": [
            {"group": name, "rows": int(index.sizes[g]), "max_abs_difference": float(per_group_gap[g])} for g, name in zip(worst, names(worst))
        ],
    }
