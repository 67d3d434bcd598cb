"""The page of `grpo report`: one HTML file, each section a figure and the numbers behind it.

Nothing here computes a figure: it draws and tabulates the numbers of
:mod:`grpo_cli.commands.report` (those of `grpo inspect`, `compare`, `mismatch` and
`objective`). Figures are drawn by matplotlib (imported here only) on its ``Figure`` directly,
never through pyplot: PNG by Agg, SVG by its SVG backend, no GUI backend, and a notebook's
backend and settings are left as they were. They are embedded as SVG, or as PNG where they
hold more than :data:`POINTS_AS_PNG` points; the page loads nothing else. Every text from the
data (file, column, prompt and batch names) is escaped, and drawn as plain text (no mathtext).

Each figure is one task, a drawing function of plain numbers (:class:`Drawing`): with several
workers (on Linux) the figures are drawn at once, in processes forked from the run after its
passes, matplotlib loaded on a thread while they read; the page is the same byte for byte.
"""

from __future__ import annotations

import base64
import html
import importlib.util
import io
import math
import multiprocessing
import re
import sys
import threading
import warnings
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable

import numpy as np

from .errors import GrpoError
from .report import fmt

EXTRA = "report"  # the optional dependencies that draw: grpo-cli[report]
POINTS_AS_PNG = 5000
RC = {  # matplotlib's settings while a figure is drawn; SVG text kept as text in the page's font (half the bytes of glyph outlines)
    "svg.hashsalt": "grpo-report",
    "svg.fonttype": "none",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "text.parse_math": False,
}
SECTIONS = {  # id: title, in the page's order
    "file": "The file",
    "rewards": "Rewards",
    "advantages": "Advantages",
    "lengths": "Response lengths",
    "mismatch": "Train/inference mismatch",
    "objective": "Objective diagnostics",
}
STYLE = """\
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d1d1f;margin:0 auto;max-width:1180px;padding:0 16px 48px}
h1{font-size:1.5rem;overflow-wrap:anywhere}h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:40px}
h3{font-size:1rem;margin:16px 0 4px}nav a{margin-right:12px;white-space:nowrap}
.row{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,440px),1fr));gap:16px;align-items:start}
figure{margin:0;min-width:0}figure img{display:block;width:100%;height:auto}
.numbers{overflow-x:auto;max-width:100%;max-height:28em;overflow-y:auto}
table{border-collapse:collapse;font-size:13px;font-variant-numeric:tabular-nums}
th,td{padding:3px 10px;border-bottom:1px solid #e4e4e4;text-align:left;vertical-align:top;overflow-wrap:break-word}
td.n{text-align:right;white-space:nowrap}
th{background:#f6f6f6;position:sticky;top:0}
"""


def check_plotting() -> None:
    """Refuse to run without matplotlib, saying which extra to install."""
    if importlib.util.find_spec("matplotlib") is None:
        raise GrpoError(f"`grpo report` draws its figures with matplotlib, which is not installed: pip install 'grpo-cli[{EXTRA}]'")


def prepare() -> None:
    """Import matplotlib, its SVG and PNG backends and its fonts (a drawing process's fixed cost)."""
    from matplotlib import font_manager
    from matplotlib.backends import backend_agg, backend_svg  # noqa: F401
    from matplotlib.figure import Figure  # noqa: F401

    font_manager.findfont(font_manager.FontProperties())


class Drawing:
    """The page's figures, each a task drawn when the page is made (:meth:`page`), matplotlib
    loading on a thread from the start (a run makes it as it starts, so the import overlaps
    the passes).

    On Linux with ``workers`` > 1 the figures are drawn at once in up to ``workers`` processes
    forked from this one (matplotlib already loaded: no import, no start-up); elsewhere, or if
    no process can start, here one after another. The page is the same byte for byte.
    """

    def __init__(self, workers: int = 1):
        self.workers = workers
        self._tasks: list[tuple] = []
        self._loading = threading.Thread(target=prepare, daemon=True)
        self._loading.start()

    def figure(self, draw: Callable[..., None], *data: Any, caption: str, points: int = 0, height: float = 3.0, rows: int = 1) -> str:
        """The marker of the page's ``<figure>`` of ``draw(axes, *data)`` (one axes, or
        ``rows`` sharing x; ``points``: how many it draws)."""
        self._tasks.append((draw, data, caption, points, height, rows))
        return f"<!--figure {len(self._tasks) - 1}-->"

    def page(self, text: str) -> str:
        """``text`` with each figure's marker replaced by the figure."""
        self._loading.join()
        drawn = self._draw_all()
        return re.sub(r"<!--figure (\d+)-->", lambda m: drawn[int(m[1])], text)  # the data's text is escaped: no marker in it

    def _draw_all(self) -> list[str]:
        workers = min(self.workers, len(self._tasks))
        if workers > 1 and sys.platform == "linux":  # fork: the children have matplotlib; the passes' threads are idle
            try:
                with warnings.catch_warnings(), ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
                    warnings.filterwarnings("ignore", r"This process .* is multi-threaded", DeprecationWarning)  # Python 3.12+: idle threads, known
                    return list(pool.map(_drawn, *zip(*self._tasks)))
            except (OSError, BrokenProcessPool):  # no process could start, or one died: drawn here
                pass
        return [_drawn(*task) for task in self._tasks]


