"""Rendering: the figures of :mod:`grpo_cli.summaries` as rich tables on stderr, or as JSON.
Nothing here computes a figure."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

BAR_WIDTH = 30


def write_json(figures: dict, path: str) -> None:
    Path(path).write_text(json.dumps(figures, indent=2) + "\n")


def _fmt(x) -> str:
    return f"{x:.6g}" if isinstance(x, float) else str(x)


def _stats_row(table: Table, label: str, stats: dict) -> None:
    table.add_row(label, "  ".join(f"{k} {_fmt(v)}" for k, v in stats.items()))


def _table(title: str) -> Table:
    t = Table(title=title, show_header=False, title_justify="left")
    t.add_column("figure", style="bold")
    t.add_column("value")
    return t


def render_histogram(hist: dict) -> str:
    """One text line per bin: ``[lo, hi)  count  ████``."""
    edges, counts = hist["edges"], hist["counts"]
    peak = max(counts) or 1
    lines = []
    for lo, hi, c in zip(edges, edges[1:], counts):
        bar = "█" * round(BAR_WIDTH * c / peak)
        lines.append(f"{lo:+9.4f} .. {hi:+9.4f} {c:>8} {bar}")
    return "\n".join(lines)


def render_advantages(figures: dict, console: Console) -> None:
    """The `grpo advantages` summary as a rich table plus a histogram."""
    t = _table("grpo advantages")
    cfg = figures["config"]
    t.add_row("estimator", f"{cfg['estimator']} (scale {cfg['scale']}, std {cfg['std']}, eps {cfg['eps']:g})")
    t.add_row("rows", str(figures["rows"]))
    t.add_row("groups", f"{figures['groups']} ({figures['grouped_by']})" if figures["grouped_by"] else str(figures["groups"]))
    t.add_row("group sizes", ", ".join(f"{s}: {c}" for s, c in figures["group_sizes"].items()))
    _stats_row(t, "reward", figures["reward"])
    zv = figures["zero_variance_groups"]
    t.add_row("zero-variance groups", f"{zv['count']} ({zv['share']:.1%}, no learning signal)")
    _stats_row(t, "advantage", figures["advantage"])
    console.print(t)
    console.print("advantage histogram")
    console.print(render_histogram(figures["advantage_histogram"]), markup=False, highlight=False)


def render_objective(figures: dict, console: Console) -> None:
    """The `grpo objective` summary as a rich table."""
    cfg = figures["config"]
    t = _table("grpo objective")
    t.add_row("objective", f"{figures['objective']:.8g}  ({cfg['agg']}; maximise)")
    t.add_row("loss", f"{figures['loss']:.8g}")
    t.add_row("clip", f"eps_low {cfg['epsilon_low']:g}  eps_high {cfg['epsilon_high']:g}  dual {cfg['dual_clip']}  ratio {cfg['ratio_level']}")
    t.add_row("clip fraction", "  ".join(f"{name} {share:.4%}" for name, share in figures["clip_frac"].items()))
    _stats_row(t, "ratio", figures["ratio"])
    kl = f"old (k3) {figures['kl_old']:.6g}"
    if figures["kl_ref"] is not None:
        kl += f"  ref ({cfg['kl']}, {cfg['agg']}) {figures['kl_ref']:.6g}  beta {cfg['beta']:g}"
    t.add_row("KL", kl)
    t.add_row("tokens", str(figures["tokens"]))
    t.add_row("rows", str(figures["rows"]))
    t.add_row("zero-advantage rows", str(figures["zero_advantage_rows"]))
    if figures["clamped_tokens"]:
        t.add_row("clamped log-ratios", f"{figures['clamped_tokens']} tokens (|new - old| > {cfg['logratio_clamp']:g})")
    console.print(t)
