"""How far the rollout sampler's log-probs are from the trainer's old ones (train/inference mismatch).

|old - rollout|, KL(rollout || old) as k1 and k3, perplexities, chi-square and effective sample size of the weights pi_old / pi_rollout, the share a cap or mask would touch, by token position and response length, and the worst rows (named by their prompt id; with --num-generations, every group's size is checked). -o writes the per-row figures.
"""

import sys

from .. import options as o
from ..config import value_range
from ..files import file_function
from ..mismatch import MismatchConfig
from ..plan.mismatch import plan_mismatch as plan

OPTIONS = (
    *o.INPUTS, *o.GROUPING, o.OLD_COL, o.ROLLOUT_COL, o.MASK_COL,
    o.config_option(MismatchConfig, "is_cap", o.ROLLOUT, float, metavar="C"),
    o.config_option(MismatchConfig, "is_mask", o.ROLLOUT, str, metavar="LO,HI", convert=lambda text: value_range(text, "is_mask")),
    o.config_option(MismatchConfig, "logratio_clamp", o.ROLLOUT),
    o.config_option(MismatchConfig, "worst", o.OUTPUT, int, metavar="N"),
    *o.WRITES, *o.RUN[:4], o.JSON, *o.RUN[4:],
)
EXAMPLES = """\
Examples:

  grpo mismatch sample_data/rollouts_vllm.parquet

  grpo mismatch sample_data/rollouts_vllm.parquet --is-cap 3 --is-mask 0.5,2 --json > mismatch.json

  grpo mismatch sample_data/rollouts_vllm.parquet -o mismatch_rows.parquet -q
"""
CONFIG = {"is_cap", "is_mask", "logratio_clamp", "worst"}


def keywords(given: dict) -> dict:
    return {"config": MismatchConfig(**{k: v for k, v in given.items() if k in CONFIG}),
            **{k: v for k, v in given.items() if k not in CONFIG}}


def render(figures: dict, console) -> None:
    from ..report import render_mismatch
    render_mismatch(figures, console)


mismatch_file = file_function(sys.modules[__name__])