def _drawn(draw: Callable[..., None], data: tuple, caption: str, points: int, height: float, rows: int) -> str:
    """A figure of ``draw(axes, *data)`` as an image inside the page: SVG, or PNG above
    :data:`POINTS_AS_PNG` points."""
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    with rc_context(RC):  # type: ignore[arg-type]  # matplotlib types its keys as literals
        fig = Figure(figsize=(5.6, height), layout="constrained")
        draw(fig.subplots(rows, 1, sharex=True), *data)
        out = io.BytesIO()
        png = points > POINTS_AS_PNG
        fig.savefig(out, format="png" if png else "svg", dpi=144, metadata={} if png else {"Date": None})
    kind = "png" if png else "svg+xml"
    image = base64.b64encode(out.getvalue()).decode()
    return (
        f'<figure><img alt="{html.escape(caption)}" src="data:image/{kind};base64,{image}"><figcaption>{html.escape(caption)}</figcaption></figure>'
    )


def sections(figures: dict) -> list[str]:
    """The sections the figures give (the input had what each needs), in the page's order."""
    has = {
        "file": True,
        "rewards": figures["inspect"]["reward"] is not None,
        "advantages": "compare" in figures,
        "lengths": figures["inspect"]["tokens"] is not None,
        "mismatch": "mismatch" in figures,
        "objective": "objective" in figures,
    }
    return [name for name in SECTIONS if has[name]]


def page(figures: dict, name: str, points: tuple[Any, Any] | None = None, drawing: Drawing | None = None) -> str:
    """The HTML page of the figures of input ``name`` (``points``: each scored row's length
    and reward, drawn against each other), its figures drawn by ``drawing`` (default: here)."""
    d = drawing or Drawing()
    shown = sections(figures)
    draw: dict[str, Callable[[dict, Drawing], str]] = {
        "file": _file,
        "rewards": _rewards,
        "advantages": _advantages,
        "lengths": lambda f, d: _lengths(f, d, points),
        "mismatch": _mismatch,
        "objective": _objective,
    }
    nav = " ".join(f'<a href="#{s}">{SECTIONS[s]}</a>' for s in shown)
    body = "\n".join(f'<section id="{s}">\n<h2>{SECTIONS[s]}</h2>\n{draw[s](figures, d)}\n</section>' for s in shown)
    title = html.escape(f"grpo report: {name}")
    return d.page(
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>{title}</title>\n<style>\n{STYLE}</style>\n</head>\n'
        f"<body>\n<h1>{title}</h1>\n<nav>{nav}</nav>\n{body}\n</body>\n</html>\n"
    )


# -- pieces of HTML --------------------------------------------------------------------------


def _text(x: Any) -> str:
    """A cell: a figure formatted, any text escaped."""
    if isinstance(x, float):
        return html.escape(fmt(x))
    return html.escape("null" if x is None else str(x))


def _cell(x: Any) -> str:
    """A cell; a number is right-aligned."""
    number = isinstance(x, (int, float)) and not isinstance(x, bool)
    return f'<td class="n">{_text(x)}</td>' if number else f"<td>{_text(x)}</td>"


def table(header: list[str] | None, rows: list[list[Any]]) -> str:
    """A small table of the numbers behind a figure (scrolls inside its box, never the page)."""
    head = "<tr>" + "".join(f"<th>{_text(h)}</th>" for h in header) + "</tr>" if header else ""
    body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
    return f'<div class="numbers"><table>{head}{body}</table></div>'


def _row(*parts: str) -> str:
    return '<div class="row">' + "".join(f"<div>{p}</div>" for p in parts if p) + "</div>"


