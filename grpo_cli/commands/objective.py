"""The PPO-style clipped objective from new/old per-token log-probs.

Advantages come from an advantage column, else from the rewards (mean baseline per prompt; the whole file is one group without ids or --num-generations). The objective is maximised; the loss is its negative.
"""

import sys
from dataclasses import fields

from .. import options as o
from ..config import AdvantageConfig, value_range
from ..files import file_function
from ..objective import AGGREGATIONS, ALIASES, LOSSES, RATIO_LEVELS
from ..objective.config import ObjectiveConfig
from ..objective.rollout import REJECT_LEVELS
from ..plan.objective import OBJECTIVE_ESTIMATOR, objective_estimator
from ..plan.objective import plan_objective as plan

__all__ = ["EXAMPLES", "OPTIONS", "objective_file", "keywords", "plan", "render"]  # what a command is (commands.base.Command)


def _objective(name: str, panel: str, type=float, extra: str = "", default: str | None = None, *flags: str, **typer_options) -> o.Option:
    return o.config_option(ObjectiveConfig, name, panel, type, extra, default, *flags, **typer_options)


OPTIONS = (
    o.PRESET, *o.INPUTS, *o.GROUPING, o.REWARD_COL, o.BASELINE_COL, o.NEW_COL, o.OLD_COL, o.REF_COL, o.ROLLOUT_COL, o.MASK_COL,
    o.column_option("advantage", "Advantages: a number per row, or a list per row (one per token)."),
    o.config_option(AdvantageConfig, "estimator", o.ESTIMATOR, o.Estimator, f"Computes the advantages from the rewards: {o.ESTIMATOR_LIST}",
                    f"the advantage column if there is one, else {OBJECTIVE_ESTIMATOR}"),
    *o.ESTIMATOR_OPTIONS, *o.REWARD_OPTIONS,
    o.config_option(AdvantageConfig, "kl_in_reward", o.ESTIMATOR, float, "Its KL estimator is --kl.", metavar="BETA"),
    *o.WHITENING,
    _objective("loss", o.CLIP, o.choices("Loss", LOSSES), o.listing({n: loss.help for n, loss in LOSSES.items()})),
    _objective("epsilon", o.CLIP),
    _objective("epsilon_low", o.CLIP, float, "", "--epsilon"),
    _objective("epsilon_high", o.CLIP, float, "", "--epsilon"),
    _objective("dual_clip", o.CLIP),
    _objective("delta", o.CLIP),
    _objective("tau_pos", o.CLIP),
    _objective("tau_neg", o.CLIP),
    _objective("ratio_level", o.CLIP, o.choices("RatioLevel", RATIO_LEVELS)),
    _objective("agg", o.CLIP, o.choices("Aggregation", {**AGGREGATIONS, **ALIASES}), o.listing({n: a.help for n, a in AGGREGATIONS.items()})),
    _objective("max_length", o.CLIP, int),
    _objective("logratio_clamp", o.CLIP),
    _objective("is_level", o.ROLLOUT, str, "", None, "--is", metavar="LEVEL"),
    _objective("is_cap", o.ROLLOUT, metavar="C"),
    o.config_option(ObjectiveConfig, "is_mask", o.ROLLOUT, str, metavar="LO,HI", convert=lambda text: value_range(text, "is_mask")),
    _objective("reject", o.ROLLOUT, str, metavar="KL"),
    _objective("reject_level", o.ROLLOUT, o.choices("RejectLevel", REJECT_LEVELS)),
    _objective("reject_threshold", o.ROLLOUT, str, metavar="BOUNDS"),
    _objective("beta", o.KL_PANEL),
    _objective("kl", o.KL_PANEL, o.KL, o.KL_LIST),
    *o.WRITES, *o.RUN,
)
EXAMPLES = """\
Examples:

  grpo objective sample_data/rollouts.parquet --epsilon 0.2 -o objective.parquet

  grpo objective sample_data/rollouts.parquet --agg token-mean --epsilon-high 0.28 --dual-clip 3 --beta 0.04 -q --summary-json objective.json

  grpo advantages sample_data/rollouts.parquet -o - -q | grpo objective - --ratio-level sequence -q
"""
OBJECTIVE = {f.name for f in fields(ObjectiveConfig)}
ESTIMATOR = {f.name for f in fields(AdvantageConfig)} - {"preset"}  # `kl` is the objective's, and the estimator's with --kl-in-reward


