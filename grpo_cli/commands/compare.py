"""Several advantage estimators side by side: their spread, rank correlations, sign flips, the groups where they differ most.

-o writes one advantage_<estimator> column per estimator. The grouping and reward options apply to every estimator; --preset sets the conventions of every estimator for the options it is not given (a preset's name in --estimators stands for its own).
"""

import sys

from .. import options as o
from ..files import file_function
from ..plan.compare import plan_compare as plan

__all__ = ["EXAMPLES", "OPTIONS", "compare_file", "keywords", "plan", "render"]  # what a command is (commands.base.Command)

OPTIONS = (
    o.option("estimators", str, "Two or more, comma-separated: an estimator or a preset's name, each with options as "
             "NAME:key=value,key=value (e.g. grpo:std=sample,eps=1e-6,rloo,verl).", o.ESTIMATOR, default=...),
    o.PRESET, *o.INPUTS, *o.GROUPING, o.REWARD_COL, o.BASELINE_COL, o.MASK_COL, *o.REWARD_OPTIONS,
    o.option("top", int, "List this many of the groups where the estimators differ most.", o.OUTPUT, default=5, min=0, show_default=True),
    *o.WRITES, *o.RUN_AND_JSON,
)
EXAMPLES = """\
Examples:

  grpo compare sample_data/rollouts.parquet --estimators grpo,rloo,mean

  grpo compare sample_data/rollouts.parquet --estimators grpo:std=sample,eps=1e-6,verl,trl --json > compare.json

  grpo compare sample_data/rollouts.parquet --estimators grpo,rloo -o compared.parquet -q
"""

keywords = o.as_given


def render(figures: dict, console) -> None:
    """The `grpo compare` figures: each estimator's spread, then each pair's agreement."""
    from rich.table import Table

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


compare_file = file_function(sys.modules[__name__])