def _edges(edges: list) -> list:
    """Histogram edges as shown: an open end (null in the figures) as -inf or inf."""
    return ["-inf" if e is None and k == 0 else "inf" if e is None else e for k, e in enumerate(edges)]


def _histogram_rows(h: dict) -> list[list[Any]]:
    e = _edges(h["edges"])
    return [[lo, hi, c] for lo, hi, c in zip(e, e[1:], h["counts"])]


def _stats(label: str, d: dict) -> list[Any]:
    return [label, *(d[k] for k in ("mean", "std", "min", "max"))]


def _batch_name(column: str | None) -> str:
    """What a batch is: the batch column's name, or an input file."""
    return "input file" if column is None else column


def _nan(values: list) -> list[float]:
    return [math.nan if v is None else v for v in values]


# -- the figures: each draws plain numbers on its axes (a task of :class:`Drawing`) -----------


def _stairs(ax, h: dict, xlabel: str) -> None:
    """A histogram of equal-width bins (``edges``, ``counts``), as the figures hold it."""
    ax.stairs(h["counts"], h["edges"], fill=True, alpha=0.7)
    ax.set(xlabel=xlabel, ylabel="rows")


def _bars(ax, h: dict, xlabel: str, ylabel: str) -> None:
    """A histogram of uneven (or open-ended) edges, one bar per bin."""
    e = [x if isinstance(x, str) else f"{x:g}" for x in _edges(h["edges"])]
    labels = [f"{lo} to {hi}" for lo, hi in zip(e, e[1:])]
    ax.bar(range(len(labels)), h["counts"], alpha=0.7)
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
    ax.set(xlabel=xlabel, ylabel=ylabel)


def _group_sizes(ax, sizes: dict) -> None:
    ax.bar([str(s) for s in sizes], list(sizes.values()), alpha=0.7)
    ax.set(xlabel="rows in the group", ylabel="groups")


def _reward_per_batch(axes, batches: list[dict], q: dict, name: str) -> None:
    """Above: each batch's reward mean and quantiles; below: its share of zero-variance groups."""
    top, bottom = axes
    x = list(range(len(batches)))
    top.fill_between(x, _nan(q["q10"]), _nan(q["q90"]), alpha=0.2, label="q10-q90")
    top.fill_between(x, _nan(q["q25"]), _nan(q["q75"]), alpha=0.3, label="q25-q75")
    top.plot(x, _nan([b["reward"]["mean"] for b in batches]), label="mean")
    top.plot(x, _nan(q["q50"]), linestyle="--", label="median")
    top.set(ylabel="reward")
    top.legend(fontsize=7)
    bottom.plot(x, [b["zero_variance_groups"]["share"] for b in batches], marker=".")
    bottom.set(ylabel="zero-variance share", xlabel=name)
    _value_ticks(bottom, [b["batch"] for b in batches])


def _value_ticks(ax, values: list) -> None:
    """At most a dozen of the ``by`` column's values as ticks."""
    step = max(1, math.ceil(len(values) / 12))
    ax.set_xticks(
        range(0, len(values), step),
        [str(v) for v in values[::step]],
        rotation=45 if len(values) > 6 else 0,
        ha="right" if len(values) > 6 else "center",
    )


def _advantage_stairs(ax, histograms: dict) -> None:
    for label, h in histograms.items():
        ax.stairs(h["counts"], h["edges"], label=label, linewidth=1.4)
    ax.set(xlabel="advantage", ylabel="rows")
    ax.legend(fontsize=7)


def _reward_against_length(ax, points: tuple[Any, Any], buckets: list[dict]) -> None:
    """Each scored row (a density above :data:`POINTS_AS_PNG` rows) and the mean per length bucket."""
    if len(points[0]) > POINTS_AS_PNG:  # a density: its drawing costs the same for any number of rows
        _density(ax, *points)
    else:
        ax.scatter(*points, s=6, alpha=0.3, linewidths=0)
    ax.plot(
        [(e["first"] + e["last"]) / 2 for e in buckets], [e["reward_mean"] for e in buckets], marker="o", color="C1", label="mean per length bucket"
    )
    ax.set(xlabel="valid tokens", ylabel="reward")
    ax.legend(fontsize=7)


