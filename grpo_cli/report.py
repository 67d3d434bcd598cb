"""Summaries: figures as plain data (JSON-ready dicts), rendered by rich on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
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


def advantage_figures(groups, adv: np.ndarray, config) -> dict:
    """Summary of the rewards and advantages of rows read by
    :func:`~grpo_cli.engines.local.read_groups`."""
    g, rewards = groups.index, groups.rewards
    size_values, size_counts = np.unique(g.sizes, return_counts=True)
    zero_var = int(g.count - groups.informative.sum())
    return {
        "rows": len(rewards),
        "groups": g.count,
        "grouped_by": groups.grouped_by,
        "group_sizes": {str(s): int(c) for s, c in zip(size_values.tolist(), size_counts.tolist())},
        "reward": describe(rewards),
        "zero_variance_groups": {"count": zero_var, "share": zero_var / g.count},
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


class BlockSums:
    """Float64 totals of named per-row arrays that arrive in pieces, in bounded memory.

    Rows are added in fixed blocks of ``block`` rows (one pairwise sum per block, then a
    pairwise sum over the block sums), so a total depends on the rows alone, never on how
    they were split into batches.

    >>> sums = BlockSums(block=2)
    >>> sums.add({"x": np.array([1.0, 2.0, 3.0])}); sums.add({"x": np.array([4.0])})
    >>> sums.total("x")
    10.0
    """

    def __init__(self, block: int = 1 << 16):
        self.block = block
        self._pending: dict[str, np.ndarray] = {}
        self._block_sums: dict[str, list[np.ndarray]] = {}

    def add(self, arrays: dict[str, np.ndarray]) -> None:
        for key, values in arrays.items():
            pending = np.concatenate([self._pending.get(key, np.empty(0)), values])
            full = len(pending) - len(pending) % self.block
            if full:
                self._block_sums.setdefault(key, []).append(np.add.reduceat(pending[:full], np.arange(0, full, self.block)))
            self._pending[key] = pending[full:]

    def total(self, key: str) -> float:
        blocks = self._block_sums.get(key, [])
        return float(np.concatenate([*blocks, [self._pending[key].sum()]]).sum()) if blocks else float(self._pending[key].sum())


SUMMED_TERMS = ("objective_sum", "surrogate_sum", "kl_ref_sum")


class ObjectiveSummary:
    """The figures of `grpo objective`, accumulated from per-row terms (see
    :func:`grpo_cli.objective.row_terms`) batch by batch, in row order, in bounded memory.

    Token shares (clip fractions, ratio mean) are over counted (unmasked) tokens.
    """

    def __init__(self) -> None:
        self.sums = BlockSums()
        self.counts = dict.fromkeys(("rows", "counted_rows", "tokens", "clip_low", "clip_high", "dual_clip", "clamped", "zero_advantage_rows"), 0)
        self.ratio_min, self.ratio_max = np.inf, -np.inf
        self.has_kl_ref = False

    def add(self, terms: dict[str, np.ndarray], advantages: np.ndarray) -> None:
        n = terms["n_tokens"]
        counted = n > 0
        safe_n = np.where(counted, n, 1)
        summed = [key for key in SUMMED_TERMS if key in terms]
        self.has_kl_ref = "kl_ref_sum" in terms
        self.sums.add({
            **{key: terms[key] for key in (*summed, "kl_old_sum", "ratio_sum")},
            # S_i / n_i for seq-mean-token-mean (0 for rows without counted tokens)
            **{f"{key}/n": np.where(counted, terms[key] / safe_n, 0.0) for key in summed},
        })
        for key in ("clip_low", "clip_high", "dual_clip", "clamped"):
            self.counts[key] += int(terms[key].sum())
        self.counts["rows"] += len(n)
        self.counts["counted_rows"] += int(counted.sum())
        self.counts["tokens"] += int(n.sum())
        self.counts["zero_advantage_rows"] += int((advantages == 0).sum())
        if counted.any():
            self.ratio_min = min(self.ratio_min, float(terms["ratio_min"][counted].min()))
            self.ratio_max = max(self.ratio_max, float(terms["ratio_max"][counted].max()))

    def figures(self, config) -> dict:
        c = self.counts
        tokens = c["tokens"]

        def share(total: float) -> float:
            return float(total / tokens) if tokens else 0.0

        def agg(key: str) -> float:
            return float(aggregate(self.sums.total(key), self.sums.total(f"{key}/n"), c["rows"], c["counted_rows"],
                                   tokens, config.agg, config.max_length))

        objective = agg("objective_sum")
        return {
            "objective": objective,
            "loss": -objective,
            "surrogate": agg("surrogate_sum"),
            "kl_ref": agg("kl_ref_sum") if self.has_kl_ref else None,
            "kl_old": share(self.sums.total("kl_old_sum")),
            "clip_frac": {"low": share(c["clip_low"]), "high": share(c["clip_high"]), "dual": share(c["dual_clip"])},
            "ratio": {
                "mean": share(self.sums.total("ratio_sum")),
                "min": self.ratio_min if tokens else None,
                "max": self.ratio_max if tokens else None,
            },
            "tokens": tokens,
            "rows": c["rows"],
            "zero_advantage_rows": c["zero_advantage_rows"],
            "clamped_tokens": c["clamped"],
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
