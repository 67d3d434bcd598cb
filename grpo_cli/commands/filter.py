"""Write the rows to keep: drop groups without signal (DAPO), outside reward bounds (OpenRLHF), truncated rows; DAPO's overlong penalty.

Without -o (or --output-dir), only reports what would be kept and why the rest would not. The rewards are read as `grpo advantages` reads them (several reward columns, their weights, nulls, clip); a row without any reward is refused.
"""

import sys

from .. import options as o
from ..files import file_function
from ..filters import TRUNCATED, FilterConfig
from ..plan.filter import plan_filter as plan

RULES = "Rules"


def _rule(name: str, type=float, **typer_options) -> o.Option:
    return o.config_option(FilterConfig, name, RULES, type, **typer_options)


OPTIONS = (
    *o.INPUTS, *o.GROUPING, o.REWARD_COL,
    o.column_option("truncated", "Truncation flag: booleans or 0/1, read by --truncated."),
    o.MASK_COL, o.NEW_COL, *o.REWARDS[1:],
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
CONFIG = {"drop_zero_variance", "keep_if", "truncated", "overlong_buffer", "max_length", "overlong_factor"}


def keywords(given: dict) -> dict:
    return {"config": FilterConfig(**{k: v for k, v in given.items() if k in CONFIG}),
            **{k: v for k, v in given.items() if k not in CONFIG}}


def render(figures: dict, console) -> None:
    from ..report import render_filter
    render_filter(figures, console)


filter_file = file_function(sys.modules[__name__])
