"""Compute one advantage per row from the rewards of its group.

A group of one row, or of equal rewards, gets advantage 0 (never NaN).
"""

import sys

from .. import options as o
from ..config import AdvantageConfig
from ..files import file_function
from ..numerics import ROUND_DIGITS_MAX
from ..plan import plan_advantages as plan

__all__ = ["EXAMPLES", "OPTIONS", "advantages_file", "keywords", "plan", "render"]  # what a command is (commands.base.Command)

OPTIONS = (
    o.PRESET,
    *o.INPUTS,
    *o.GROUPING,
    o.REWARD_COL,
    o.BASELINE_COL,
    o.MASK_COL,
    o.NEW_COL,
    o.OLD_COL,
    o.REF_COL,
    o.column_option("values", "Per-token critic values (a list per row), read by --estimator gae."),
    o.column_option(
        "sum_pi_squared",
        "Per-token sum of the policy's squared probabilities over the vocabulary (a list per row, verl's), "
        "read by --estimator optimal-token-baseline and tir-optimal-token-baseline.",
    ),
    o.column_option(
        "is_weights",
        "Per-token rollout importance weights (a list per row: verl's rollout_is_weights, with its rollout correction on; "
        "none: do without), read by the optimal token baselines: W sums w times the weight squared.",
    ),
    *o.grouped(o.ADVANTAGE, "estimator", "returns", "rewards", "kl_in_reward", "whitening"),
    o.OUTPUT_OPTION,
    o.OUTPUT_DIR,
    o.option(
        "round_digits",
        int,
        f"Round the written advantages to N decimals, 0 to {ROUND_DIGITS_MAX} (the summary is never rounded).",
        o.OUTPUT,
        "--round",
    ),
    o.option(
        "advantage_name",
        str,
        "Name of the written advantage column (default: advantage; token_advantage for a token-level estimator); "
        "a column of that name in the input (a trainer's own) is replaced unless the run reads it.",
        o.OUTPUT,
        metavar="NAME",
    ),
    o.OUTPUT_FORMAT,
    o.COMPRESSION,
    *o.RUN,
)
EXAMPLES = """\
Examples:

  grpo advantages sample_data/rollouts.parquet -o advantages.parquet

  grpo advantages sample_data/rollouts.jsonl --estimator rloo --std sample --eps 1e-8 -o rloo.jsonl

  cat sample_data/rollouts.jsonl | grpo advantages - -o - --round 4 -q > annotated.jsonl
"""
keywords = o.into(config=AdvantageConfig)


def render(figures: dict, console) -> None:
    """The `grpo advantages` summary as a rich table plus a histogram."""
    from ..report import batch_table, estimator_options, lines, render_histogram, roles, stats_row, table

    t = table("grpo advantages")
    cfg = figures["config"]
    t.add_row("estimator", lines([cfg["estimator"], *estimator_options(cfg)]))
    if cfg["preset"]:
        t.add_row("preset", cfg["preset"])
    t.add_row("columns", roles(figures["columns"]))
    t.add_row("rows", str(figures["rows"]))
    if figures["unscorable_rows"]:
        t.add_row("unscorable rows", f"{figures['unscorable_rows']} (every reward null: advantage 0)")
    t.add_row("groups", f"{figures['groups']} ({figures['grouped_by']})" if figures["grouped_by"] else str(figures["groups"]))
    t.add_row("group sizes", ", ".join(f"{s}: {c}" for s, c in figures["group_sizes"].items()))
    summed = figures.get("rewards_summed")
    stats_row(t, f"reward (sum of {', '.join(summed)})" if summed else "reward", figures["reward"])
    zv = figures["zero_variance_groups"]
    t.add_row("zero-variance groups", f"{zv['count']} ({zv['share']:.1%}, no learning signal)")
    several = "by" in figures and len(figures["by"]["batches"]) > 1
    if several:
        t.add_row("batches", f"{len(figures['by']['batches'])} ({figures['batches']})")
    if "tokens" in figures:
        t.add_row("tokens", str(figures["tokens"]))
    stats_row(t, "advantage" if "tokens" not in figures else "token advantage", figures["advantage"])
    console.print(t)
    if several:
        console.print(batch_table(figures["by"]))
    if figures["advantage_histogram"] is not None:
        console.print("advantage histogram")
        console.print(render_histogram(figures["advantage_histogram"]), markup=False, highlight=False)


advantages_file = file_function(sys.modules[__name__])