def _density(ax, x: np.ndarray, y: np.ndarray) -> None:
    """Rows counted on a 64 x 32 grid of (x, y), drawn as an image (log shades; empty cells blank)."""
    from matplotlib.colors import LogNorm

    counts, xe, ye = np.histogram2d(x, y, bins=(64, 32))
    shown = np.ma.masked_equal(counts.T, 0)
    ax.imshow(shown, origin="lower", extent=(xe[0], xe[-1], ye[0], ye[-1]), aspect="auto", cmap="Blues", norm=LogNorm(), interpolation="nearest")


def _mismatch_by(ax, buckets: list[dict], what: str) -> None:
    x = [e["first"] for e in buckets]
    ax.plot(x, [e["abs_diff_mean"] for e in buckets], marker="o", label="|old - rollout|")
    ax.plot(x, [e["kl_k3"] for e in buckets], marker="s", label="KL k3")
    ax.set_xscale("log", base=2)
    ax.set(xlabel=f"{what} (from, power-of-two buckets)", ylabel="mean per token")
    ax.legend(fontsize=7)


def _clip_per_batch(ax, by: dict, name: str) -> None:
    x = list(range(len(by["batches"])))
    for flag, shares in by["clip_frac"].items():
        ax.plot(x, shares, marker=".", label=flag)
    ax.set(xlabel=name, ylabel="clip fraction")
    ax.legend(fontsize=7)
    _value_ticks(ax, by["batches"])


# -- the sections ----------------------------------------------------------------------------


def _file(f: dict, d: Drawing) -> str:
    i = f["inspect"]
    numbers = [["rows", i["rows"]], ["layout", i["layout"]]]
    if i["reward"] is not None:
        numbers += [["groups", f"{i['groups']} ({i['grouped_by']})"], ["unscorable rows", i["unscorable_rows"]]]
    if i["tokens"] is not None:
        numbers += [["tokens", i["tokens"]["total"]]]
    numbers += [[f"nulls in {column}", n] for column, n in i["nulls"].items() if n]
    roles = table(
        ["role", "column", "why", "option"],
        [[role, r["column"] or "-", r["why"], "--" + r["option"].replace("_", "-")] for role, r in i["columns"].items()],
    )
    figure = ""
    if i["reward"] is not None:
        sizes = i["group_sizes"]
        figure = d.figure(_group_sizes, sizes, caption="group sizes") + table(["group size", "groups"], [[s, c] for s, c in sizes.items()])
    return _row(figure, table(None, numbers)) + "<h3>columns and their roles (as <code>grpo inspect</code>)</h3>" + roles


def _rewards(f: dict, d: Drawing) -> str:
    i = f["inspect"]
    z = i["zero_variance_groups"]
    numbers = [_stats("reward", i["reward"])]
    out = _row(
        d.figure(_stairs, i["reward_histogram"], "reward", caption="reward per scored row"),
        table(["", "mean", "std", "min", "max"], numbers)
        + table(None, [["zero-variance groups", f"{z['count']} ({z['share']:.2%})"]])
        + table(["from", "to", "rows"], _histogram_rows(i["reward_histogram"])),
    )
    by = f.get("by")
    if by:
        batches = by["batches"]
        name = _batch_name(by["column"])
        q = {k: [b["reward_quantiles"][k] for b in batches] for k in ("q10", "q25", "q50", "q75", "q90")}
        figure = d.figure(_reward_per_batch, batches, q, name, caption=f"reward and zero-variance groups per {name}", height=4.2, rows=2)
        header = [name, "rows", "mean", *q, "groups", "zero-variance share"]
        rows = [
            [b["batch"], b["rows"], b["reward"]["mean"], *(q[k][n] for k in q), b["groups"], b["zero_variance_groups"]["share"]]
            for n, b in enumerate(batches)
        ]
        out += f"<h3>per {html.escape(name)}</h3>" + _row(figure, table(header, rows))
    return out


def _advantages(f: dict, d: Drawing) -> str:
    c = f["compare"]
    spread = table(["estimator", "mean", "std", "min", "max"], [_stats(label, s) for label, s in c["estimators"].items()])
    pairs = table(["pair", "rank correlation", "sign flips"], [[p, rho, f"{c['sign_flips'][p]:.4%}"] for p, rho in c["rank_correlation"].items()])
    caption = f"advantages, {c['rows']} rows in {c['groups']} groups (as grpo compare)"
    return _row(d.figure(_advantage_stairs, f["advantage_histograms"], caption=caption), spread + pairs)