def keywords(given: dict) -> dict:
    """The objective's options as one :class:`ObjectiveConfig`, the estimator's as ``advantage_config`` (``None``: none given)."""
    config = ObjectiveConfig(**{k: v for k, v in given.items() if k in OBJECTIVE})
    estimator = {k: v for k, v in given.items() if k in ESTIMATOR}
    if estimator["kl_in_reward"] is None:
        estimator["kl"] = None
    advantage_config = objective_estimator(estimator.pop("estimator"), given["preset"], **estimator)
    return {"config": config, "advantage_config": advantage_config,
            **{k: v for k, v in given.items() if k not in OBJECTIVE | ESTIMATOR}}


def _rollout_lines(r: dict) -> list[str]:
    """The train/rollout mismatch and what the correction did, in a few words each."""
    from ..report import fmt

    if not r["tokens"]:
        return ["no counted tokens"]
    lines = [f"|old - rollout| mean {fmt(r['abs_diff_mean'])}  max {fmt(r['abs_diff_max'])}",
             f"KL(rollout || old) k1 {fmt(r['kl_k1'])}  k3 {fmt(r['kl_k3'])}"]
    if r["is"] is not None:
        lines.append(f"IS weight mean {fmt(r['is']['weight_mean'])}  masked {r['is']['masked_tokens']} tokens  "
                     f"truncated {r['is']['truncated_tokens']} tokens")
    if r["rejected"] is not None:
        lines.append(f"rejected {r['rejected']['tokens']} tokens ({r['rejected']['token_share']:.4%}) in {r['rejected']['rows']} rows")
    return lines


def _advantages_from(source: dict) -> str:
    from ..report import estimator_options, lines

    if "column" in source:
        return f"column {source['column']}" + (" (per token)" if source["per_token"] else "")
    return lines([f"estimator {source['estimator']}", *estimator_options(source)])


def render(figures: dict, console) -> None:
    """The `grpo objective` summary as a rich table."""
    from ..report import fmt, lines, roles, stats_row, table

    cfg = figures["config"]
    t = table("grpo objective")
    t.add_row("objective", f"{fmt(figures['objective'], '.8g')}  ({cfg['agg']}; maximise)")
    if cfg["preset"]:
        t.add_row("preset", cfg["preset"])
    t.add_row("loss", f"{fmt(figures['loss'], '.8g')}  ({cfg['loss']})")
    options = {"eps_low": cfg["epsilon_low"], "eps_high": cfg["epsilon_high"], "dual": cfg["dual_clip"], "delta": cfg["delta"],
               "tau_pos": cfg["tau_pos"], "tau_neg": cfg["tau_neg"], "ratio": cfg["ratio_level"]}
    t.add_row("loss options", lines(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in options.items() if v is not None))
    if figures["clip_frac"]:
        t.add_row("clip fraction", lines(f"{name} {share:.4%}" for name, share in figures["clip_frac"].items()))
    stats_row(t, "ratio", figures["ratio"])
    kl = [f"old (k3) {fmt(figures['kl_old'])}"]
    if figures["kl_ref"] is not None:
        kl += [f"ref ({cfg['kl']}, {cfg['agg']}) {fmt(figures['kl_ref'])}", f"beta {cfg['beta']:g}"]
    t.add_row("KL", lines(kl))
    if figures["rollout"] is not None:
        t.add_row("rollout mismatch", lines(_rollout_lines(figures["rollout"])))
    t.add_row("tokens", str(figures["tokens"]))
    t.add_row("rows", str(figures["rows"]))
    t.add_row("zero-advantage rows", str(figures["zero_advantage_rows"]))
    t.add_row("advantages", _advantages_from(cfg["advantages"]))
    t.add_row("columns", roles(figures["columns"]))
    if figures["unused_columns"]:
        t.add_row("not used", ", ".join(figures["unused_columns"]))
    if figures["clamped_tokens"]:
        t.add_row("clamped log-ratios", f"{figures['clamped_tokens']} tokens (|new - old| > {cfg['logratio_clamp']:g})")
    console.print(t)


objective_file = file_function(sys.modules[__name__])
