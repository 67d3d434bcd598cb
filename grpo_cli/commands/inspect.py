"""What a rollout file holds: which column plays which role and why, layout, groups, tokens per row, rewards, advantages, nulls.

The advantages are the default estimator's (grpo, population std, eps 0), or the preset's; the rewards are read as `grpo advantages` reads them (several reward columns, their weights, nulls, clip).
"""

import sys

from .. import options as o
from ..files import file_function
from ..plan.inspect import plan_inspect as plan

OPTIONS = (
    o.PRESET, *o.INPUTS, *o.GROUPING, o.REWARD_COL, o.MASK_COL, o.NEW_COL, o.OLD_COL, o.REF_COL, o.ROLLOUT_COL,
    o.column_option("advantage", "Advantage column."),
    o.column_option("truncated", "Truncation flag: booleans or 0/1."),
    *o.REWARDS[1:], o.THREADS, o.ENGINE, o.RAY_ADDRESS, o.QUIET, o.JSON, o.SUMMARY_JSON, o.PROGRESS, o.DEBUG,
)
EXAMPLES = """\
Examples:

  grpo inspect sample_data/rollouts.parquet

  grpo inspect sample_data/rollouts.jsonl --json > inspect.json
"""


def keywords(given: dict) -> dict:
    return given


def render(figures: dict, console) -> None:
    from ..report import render_inspect
    render_inspect(figures, console)


inspect_file = file_function(sys.modules[__name__])