def _lengths(f: dict, d: Drawing, points: tuple[Any, Any] | None) -> str:
    i, k = f["inspect"], f["inspect"]["tokens"]
    numbers = table(None, [["tokens", k["total"]], *([key.replace("_", " "), k[key]] for key in ("min", "median", "p99", "max", "rows_at_max"))])
    histogram = d.figure(_stairs, i["length_histogram"], "tokens", caption="valid tokens per row") if i["length_histogram"] else ""
    out = _row(histogram, numbers)
    b = f.get("reward_by_length")
    if b and points is not None:
        rows = [[e["first"], e["last"], e["rows"], e["reward_mean"]] for e in b]
        figure = d.figure(_reward_against_length, points, b, caption="reward of each scored row against its length", points=len(points[0]))
        out += "<h3>reward against length</h3>" + _row(figure, table(["from", "to", "rows", "mean reward"], rows))
    return out


def _mismatch(f: dict, d: Drawing) -> str:
    m = f["mismatch"]
    if not m["tokens"]:
        return table(None, [["rows", m["rows"]], ["tokens", 0]])
    numbers = table(
        None,
        [
            ["rows, tokens", f"{m['rows']}, {m['tokens']}"],
            ["|old - rollout| mean, max", f"{fmt(m['abs_diff_mean'])}, {fmt(m['abs_diff_max'])}"],
            ["KL(rollout || old) k1, k3", f"{fmt(m['kl_k1'])}, {fmt(m['kl_k3'])}"],
            ["chi-square token, sequence", f"{fmt(m['chi2_token'])}, {fmt(m['chi2_seq'])}"],
            ["ESS share token, sequence", f"{fmt(m['ess_token']['share'])}, {fmt(m['ess_seq']['share'])}"],
        ],
    )
    out = ""
    for key, what in (("by_position", "token position"), ("by_length", "response length")):
        b = m[key]
        rows = [[e["first"], e["last"] or "-", e["rows"], e["tokens"], e["abs_diff_mean"], e["kl_k1"], e["kl_k3"]] for e in b]
        out += f"<h3>by {what}</h3>" + _row(
            d.figure(_mismatch_by, b, what, caption=f"mismatch by {what}"),
            table(["from", "to", "rows", "tokens", "|old - rollout|", "k1", "k3"], rows),
        )
    weights = d.figure(_bars, m["log_weight_histogram"], "log weight", "rows", caption="sequence log importance weight sum(old - rollout) per row")
    diffs = d.figure(_bars, m["abs_diff_histogram"], "|old - rollout|", "tokens", caption="|old - rollout| per token")
    worst = table(
        ["row", "tokens", "k3", "|old - rollout|", "log-weight"],
        [[w["row"], w["tokens"], w["kl_k3"], w["abs_diff_mean"], w["log_weight"]] for w in m["worst_rows"]],
    )
    return (
        _row(numbers)
        + out
        + "<h3>importance weights</h3>"
        + _row(weights, table(["from", "to", "rows"], _histogram_rows(m["log_weight_histogram"])))
        + _row(diffs, table(["from", "to", "tokens"], _histogram_rows(m["abs_diff_histogram"])))
        + "<h3>worst rows (mean k3)</h3>"
        + worst
    )


def _objective(f: dict, d: Drawing) -> str:
    o = f["objective"]
    numbers = table(
        None,
        [
            ["objective", o["objective"]],
            ["loss", f"{fmt(o['loss'])} ({o['config']['loss']})"],
            ["ratio mean, min, max", ", ".join(fmt(o["ratio"][k]) for k in ("mean", "min", "max"))],
            *([f"clip fraction {name}", f"{share:.4%}"] for name, share in o["clip_frac"].items()),
            ["KL old (k3)", o["kl_old"]],
            ["tokens, rows", f"{o['tokens']}, {o['rows']}"],
        ],
    )
    ratios = f.get("ratio_histogram")
    out = _row(d.figure(_stairs, ratios, "ratio", caption="mean ratio pi_new / pi_old per row") if ratios else "", numbers)
    by = f.get("clip_frac_by")
    if by:
        name = _batch_name(by["column"])
        flags = list(by["clip_frac"])
        rows = [[v, by["tokens"][n], *(by["clip_frac"][flag][n] for flag in flags)] for n, v in enumerate(by["batches"])]
        out += f"<h3>clip fraction per {html.escape(name)}</h3>" + _row(
            d.figure(_clip_per_batch, by, name, caption=f"clip fraction per {name}"), table([name, "tokens", *flags], rows)
        )
    return out
