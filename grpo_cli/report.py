"""Rendering: what the commands' ``render`` (in each command's module) share to show the
figures of :mod:`grpo_cli.summaries` as rich tables on stderr (as JSON:
:func:`grpo_cli.files.json_text`). Nothing here computes a figure."""

from __future__ import annotations

import math

from rich.table import Table

from .errors import shortened

BAR_WIDTH = 30
VALUE_WIDTH = 50  # the value column; with the longest label the table fits 80 columns


def fmt(x, spec: str = ".6g") -> str:
    """A figure for a table: a float as ``spec`` says; ``null`` for a figure with no value
    (one beyond float64)."""
    if x is None:
        return "null"
    return format(x, spec) if isinstance(x, float) else str(x)


def lines(items, width: int = VALUE_WIDTH) -> str:
    """``items`` joined by two spaces, broken between items into lines of at most ``width``
    characters (an item is never split), so the table never wraps a value mid-figure.

    >>> print(lines(["mean 1.5", "std 0.25", "min -1e+308"], width=20))
    mean 1.5  std 0.25
    min -1e+308
    """
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + 2 + len(item) <= width:
            lines[-1] += "  " + item
        else:
            lines.append(item)
    return "\n".join(lines)


def stats_row(table: Table, label: str, stats: dict) -> None:
    table.add_row(label, lines(f"{k} {fmt(v)}" for k, v in stats.items()))


BATCHES_SHOWN = 20  # a summary lists this many batches (steps); the JSON has every one


def batch_table(by: dict) -> Table:
    """The figures of each batch (`by`), one row each: the first :data:`BATCHES_SHOWN`."""
    batches = by["batches"]
    t = Table(title="per batch", title_justify="left")
    for name in ("batch", "rows", "groups", "zero-var", "reward mean", "reward std", *(("adv mean", "adv std") if "advantage" in batches[0] else ())):
        t.add_column(name, justify="left" if name == "batch" else "right")
    for b in batches[:BATCHES_SHOWN]:
        adv = (fmt(b["advantage"]["mean"]), fmt(b["advantage"]["std"])) if "advantage" in b else ()
        zv = b["zero_variance_groups"]["share"]
        t.add_row(str(shortened(b["batch"])), str(b["rows"]), str(b["groups"]), f"{zv:.1%}", fmt(b["reward"]["mean"]), fmt(b["reward"]["std"]), *adv)
    if len(batches) > BATCHES_SHOWN:
        t.add_row(f"... {len(batches) - BATCHES_SHOWN} more (--summary-json has each)", *[""] * (len(t.columns) - 1))
    return t


def table(title: str) -> Table:
    t = Table(title=title, show_header=False, title_justify="left")
    t.add_column("figure", style="bold")
    t.add_column("value")
    return t


def roles(columns: dict) -> str:
    """``role=column`` for each column that plays a role."""
    return lines(f"{role}={name}" for role, name in columns.items() if name is not None)


def estimator_options(cfg: dict) -> list[str]:
    """An estimator's options as ``name value`` items: scale, std and eps where they apply,
    the others where they are not at their defaults."""
    scaled = cfg["scale"] != "none"
    whiten = cfg["whiten_eps"] is not None
    shown = {
        "scale": cfg["scale"],
        "std": cfg["std"] if scaled else None,
        "eps": cfg["eps"] if scaled else None,
        "gamma": cfg["gamma"],
        "lambda": cfg["lam"],
        "singleton": cfg["singleton"] if cfg["singleton"] != "zero" else None,
        "group stats": cfg.get("group_stats"),  # only when not float64
        "reward weights": cfg["reward_weights"] and ",".join(f"{w:g}" for w in cfg["reward_weights"]),
        "multi-reward": cfg["multi_reward"] if cfg["reward_weights"] or cfg["multi_reward"] != "sum-then-normalize" else None,
        "nulls": "error" if cfg["on_null"] == "error" else None,
        "reward clip": cfg["reward_clip"] and "[{:g}, {:g}]".format(*cfg["reward_clip"]),
        "advantage clip": cfg.get("advantage_clip") and "[{:g}, {:g}]".format(*cfg["advantage_clip"]),
        "kl in reward": cfg["kl_in_reward"] is not None and f"{cfg['kl_in_reward']:g} ({cfg['kl']})",
        "whitened": whiten and f"{cfg['whiten_std']} std, eps {cfg['whiten_eps']:g} at {cfg['whiten_eps_at']}",
    }
    return [f"{k} {fmt(v)}" for k, v in shown.items() if v is not None and v is not False]


def _edge(x: float, width: float) -> str:
    """A bin edge with three significant digits of the bin width (scientific for huge or tiny
    widths); rounding never prints -0."""
    if not 1e-6 <= width < 1e9:
        return f"{x:+.3e}"
    digits = max(0, 2 - math.floor(math.log10(width)))
    return f"{round(x, digits) + 0.0:+.{digits}f}"


def render_histogram(hist: dict) -> str:
    """One text line per bin: ``lo .. hi  count  ████``.

    >>> print(render_histogram({"edges": [-1.0, 0.0, 1.0], "counts": [1, 3]}))
      -1.00 .. +0.00        1 ██████████
      +0.00 .. +1.00        3 ██████████████████████████████
    """
    edges = [math.inf if e is None and k else -math.inf if e is None else e for k, e in enumerate(hist["edges"])]
    counts = hist["counts"]
    width = (edges[-1] - edges[0]) / max(len(counts), 1)
    peak = max(counts) or 1
    cells = [(_edge(lo, width), _edge(hi, width)) for lo, hi in zip(edges, edges[1:])]
    pad = max((len(c) for pair in cells for c in pair), default=0)
    return "\n".join(f"  {lo:>{pad}} .. {hi:>{pad}} {c:>8} {'█' * round(BAR_WIDTH * c / peak)}" for (lo, hi), c in zip(cells, counts))
