"""Write the rows to keep: drop groups without signal (DAPO), outside reward bounds (OpenRLHF), truncated rows; DAPO's overlong penalty.

Without -o (or --output-dir), only reports what would be kept and why the rest would not. The rewards are read as `grpo advantages` reads them (several reward columns, their weights, nulls, clip); a row without any reward is refused.
"""

import sys

from .. import options as o
from ..files import file_function
from ..filters import TRUNCATED, FilterConfig
from ..plan.filter import plan_filter as plan

__all__ = ["EXAMPLES", "OPTIONS", "filter_file", "keywords", "plan", "render"]  # what a command is (commands.base.Command)

RULES = "Rules"


def _rule(name: str, type=float, **typer_options) -> o.Option:
    return o.config_option(FilterConfig, name, RULES, type, **typer_options)


OPTIONS = (
    *o.INPUTS, *o.GROUPING, o.REWARD_COL,
    o.column_option("truncated", "Truncation flag: booleans or 0/1, read by --truncated."),
    o.MASK_COL, o.NEW_COL, *o.REWARD_OPTIONS,
    o.flag("drop_zero_variance", o.config_help(FilterConfig, "drop_zero_variance"), RULES, convert=lambda given: given or None),
    _rule("keep_if", str, metavar="RULE"),
    _rule("truncated", o.choices("Truncated", TRUNCATED)),
    _rule("overlong_buffer", int, metavar="B"),
    _rule("max_length", int),
    _rule("overlong_factor"),
    *o.WRITES, *o.RUN,
)
EXAMPLES = """\
Examples:

  grpo filter sample_data/rollouts.parquet --drop-zero-variance -o filtered.parquet

  grpo filter sample_data/rollouts.parquet --keep-if '0<mean<1' --overlong-buffer 16 --max-length 64 -o filtered.parquet
"""
keywords = o.into_config(FilterConfig)


def render(figures: dict, console) -> None:
    """The `grpo filter` summary: kept, dropped, and what each rule did."""
    from ..report import roles, table

    f = figures
    t = table("grpo filter")
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
    t.add_row("columns", roles(f["columns"]))
    if f["unused_columns"]:
        t.add_row("not used", ", ".join(f["unused_columns"]))
    console.print(t)


filter_file = file_function(sys.modules[__name__])
