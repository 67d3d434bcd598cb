"""What a rollout file holds: which column plays which role and why, layout, groups, tokens per row, rewards, advantages, nulls.

The advantages are the default estimator's (grpo, population std, eps 0), or the preset's; the rewards are read as `grpo advantages` reads them (several reward columns, their weights, nulls, clip).
"""

import sys

from .. import options as o
from ..files import file_function
from ..plan.inspect import plan_inspect as plan

__all__ = ["EXAMPLES", "OPTIONS", "inspect_file", "keywords", "plan", "render"]  # what a command is (commands.base.Command)

OPTIONS = (
    o.PRESET, *o.INPUTS, *o.GROUPING, o.REWARD_COL, o.MASK_COL, o.NEW_COL, o.OLD_COL, o.REF_COL, o.ROLLOUT_COL,
    o.column_option("advantage", "Advantage column."),
    o.column_option("truncated", "Truncation flag: booleans or 0/1."),
    *o.REWARD_OPTIONS, *o.RUN_AND_JSON,
)
EXAMPLES = """\
Examples:

  grpo inspect sample_data/rollouts.parquet

  grpo inspect sample_data/rollouts.jsonl --json > inspect.json
"""

keywords = o.as_given


def render(figures: dict, console) -> None:
    """The `grpo inspect` report: roles and why, then the figures and three histograms."""
    from rich.table import Table

    from ..report import lines, render_histogram, stats_row, table

    f = figures
    roles = Table(title="grpo inspect: columns", title_justify="left")
    for column in ("role", "column", "why", "option"):
        roles.add_column(column)
    for role, r in f["columns"].items():
        roles.add_row(role, r["column"] or "-", r["why"], "--" + r["option"].replace("_", "-"))
    console.print(roles)
    cfg = f.get("advantage_config") or {"estimator": "grpo", "preset": None}
    estimator = cfg["estimator"] + (f", preset {cfg['preset']}" if cfg["preset"] else "")
    t = table("figures")
    t.add_row("rows", str(f["rows"]))
    t.add_row("layout", f["layout"])
    if f["reward"] is not None:
        t.add_row("groups", f"{f['groups']} ({f['grouped_by']})")
        t.add_row("group sizes", lines(f"{size}: {count}" for size, count in f["group_sizes"].items()))
        stats_row(t, "reward", f["reward"])
        t.add_row("zero-variance groups", f"{f['zero_variance_groups']['count']} ({f['zero_variance_groups']['share']:.2%})")
        t.add_row("unscorable rows", str(f["unscorable_rows"]))
        stats_row(t, f"advantage ({estimator})", f["advantage"])
    if f["tokens"] is not None:
        k = f["tokens"]
        t.add_row("tokens per row", f"min {k['min']}  median {k['median']}  p99 {k['p99']}  max {k['max']}")
        t.add_row("tokens", f"{k['total']}  ({k['rows_at_max']} rows at the max)")
    if f["truncated_rows"] is not None:
        t.add_row("truncated rows", str(f["truncated_rows"]))
    nulls = [f"{name} {n}" for name, n in f["nulls"].items() if n]
    t.add_row("nulls", lines(nulls) if nulls else "none")
    console.print(t)
    for key, title in (("reward_histogram", "rewards"), ("length_histogram", "tokens per row"), ("advantage_histogram", f"advantages ({estimator})")):
        if f[key] is not None:
            console.print(title)
            console.print(render_histogram(f[key]), markup=False, highlight=False)


inspect_file = file_function(sys.modules[__name__])
