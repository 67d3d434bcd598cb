"""Several advantage estimators side by side: their spread, rank correlations, sign flips, the groups where they differ most.

-o writes one advantage_<estimator> column per estimator. The grouping and reward options apply to every estimator; --preset sets the conventions of every estimator for the options it is not given (a preset's name in --estimators stands for its own).
"""

import sys

from .. import options as o
from ..files import file_function
from ..plan.compare import plan_compare as plan

OPTIONS = (
    o.Option("estimators", str, o.typer.Option(help="Two or more, comma-separated: an estimator or a preset's name, each with options as "
                                                    "NAME:key=value,key=value (e.g. grpo:std=sample,eps=1e-6,rloo,verl).",
                                               rich_help_panel=o.ESTIMATOR, show_default=False), ...),
    o.PRESET, *o.INPUTS, *o.GROUPING, o.REWARD_COL, o.BASELINE_COL, o.MASK_COL, *o.REWARDS[1:],
    o.option("top", int, "List this many of the groups where the estimators differ most.", o.OUTPUT, default=5, min=0, show_default=True),
    *o.WRITES, *o.RUN[:4], o.JSON, *o.RUN[4:],
)
EXAMPLES = """\
Examples:

  grpo compare sample_data/rollouts.parquet --estimators grpo,rloo,mean

  grpo compare sample_data/rollouts.parquet --estimators grpo:std=sample,eps=1e-6,verl,trl --json > compare.json

  grpo compare sample_data/rollouts.parquet --estimators grpo,rloo -o compared.parquet -q
"""


def keywords(given: dict) -> dict:
    return given


def render(figures: dict, console) -> None:
    from ..report import render_compare
    render_compare(figures, console)


compare_file = file_function(sys.modules[__name__])
