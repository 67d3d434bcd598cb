"""Compute one advantage per row from the rewards of its group.

A group of one row, or of equal rewards, gets advantage 0 (never NaN).
"""

import sys
from dataclasses import fields

from .. import options as o
from ..config import AdvantageConfig
from ..files import file_function
from ..numerics import ROUND_DIGITS_MAX
from ..plan import plan_advantages as plan

OPTIONS = (
    o.PRESET, *o.INPUTS, *o.GROUPING, o.REWARD_COL, o.BASELINE_COL, o.MASK_COL, o.NEW_COL, o.OLD_COL, o.REF_COL,
    o.column_option("values", "Per-token critic values (a list per row), read by --estimator gae."),
    o.ESTIMATOR_OPTION, *o.ESTIMATOR_OPTIONS, o.GAMMA, o.LAM, *o.REWARDS[1:], o.KL_IN_REWARD, o.KL_OPTION, *o.WHITENING,
    o.OUTPUT_OPTION, o.OUTPUT_DIR,
    o.option("round_digits", int, f"Round the written advantages to N decimals, 0 to {ROUND_DIGITS_MAX} (the summary is never rounded).",
             o.OUTPUT, "--round"),
    *o.WRITES[2:], *o.RUN,
)
EXAMPLES = """\
Examples:

  grpo advantages sample_data/rollouts.parquet -o advantages.parquet

  grpo advantages sample_data/rollouts.jsonl --estimator rloo --std sample --eps 1e-8 -o rloo.jsonl

  cat sample_data/rollouts.jsonl | grpo advantages - -o - --round 4 -q > annotated.jsonl
"""
CONFIG = {f.name for f in fields(AdvantageConfig)}


def keywords(given: dict) -> dict:
    """The estimator's options as one :class:`AdvantageConfig`; the others as they are."""
    return {"config": AdvantageConfig(**{k: v for k, v in given.items() if k in CONFIG}),
            **{k: v for k, v in given.items() if k not in CONFIG}}


def render(figures: dict, console) -> None:
    from ..report import render_advantages
    render_advantages(figures, console)


advantages_file = file_function(sys.modules[__name__])
