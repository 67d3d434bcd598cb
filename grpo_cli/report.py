"""Summaries: figures as plain data (JSON-ready dicts), rendered by rich on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
from rich.console import Console
from rich.table import Table

from .objective import aggregate

HIST_BINS = 10
BAR_WIDTH = 30


def describe(values: np.ndarray) -> dict:
    """mean / std (population) / min / max of a float array."""
    return {
        "mean": float(np.mean(values)),
        "std": float(np.std(values)),
        "min": float(np.min(values)),
        "max": float(np.max(values)),
    }


def histogram(values: np.ndarray, bins: int = HIST_BINS) -> dict:
    """Equal-width bins over [min, max]: ``edges`` (bins + 1) and ``counts`` (bins)."""
    counts, edges = np.histogram(values, bins=bins)
    return {"edges": edges.tolist(), "counts": counts.tolist()}


def advantage_figures(frame: pl.DataFrame, config, grouped_by: str = "") -> dict:
    """Summary of a pass-1 frame with ``group``, ``reward`` and ``advantage`` columns;
    ``grouped_by`` says where the groups came from."""
    per_group = frame.group_by("group").agg(
        size=pl.len(), spread=pl.col("reward").max() - pl.col("reward").min()
    )
    sizes = per_group.group_by("size").len().sort("size")
    zero_var = int((per_group["spread"] == 0).sum())
    adv = frame["advantage"].to_numpy()
    return {
        "rows": frame.height,
        "groups": per_group.height,
        "grouped_by": grouped_by,
        "group_sizes": {str(s): int(c) for s, c in sizes.iter_rows()},
        "reward": describe(frame["reward"].to_numpy()),
        "zero_variance_groups": {"count": zero_var, "share": zero_var / per_group.height},
        "advantage": describe(adv),
        "advantage_histogram": histogram(adv),
        "config": {"estimator": config.estimator, "scale": config.scale, "std": config.std, "eps": config.eps},
    }


def write_json(figures: dict, path: str) -> None:
    Path(path).write_text(json.dumps(figures, indent=2) + "\n")


def _fmt(x) -> str:
    return f"{x:.6g}" if isinstance(x, float) else str(x)


def _stats_row(table: Table, label: str, stats: dict) -> None:
    table.add_row(label, "  ".join(f"{k} {_fmt(v)}" for k, v in stats.items()))


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
    t = Table(title="grpo advantages", show_header=False, title_justify="left")
    t.add_column("figure", style="bold")
    t.add_column("value")
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


def objective_figures(terms: dict[str, np.ndarray], adv: np.ndarray, config) -> dict:
    """Summary of per-row objective terms (see :func:`grpo_cli.objective.row_terms`).

    Token shares (clip fractions, ratio mean) are over counted (unmasked) tokens.
    """
    n = terms["n_tokens"]
    tokens = int(n.sum())
    counted_rows = n > 0

    def share(key: str) -> float:
        return float(terms[key].sum() / tokens) if tokens else 0.0

    def agg(key: str) -> float:
        return aggregate(terms[key], n, config.agg, config.max_length)

    objective = agg("objective_sum")
    return {
        "objective": objective,
        "loss": -objective,
        "surrogate": agg("surrogate_sum"),
        "kl_ref": agg("kl_ref_sum") if "kl_ref_sum" in terms else None,
        "kl_old": share("kl_old_sum"),
        "clip_frac": {"low": share("clip_low"), "high": share("clip_high"), "dual": share("dual_clip")},
        "ratio": {
            "mean": share("ratio_sum"),
            "min": float(terms["ratio_min"][counted_rows].min()) if tokens else None,
            "max": float(terms["ratio_max"][counted_rows].max()) if tokens else None,
        },
        "tokens": tokens,
        "rows": len(n),
        "zero_advantage_rows": int((adv == 0).sum()),
        "clamped_tokens": int(terms["clamped"].sum()),
        "config": {
            "agg": config.agg, "epsilon_low": config.eps_low, "epsilon_high": config.eps_high,
            "dual_clip": config.dual_clip, "ratio_level": config.ratio_level, "beta": config.beta,
            "kl": config.kl, "max_length": config.max_length, "logratio_clamp": config.logratio_clamp,
        },
    }


def render_objective(figures: dict, console: Console) -> None:
    """The `grpo objective` summary as a rich table."""
    cfg = figures["config"]
    t = Table(title="grpo objective", show_header=False, title_justify="left")
    t.add_column("figure", style="bold")
    t.add_column("value")
    t.add_row("objective", f"{figures['objective']:.8g}  ({cfg['agg']}; maximise)")
    t.add_row("loss", f"{figures['loss']:.8g}")
    t.add_row("clip", f"eps_low {cfg['epsilon_low']:g}  eps_high {cfg['epsilon_high']:g}  dual {cfg['dual_clip']}  ratio {cfg['ratio_level']}")
    cf = figures["clip_frac"]
    t.add_row("clip fraction", f"low {cf['low']:.4%}  high {cf['high']:.4%}  dual {cf['dual']:.4%}")
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
