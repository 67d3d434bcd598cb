"""Rendering: the figures of :mod:`grpo_cli.summaries` as rich tables on stderr (as JSON:
:func:`grpo_cli.files.json_text`). Nothing here computes a figure."""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

BAR_WIDTH = 30
VALUE_WIDTH = 50  # the value column; with the longest label the table fits 80 columns


def _fmt(x, spec: str = ".6g") -> str:
    """A figure for a table: a float as ``spec`` says; ``null`` for a figure with no value
    (one beyond float64)."""
    if x is None:
        return "null"
    return format(x, spec) if isinstance(x, float) else str(x)


def _lines(items, width: int = VALUE_WIDTH) -> str:
    """``items`` joined by two spaces, broken between items into lines of at most ``width``
    characters (an item is never split), so the table never wraps a value mid-figure.

    >>> print(_lines(["mean 1.5", "std 0.25", "min -1e+308"], width=20))
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


def _stats_row(table: Table, label: str, stats: dict) -> None:
    table.add_row(label, _lines(f"{k} {_fmt(v)}" for k, v in stats.items()))


def _table(title: str) -> Table:
    t = Table(title=title, show_header=False, title_justify="left")
    t.add_column("figure", style="bold")
    t.add_column("value")
    return t


def _roles(columns: dict) -> str:
    """``role=column`` for each column that plays a role."""
    return _lines(f"{role}={name}" for role, name in columns.items() if name is not None)


def _options(cfg: dict) -> list[str]:
    """An estimator's options as ``name value`` items: scale, std and eps where they apply,
    the others where they are not at their defaults."""
    scaled = cfg["scale"] != "none"
    whiten = cfg["whiten_eps"] is not None
    shown = {"scale": cfg["scale"], "std": cfg["std"] if scaled else None, "eps": cfg["eps"] if scaled else None,
             "gamma": cfg["gamma"], "lambda": cfg["lam"],
             "singleton": cfg["singleton"] if cfg["singleton"] != "zero" else None,
             "reward weights": cfg["reward_weights"] and ",".join(f"{w:g}" for w in cfg["reward_weights"]),
             "multi-reward": cfg["multi_reward"] if cfg["reward_weights"] or cfg["multi_reward"] != "sum-then-normalize" else None,
             "nulls": "error" if cfg["on_null"] == "error" else None,
             "reward clip": cfg["reward_clip"] and "[{:g}, {:g}]".format(*cfg["reward_clip"]),
             "kl in reward": cfg["kl_in_reward"] is not None and f"{cfg['kl_in_reward']:g} ({cfg['kl']})",
             "whitened": whiten and f"{cfg['whiten_std']} std, eps {cfg['whiten_eps']:g} at {cfg['whiten_eps_at']}"}
    return [f"{k} {_fmt(v)}" for k, v in shown.items() if v is not None and v is not False]


def _advantages_from(source: dict) -> str:
    if "column" in source:
        return f"column {source['column']}" + (" (per token)" if source["per_token"] else "")
    return _lines([f"estimator {source['estimator']}", *_options(source)])


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
    return "\n".join(
        f"  {lo:>{pad}} .. {hi:>{pad}} {c:>8} {'█' * round(BAR_WIDTH * c / peak)}"
        for (lo, hi), c in zip(cells, counts)
    )


def render_advantages(figures: dict, console: Console) -> None:
    """The `grpo advantages` summary as a rich table plus a histogram."""
    t = _table("grpo advantages")
    cfg = figures["config"]
    t.add_row("estimator", _lines([cfg["estimator"], *_options(cfg)]))
    if cfg["preset"]:
        t.add_row("preset", cfg["preset"])
    t.add_row("columns", _roles(figures["columns"]))
    t.add_row("rows", str(figures["rows"]))
    if figures["unscorable_rows"]:
        t.add_row("unscorable rows", f"{figures['unscorable_rows']} (every reward null: advantage 0)")
    t.add_row("groups", f"{figures['groups']} ({figures['grouped_by']})" if figures["grouped_by"] else str(figures["groups"]))
    t.add_row("group sizes", ", ".join(f"{s}: {c}" for s, c in figures["group_sizes"].items()))
    _stats_row(t, "reward", figures["reward"])
    zv = figures["zero_variance_groups"]
    t.add_row("zero-variance groups", f"{zv['count']} ({zv['share']:.1%}, no learning signal)")
    if "tokens" in figures:
        t.add_row("tokens", str(figures["tokens"]))
    _stats_row(t, "advantage" if "tokens" not in figures else "token advantage", figures["advantage"])
    console.print(t)
    if figures["advantage_histogram"] is not None:
        console.print("advantage histogram")
        console.print(render_histogram(figures["advantage_histogram"]), markup=False, highlight=False)


def _rollout_lines(r: dict) -> list[str]:
    """The train/rollout mismatch and what the correction did, in a few words each."""
    if not r["tokens"]:
        return ["no counted tokens"]
    lines = [f"|old - rollout| mean {_fmt(r['abs_diff_mean'])}  max {_fmt(r['abs_diff_max'])}",
             f"KL(rollout || old) k1 {_fmt(r['kl_k1'])}  k3 {_fmt(r['kl_k3'])}"]
    if r["is"] is not None:
        lines.append(f"IS weight mean {_fmt(r['is']['weight_mean'])}  masked {r['is']['masked_tokens']} tokens  "
                     f"truncated {r['is']['truncated_tokens']} tokens")
    if r["rejected"] is not None:
        lines.append(f"rejected {r['rejected']['tokens']} tokens ({r['rejected']['token_share']:.4%}) in {r['rejected']['rows']} rows")
    return lines


def render_objective(figures: dict, console: Console) -> None:
    """The `grpo objective` summary as a rich table."""
    cfg = figures["config"]
    t = _table("grpo objective")
    t.add_row("objective", f"{_fmt(figures['objective'], '.8g')}  ({cfg['agg']}; maximise)")
    if cfg["preset"]:
        t.add_row("preset", cfg["preset"])
    t.add_row("loss", f"{_fmt(figures['loss'], '.8g')}  ({cfg['loss']})")
    options = {"eps_low": cfg["epsilon_low"], "eps_high": cfg["epsilon_high"], "dual": cfg["dual_clip"], "delta": cfg["delta"],
               "tau_pos": cfg["tau_pos"], "tau_neg": cfg["tau_neg"], "ratio": cfg["ratio_level"]}
    t.add_row("loss options", _lines(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in options.items() if v is not None))
    if figures["clip_frac"]:
        t.add_row("clip fraction", _lines(f"{name} {share:.4%}" for name, share in figures["clip_frac"].items()))
    _stats_row(t, "ratio", figures["ratio"])
    kl = [f"old (k3) {_fmt(figures['kl_old'])}"]
    if figures["kl_ref"] is not None:
        kl += [f"ref ({cfg['kl']}, {cfg['agg']}) {_fmt(figures['kl_ref'])}", f"beta {cfg['beta']:g}"]
    t.add_row("KL", _lines(kl))
    if figures["rollout"] is not None:
        t.add_row("rollout mismatch", _lines(_rollout_lines(figures["rollout"])))
    t.add_row("tokens", str(figures["tokens"]))
    t.add_row("rows", str(figures["rows"]))
    t.add_row("zero-advantage rows", str(figures["zero_advantage_rows"]))
    t.add_row("advantages", _advantages_from(cfg["advantages"]))
    t.add_row("columns", _roles(figures["columns"]))
    if figures["unused_columns"]:
        t.add_row("not used", ", ".join(figures["unused_columns"]))
    if figures["clamped_tokens"]:
        t.add_row("clamped log-ratios", f"{figures['clamped_tokens']} tokens (|new - old| > {cfg['logratio_clamp']:g})")
    console.print(t)


def _share(count: int, share: float) -> str:
    return f"{count} ({share:.4%})"


def render_mismatch(figures: dict, console: Console) -> None:
    """The `grpo mismatch` report: a table, the breakdowns, two histograms and the worst rows."""
    f = figures
    t = _table("grpo mismatch")
    t.add_row("rows, tokens", f"{f['rows']}, {f['tokens']}")
    if f["tokens"]:
        t.add_row("|old - rollout|", f"mean {_fmt(f['abs_diff_mean'])}  max {_fmt(f['abs_diff_max'])}")
        t.add_row("KL(rollout || old)", f"k1 {_fmt(f['kl_k1'])}  k3 {_fmt(f['kl_k3'])}")
        t.add_row("perplexity", _lines(f"{k} {_fmt(f[key])}" for k, key in (("train", "train_ppl"), ("rollout", "rollout_ppl"),
                                                                              ("ratio", "ppl_ratio"))))
        t.add_row("chi-square", f"token {_fmt(f['chi2_token'])}  sequence {_fmt(f['chi2_seq'])}")
        t.add_row("ESS (share)", _lines(f"{k} {_fmt(f[key]['count'])} ({_fmt(f[key]['share'])})" for k, key in (("token", "ess_token"),
                                                                                                              ("sequence", "ess_seq"))))
        for name, label in (("cap", "cap {value:g} touches"), ("mask", "mask {value} touches")):
            if f[name] is not None:
                m = f[name]
                t.add_row(label.format(value=m["value"]), _lines([f"tokens {_share(m['tokens'], m['token_share'])}",
                                                                 f"rows {_share(m['rows'], m['row_share'])}",
                                                                 f"sequence weights {_share(m['sequence_rows'], m['sequence_row_share'])}"]))
    t.add_row("columns", _roles(f["columns"]))
    console.print(t)
    for key, title in (("by_position", "by token position"), ("by_length", "by response length (tokens)")):
        if f[key]:
            b = Table(title=title, title_justify="left")
            for column in ("from", "to", "rows", "tokens", "|old - rollout|", "k1", "k3"):
                b.add_column(column, justify="right")
            for e in f[key]:
                b.add_row(str(e["first"]), "-" if e["last"] is None else str(e["last"]), str(e["rows"]), str(e["tokens"]),
                          f"{e['abs_diff_mean']:.4g}", f"{e['kl_k1']:.4g}", f"{e['kl_k3']:.4g}")
            console.print(b)
    for key, title in (("abs_diff_histogram", "|old - rollout| per token"), ("log_weight_histogram", "sequence log-weight sum(old - rollout) per row")):
        console.print(title)
        console.print(render_histogram(f[key]), markup=False, highlight=False)
    if f["worst_rows"]:
        w = Table(title="worst rows (mean k3)", title_justify="left")
        for column in ("row", "tokens", "k3", "|old - rollout|", "log-weight"):
            w.add_column(column, justify="left" if column == "row" else "right")
        for e in f["worst_rows"]:
            w.add_row(e["row"], str(e["tokens"]), f"{e['kl_k3']:.4g}", f"{e['abs_diff_mean']:.4g}", f"{e['log_weight']:.4g}")
        console.print(w)


def render_inspect(figures: dict, console: Console) -> None:
    """The `grpo inspect` report: roles and why, then the figures and three histograms."""
    f = figures
    roles = Table(title="grpo inspect: columns", title_justify="left")
    for column in ("role", "column", "why", "option"):
        roles.add_column(column)
    for role, r in f["columns"].items():
        roles.add_row(role, r["column"] or "-", r["why"], "--" + r["option"].replace("_", "-"))
    console.print(roles)
    t = _table("figures")
    t.add_row("rows", str(f["rows"]))
    t.add_row("layout", f["layout"])
    if f["reward"] is not None:
        t.add_row("groups", f"{f['groups']} ({f['grouped_by']})")
        t.add_row("group sizes", _lines(f"{size}: {count}" for size, count in f["group_sizes"].items()))
        _stats_row(t, "reward", f["reward"])
        t.add_row("zero-variance groups", f"{f['zero_variance_groups']['count']} ({f['zero_variance_groups']['share']:.2%})")
        t.add_row("unscorable rows", str(f["unscorable_rows"]))
        _stats_row(t, "advantage (grpo)", f["advantage"])
    if f["tokens"] is not None:
        k = f["tokens"]
        t.add_row("tokens per row", f"min {k['min']}  median {k['median']}  p99 {k['p99']}  max {k['max']}")
        t.add_row("tokens", f"{k['total']}  ({k['rows_at_max']} rows at the max)")
    if f["truncated_rows"] is not None:
        t.add_row("truncated rows", str(f["truncated_rows"]))
    nulls = [f"{name} {n}" for name, n in f["nulls"].items() if n]
    t.add_row("nulls", _lines(nulls) if nulls else "none")
    console.print(t)
    for key, title in (("reward_histogram", "rewards"), ("length_histogram", "tokens per row"), ("advantage_histogram", "advantages (grpo)")):
        if f[key] is not None:
            console.print(title)
            console.print(render_histogram(f[key]), markup=False, highlight=False)


def render_compare(figures: dict, console: Console) -> None:
    """The `grpo compare` figures: each estimator's spread, then each pair's agreement."""
    f = figures
    t = Table(title=f"grpo compare: {f['rows']} rows, {f['groups']} groups", title_justify="left")
    for column in ("estimator", "mean", "std", "min", "max"):
        t.add_column(column, justify="left" if column == "estimator" else "right")
    for label, d in f["estimators"].items():
        t.add_row(label, *(f"{d[k]:.6g}" for k in ("mean", "std", "min", "max")))
    console.print(t)
    p = Table(title="pairs", title_justify="left")
    for column in ("pair", "rank correlation", "sign flips"):
        p.add_column(column, justify="left" if column == "pair" else "right")
    for pair, rho in f["rank_correlation"].items():
        p.add_row(pair, "-" if rho is None else f"{rho:.6f}", f"{f['sign_flips'][pair]:.4%}")
    console.print(p)
    if f["most_affected_groups"]:
        g = Table(title="most affected groups (largest difference between two estimators)", title_justify="left")
        for column in ("group", "rows", "max |difference|"):
            g.add_column(column, justify="left" if column == "group" else "right")
        for e in f["most_affected_groups"]:
            g.add_row(str(e["group"]), str(e["rows"]), f"{e['max_abs_difference']:.6g}")
        console.print(g)


def render_filter(figures: dict, console: Console) -> None:
    """The `grpo filter` summary: kept, dropped, and what each rule did."""
    f = figures
    t = _table("grpo filter")
    t.add_row("kept", f"{f['kept']['rows']} of {f['rows']} rows, {f['kept']['groups']} of {f['groups']} groups")
    t.add_row("dropped", f"{f['dropped']['rows']} rows, {f['dropped']['groups']} groups")
    for name, label in (("zero_variance", "zero variance drops"), ("keep_if", f"keep-if {f['config']['keep_if']} drops")):
        if f[name] is not None:
            t.add_row(label, f"{f[name]['groups']} groups ({f[name]['rows']} rows)")
    if f["truncated"] is not None:
        t.add_row(f"truncated ({f['truncated']['action']})", f"{f['truncated']['rows']} rows")
    if f["overlong"] is not None:
        o = f["overlong"]
        t.add_row("overlong penalty", f"{o['rows']} rows  mean {o['penalty_mean']:.4g}  min {o['penalty_min']:.4g}")
    t.add_row("columns", _roles(f["columns"]))
    if f["unused_columns"]:
        t.add_row("not used", ", ".join(f["unused_columns"]))
    console.print(t)


def render_presets(presets: dict, console: Console) -> None:
    """What each preset sets: one row per option, one column per preset ("-": this tool's
    default), then where each was read and what it does not model."""
    t = Table(title="grpo presets", title_justify="left")
    t.add_column("option", style="bold")
    for name in presets:
        t.add_column(name, overflow="fold")
    for part in ("advantage", "objective"):
        for option in dict.fromkeys(k for p in presets.values() for k in getattr(p, part)):
            values = [getattr(p, part).get(option, "-") for p in presets.values()]
            t.add_row(f"--{option.replace('_', '-')}", *("off" if v is None else _fmt(v) for v in values))
    console.print(t)
    for p in presets.values():
        console.print(f"{p.name}: read from {p.source}." + (f" Not modelled: {p.differs}." if p.differs else ""),
                      markup=False, highlight=False)
