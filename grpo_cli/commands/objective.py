"""The PPO-style clipped objective from new/old per-token log-probs.

Advantages come from an advantage column, else from the rewards (mean baseline per prompt; the whole file is one group without ids or --num-generations). The objective is maximised; the loss is its negative.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields, replace
from functools import reduce
from typing import Iterator

import numpy as np
import pyarrow as pa

from .. import options as o
from .. import passes, schema
from ..config import AdvantageConfig
from ..engines import Engine
from ..engines.kernels import Written, scalars
from ..engines.token_kernels import MISMATCH_COLUMNS, mismatch_columns
from ..errors import ColumnNotFoundError, UsageError, present
from ..estimators import lookup
from ..files import file_function
from ..io import Source
from ..objective import LOSSES, row_terms
from ..objective.config import OWN_OPTIONS, ObjectiveConfig
from ..objective.entropy import entropy_threshold
from ..objective.micro import RULES as MICRO_BATCH_RULES
from ..objective.rollout import is_mean, is_mean_part
from ..objective.terms import ScanPartial, scanned
from ..objective.summary import ObjectiveSummary
from ..plan import (
    OBJECTIVE_ESTIMATOR,
    Grouping,
    Inputs,
    Output,
    default_estimator,
    objective_estimator,
    reads_tokens,
    resolve_grouping,
    resolve_inputs,
    resolve_output,
)
from ..schema import arrow_array
from ..selection import Digits, part
from ..token_columns import StepColumns, TokenColumns, read_entropies, read_tokens
from ..tokens import Tokens

__all__ = ["EXAMPLES", "OPTIONS", "objective_file", "keywords", "plan", "render"]  # what a command is (commands.base.Command)

OBJECTIVE_OPTIONS = o.config_options(ObjectiveConfig)
OPTIONS = (
    o.PRESET,
    *o.INPUTS,
    *o.GROUPING,
    o.REWARD_COL,
    o.BASELINE_COL,
    o.NEW_COL,
    o.OLD_COL,
    o.REF_COL,
    o.ROLLOUT_COL,
    o.ENTROPY_COL,
    o.MASK_COL,
    o.column_option("values", "Loss ppo_value: the critic's per-token values V (a list per row)."),
    o.column_option("old_values", "Loss ppo_value: the values the returns were made with, V_old (a list per row)."),
    o.column_option("returns", "Loss ppo_value: the per-token returns R (a list per row; grpo advantages --estimator gae writes token_return)."),
    o.column_option("advantage", "Advantages: a number per row, or a list per row (one per token); none: compute them from the rewards."),
    o.ADVANTAGE["estimator"].told(
        o.config_help(
            AdvantageConfig,
            "estimator",
            "Here, what computes the advantages from the rewards.",
            f"the advantage column if there is one, else {OBJECTIVE_ESTIMATOR}",
        )
    ),
    *(option for option in o.grouped(o.ADVANTAGE, "estimator", "rewards", "whitening") if option.name != "estimator"),
    o.ADVANTAGE["kl_in_reward"].told(o.config_help(AdvantageConfig, "kl_in_reward", "Its KL estimator is --kl.")),  # the objective's --kl
    *(option for name, option in OBJECTIVE_OPTIONS.items() if name != "preset"),
    *o.WRITES,
    *o.RUN,
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
    return {"config": config, "advantage_config": advantage_config, **{k: v for k, v in given.items() if k not in OBJECTIVE | ESTIMATOR}}


def _rollout_lines(r: dict) -> list[str]:
    """The train/rollout mismatch and what the correction did, in a few words each."""
    from ..report import fmt

    if not r["tokens"]:
        return ["no counted tokens"]
    lines = [
        f"|old - rollout| mean {fmt(r['abs_diff_mean'])}  max {fmt(r['abs_diff_max'])}",
        f"KL(rollout || old) k1 {fmt(r['kl_k1'])}  k3 {fmt(r['kl_k3'])}",
    ]
    if r["is"] is not None:
        lines.append(
            f"IS weight mean {fmt(r['is']['weight_mean'])}  masked {r['is']['masked_tokens']} tokens  truncated {r['is']['truncated_tokens']} tokens"
        )
    if r["rejected"] is not None:
        lines.append(f"rejected {r['rejected']['tokens']} tokens ({r['rejected']['token_share']:.4%}) in {r['rejected']['rows']} rows")
    return lines


def _empty_rows_line(empty: int, rows: int, rule: str | None) -> str:
    """How many rows have no counted tokens, and what the mean over rows (if any) did with them."""
    if rule is None:
        return f"{empty}  (no counted tokens)"
    if rule == "count":
        return f"{empty}  (counted as 0 in the mean over {rows} rows)"
    return f"{empty}  (left out: the mean is over {rows - empty} rows)"


def _advantages_from(source: dict) -> str:
    from ..report import estimator_options, lines

    if "column" in source:
        if source["column"] is None:
            return "none (the loss reads none)"
        return f"column {source['column']}" + (" (per token)" if source["per_token"] else "")
    return lines([f"estimator {source['estimator']}", *estimator_options(source)])


def render(figures: dict, console) -> None:
    """The `grpo objective` summary as a rich table."""
    from ..report import fmt, lines, roles, stats_row, table

    cfg = figures["config"]
    t = table("grpo objective")
    if figures["grouped_by"] is not None:  # advantages from the rewards: over which groups, first
        t.add_row("groups", f"{figures['grouped_by']} (estimator {cfg['advantages']['estimator']})")
        if "batches" in figures:
            t.add_row("batches", f"{figures['batches']} (the estimator's batch-wide statistics)")
    t.add_row("objective", f"{fmt(figures['objective'], '.8g')}  ({cfg['agg']}; maximise)")
    if cfg["preset"]:
        t.add_row("preset", cfg["preset"])
    t.add_row("loss", f"{fmt(figures['loss'], '.8g')}  ({cfg['loss']})")
    if figures["columns"]["logprobs"] is None:
        t.add_row("on-policy", "no log-probs (the loss reads none): every ratio is 1")
    elif figures["columns"]["logprobs"] == figures["columns"]["old_logprobs"]:
        t.add_row("on-policy", f"the new log-probs are the old ones ({figures['columns']['logprobs']}): every ratio is 1")
    options = {
        "eps_low": cfg["epsilon_low"],
        "eps_high": cfg["epsilon_high"],
        "dual": cfg["dual_clip"],
        "delta": cfg["delta"],
        "tau_pos": cfg["tau_pos"],
        "tau_neg": cfg["tau_neg"],
        "ratio": cfg["ratio_level"],
        **{k: cfg.get(k) for k in OWN_OPTIONS},
    }
    t.add_row("loss options", lines(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in options.items() if v is not None))
    if "top_entropy_quantile" in cfg:
        t.add_row(
            "entropy mask", f"the top {cfg['top_entropy_quantile']:g} of tokens by entropy: >= {fmt(cfg['entropy_threshold'])} (the others weigh 0)"
        )
    if figures["clip_frac"]:
        t.add_row("clip fraction", lines(f"{name} {share:.4%}" for name, share in figures["clip_frac"].items()))
    stats_row(t, "ratio", figures["ratio"])
    kl = [f"old (k3) {fmt(figures['kl_old'])}"]
    if figures["kl_ref"] is not None:
        kl += [f"ref ({cfg['kl']}, {cfg.get('kl_agg', cfg['agg'])}) {fmt(figures['kl_ref'])}", f"beta {cfg['beta']:g}"]
        kl += [f"{name} {cfg[key]}" for key, name in (("kl_weight", "weight"), ("kl_clamp", "clamp")) if key in cfg]
    t.add_row("KL", lines(kl))
    if cfg["bypass"] is not None:
        t.add_row("old policy", f"the rollout's (bypass {cfg['bypass']}: weights and rejection from new - rollout)")
    if figures["rollout"] is not None:
        t.add_row("rollout mismatch", lines(_rollout_lines(figures["rollout"])))
    t.add_row("tokens", str(figures["tokens"]))
    t.add_row("rows", str(figures["rows"]))
    if "micro_batches" in figures:
        rule = cfg["micro_batch_rule"]
        t.add_row("micro-batches", f"{figures['micro_batches']}, of {cfg['micro_batch_size']} rows each ({rule}: {MICRO_BATCH_RULES[rule]})")
    if figures["empty_rows"]:
        t.add_row("empty rows", _empty_rows_line(figures["empty_rows"], figures["rows"], cfg["empty_rows"]))
    if not LOSSES[cfg["loss"]].critic:  # a value loss reads no advantages
        t.add_row("zero-advantage rows", str(figures["zero_advantage_rows"]))
    t.add_row("advantages", _advantages_from(cfg["advantages"]))
    t.add_row("columns", roles(figures["columns"]))
    if figures["unused_columns"]:
        t.add_row("not used", ", ".join(figures["unused_columns"]))
    if figures["clamped_tokens"]:
        t.add_row("clamped log-ratios", f"{figures['clamped_tokens']} tokens (|new - old| > {cfg['logratio_clamp']:g})")
    console.print(t)


@dataclass(frozen=True)
class ObjectivePlan:
    """`grpo objective`: token columns, where the advantages come from, the objective.

    Advantages are read batch by batch from the per-row ``advantage`` column, or from the
    list column ``tokens.advantage`` (one per token), or computed in a first pass from
    ``reward`` with ``estimator``.
    """

    config: ObjectiveConfig
    tokens: TokenColumns
    grouping: Grouping
    advantage: str | None
    inputs: Inputs | None
    estimator: AdvantageConfig | None
    output: Output
    unused: tuple[str, ...] = ()

    @property
    def roles(self) -> dict[str, str | list[str] | None]:
        """Which column plays which role (``None``: no column does)."""
        t = self.tokens
        i = self.inputs.roles if self.inputs else {}
        return {
            "prompt": self.grouping.shown,
            "reward": i.get("reward"),
            "baseline": i.get("baseline"),
            "advantage": self.advantage or t.advantage,
            "logprobs": t.new,
            "old_logprobs": t.old,
            "ref_logprobs": t.ref,
            "rollout_logprobs": t.rollout,
            "mask": t.mask,
            **({"entropy": t.entropy} if t.entropy else {}),  # read only by top_entropy_quantile
            **({"values": t.values, "old_values": t.old_values, "returns": t.returns} if t.values else {}),  # a value loss's
        }

    @property
    def advantages_from(self) -> dict:
        """Where the advantages come from: a column (per row or per token), or an estimator
        and its options."""
        if self.estimator is None:  # a column, or none (a value loss reads no advantages)
            return {"column": self.advantage or self.tokens.advantage, "per_token": self.per_token}
        figures = {k: v for k, v in self.estimator.figures.items() if k != "preset"}  # the objective's config has it
        if self.estimator.scale == "none":
            figures.update(std=None, eps=None)
        return figures

    def run(self, engine: Engine, source: Source) -> dict:
        """Compute the objective on ``engine`` and write the per-row columns; the figures of
        :meth:`grpo_cli.objective.summary.ObjectiveSummary.figures`."""
        plan, computed, context, held = self.prepared(engine, source)
        partials = passes.partials(
            engine,
            source,
            self.output,
            objective_fields(self),
            objective_batch,
            plan,
            computed,
            context,
            columns=self.columns,
            prompt=self.grouping.prompt,
            held=held,
        )
        return plan.summarized(partials)

    def prepared(self, engine: Engine, source: Source) -> tuple[ObjectivePlan, np.ndarray | None, object, pa.Table | None]:
        """What the streaming pass needs, from the passes before it: the plan (with
        ``is_normalize``'s mean weight and ``top_entropy_quantile``'s threshold), the advantages computed from the rewards (``None``:
        read from a column), what the loss's scans found, and the columns pass 1 held."""
        plan, computed, held = self, None, None
        if self.config.is_normalize:  # a pass for the mean weight over the whole input
            parts = passes.results(engine, source, is_mean_batch, self, columns=self.tokens.names, prompt=self.grouping.prompt)
            plan = replace(self, config=self.config.with_passed(is_mean=is_mean(np.sum(parts, axis=0), self.config.is_level)))
        if self.config.top_entropy_quantile < 1:  # passes for the entropy quantile over the whole input (its entropy and mask columns)
            read = [c for c in (self.tokens.entropy, self.tokens.mask) if c is not None]

            def scan(wanted: tuple[Digits, ...]) -> Iterator[list[np.ndarray]]:
                return passes.streamed(engine, source, entropy_parts, self, wanted, columns=read, prompt=self.grouping.prompt)

            plan = replace(plan, config=plan.config.with_passed(entropy_threshold=entropy_threshold(scan, self.config.top_entropy_quantile)))
        if self.first_pass:
            index, inputs, held, ahead = passes.first_pass(engine, source, self.grouping, self.inputs, self.estimator, hold=bool(self.output.targets))
            if self.estimator is not None and inputs is not None:  # inputs: read with the estimator
                computed = passes.advantages(engine, source, self.grouping, index, inputs, self.estimator, ahead)[0]
        context = None
        if LOSSES[self.config.loss].scans:  # statistics of every token first (verl's covariance losses)
            context = scanned(
                lambda partial, state: passes.results(
                    engine,
                    source,
                    scan_batch,
                    plan,
                    computed,
                    partial,
                    state,
                    columns=self.columns,
                    prompt=self.grouping.prompt,
                ),
                plan.config,
            )
        return plan, computed, context, held

    def summarized(self, partials: list[ObjectiveSummary]) -> dict:
        """The figures of every batch's partial summary (``partials``, in row order)."""
        return reduce(ObjectiveSummary.merge, partials, ObjectiveSummary()).figures(self.config)

    @property
    def figures(self) -> dict:
        """What the summary says of the plan itself (``config`` entries join the summary's)."""
        grouped_by = self.grouping.described if self.estimator is not None else None  # the groups of the baseline
        batches = {"batches": self.grouping.batches_described} if self.grouping.batches_described else {}
        return {
            "columns": self.roles,
            "unused_columns": list(self.unused),
            "grouped_by": grouped_by,
            **batches,
            "config": {"advantages": self.advantages_from},
        }

    @property
    def first_pass(self) -> bool:
        """Whether ids or rewards are read before streaming: to compute advantages, or to
        check group sizes against ``num_generations``."""
        return self.estimator is not None or self.grouping.num_generations is not None

    @property
    def per_token(self) -> bool:
        return self.tokens.advantage is not None

    @property
    def reads_advantages(self) -> bool:
        """Whether the loss reads advantages (a value loss does not)."""
        return not LOSSES[self.config.loss].critic

    @property
    def columns(self) -> list[str]:
        """The columns a summary-only run streams."""
        return self.tokens.names + ([self.advantage] if self.advantage else [])


def plan_objective(
    source: Source,
    *,
    config: ObjectiveConfig | None = None,
    advantage_config: AdvantageConfig | None = None,
    advantage_col: str | None = None,
    prompt_col: str | list[str] | None = None,
    reward_col: str | list[str] | None = None,
    baseline_col: str | None = None,
    num_generations: int | None = None,
    by: str | None = None,
    by_file: bool = False,
    logprobs_col: str | None = None,
    old_logprobs_col: str | None = None,
    ref_logprobs_col: str | None = None,
    rollout_logprobs_col: str | None = None,
    entropy_col: str | None = None,
    mask_col: str | None = None,
    values_col: str | None = None,
    old_values_col: str | None = None,
    returns_col: str | None = None,
    output: str | None = None,
    output_dir: str | None = None,
    output_format: str | None = None,
    compression: str | None = None,
) -> ObjectivePlan:
    """The plan of `grpo objective` on ``source`` (see :func:`grpo_cli.objective_file`).

    Advantages: computed from the rewards with ``advantage_config`` if given; else read from
    ``advantage_col``, or an ``advantage`` column if the input has one; else computed with
    estimator :data:`OBJECTIVE_ESTIMATOR` (or ``config.preset``'s). A value loss
    (``ppo_value``) reads none, and the critic's ``values_col``, ``old_values_col`` and
    ``returns_col`` instead.
    """
    config = config or ObjectiveConfig()
    out = resolve_output(source, output, output_dir, output_format, compression)
    s, name = source.schema, source.name
    given = schema.given_columns(
        {
            "new": logprobs_col,
            "old": old_logprobs_col,
            "ref": ref_logprobs_col,
            "rollout": rollout_logprobs_col,
            "mask": mask_col,
            "advantage": advantage_col,
            "entropy": entropy_col,
            "values": values_col,
            "old_values": old_values_col,
            "returns": returns_col,
        }
    )
    value_loss = LOSSES[config.loss].critic  # reads the critic's columns, and no advantages
    critic = _critic_columns(source, config, given, values_col=values_col, old_values_col=old_values_col, returns_col=returns_col)
    if value_loss:
        for option, value in (("advantage_col", advantage_col), ("reward_col", reward_col), ("baseline_col", baseline_col)):
            if value not in (None, schema.NO_COLUMN):
                raise UsageError(f"loss {config.loss!r} reads no advantages; drop `{option}`")
        if advantage_config is not None:
            raise UsageError(f"loss {config.loss!r} reads no advantages; drop `estimator` and its options")
        advantage_col = schema.NO_COLUMN
    ref = schema.resolve_column(s, "ref", ref_logprobs_col, required=False, source=name, given=given)
    if ref is None and (config.beta > 0 or "kl" in config.given):
        looked = ", ".join(schema.ROLES["ref"].candidates)
        option = "`beta` > 0" if config.beta > 0 else "`kl`"
        raise UsageError(f"{option} needs reference log-probs: pass `ref_logprobs_col` (looked for {looked})")
    rollout = schema.resolve_column(s, "rollout", rollout_logprobs_col, required=False, source=name, given=given)
    if rollout is None and config.correcting:
        raise ColumnNotFoundError(
            f"{name}: `{config.correcting[0]}` needs the rollout sampler's log-probs: pass `rollout_logprobs_col` "
            f"(looked for {', '.join(schema.ROLES['rollout'].candidates)})"
        )
    if advantage_config is not None and advantage_col not in (None, schema.NO_COLUMN):
        raise UsageError("pass either `advantage_col` or `advantage_config` (an estimator), not both")
    column = None
    if advantage_config is None:
        required = advantage_col not in (None, schema.NO_COLUMN)
        column = schema.resolve_column(s, "advantage", advantage_col, required=required, source=name, given=given)
    for option, value in (("reward_col", reward_col), ("baseline_col", baseline_col)):
        if column is not None and value is not None:
            raise UsageError(
                f"`{option}` is not read: the advantages come from column {column!r}; "
                f"drop `{option}`, or pass `estimator` to compute them from the rewards"
            )
    per_token = column is not None and schema.is_list(s.field(column).type)
    if per_token:
        config.check_per_token_advantages()
    if column is not None and not per_token:
        schema.check_numeric(s.field(column), name, "advantage")
    estimator = None if column is not None or value_loss else advantage_config or default_estimator(config.preset)
    tokens = TokenColumns(
        *(
            _value_loss_logprobs(s, name, logprobs_col, old_logprobs_col, given)
            if value_loss
            else (
                schema.resolve_column(s, "new", logprobs_col, source=name, given=given),
                _old_policy(s, name, config, old_logprobs_col, rollout, given, logprobs_col),
            )
        ),
        ref=ref,
        mask=schema.resolve_column(s, "mask", mask_col, required=False, source=name, given=given),
        advantage=column if per_token else None,
        rollout=rollout,
        entropy=_entropy_column(s, name, config, entropy_col, given),
        values=critic[0],
        old_values=critic[1],
        returns=critic[2],
    )
    grouping = resolve_grouping(
        source,
        prompt_col,
        num_generations,
        required=False,
        grouped=estimator is not None and lookup(estimator.estimator).grouped,
        batched=estimator is not None,
        by=by,
        by_file=by_file,
    )
    inputs = None
    if estimator is not None:
        if lookup(estimator.estimator).level == "token":
            raise UsageError(
                f"estimator {estimator.estimator!r} gives per-token advantages: write them with "
                f"`grpo advantages --estimator {estimator.estimator} -o FILE`, then pass that file here"
            )
        if estimator.kl_in_reward is not None and tokens.ref is None:
            raise UsageError(
                f"`kl_in_reward` needs reference log-probs: pass `ref_logprobs_col` (looked for {', '.join(schema.ROLES['ref'].candidates)})"
            )
        count = present(tokens.mask or tokens.new, "the log-probs")  # a value loss, the one without them, has no estimator
        steps = StepColumns(count, tokens.mask, tokens.old, tokens.ref) if reads_tokens(estimator) else None
        inputs = resolve_inputs(source, estimator, reward_col, baseline_col, steps, mask_col=tokens.mask)
    plan = ObjectivePlan(config, tokens, grouping, None if per_token else column, inputs, estimator, out)
    used = tuple(c for value in plan.roles.values() for c in (value if isinstance(value, list) else [value]))
    return replace(plan, unused=tuple(schema.lookalikes(s, "ref", used) + schema.lookalikes(s, "mask", used)))


def _critic_columns(source: Source, config: ObjectiveConfig, given: dict, **columns: str | None) -> tuple[str | None, ...]:
    """A value loss's columns (values, old values, returns), all required; ``None`` each for
    the other losses, which refuse them given."""
    if not LOSSES[config.loss].critic:
        for option, value in columns.items():
            if value is not None:
                critics = ", ".join(repr(name) for name, loss in LOSSES.items() if loss.critic)
                raise UsageError(f"`{option}` is read only by a value loss ({critics}), and `loss` is {config.loss!r}; drop `{option}`")
        return None, None, None
    return tuple(
        schema.resolve_column(source.schema, role, columns[schema.ROLES[role].param], source=source.name, given=given)
        for role in ("values", "old_values", "returns")
    )


def _value_loss_logprobs(s: pa.Schema, name: str, new: str | None, old: str | None, given: dict) -> tuple[str | None, str | None]:
    """A value loss reads no log-probs: the ratio figures take those found (one column: both
    roles, ratio 1; none: every ratio 1)."""
    found = [schema.resolve_column(s, role, column, required=False, source=name, given=given) for role, column in (("new", new), ("old", old))]
    return found[0] or found[1], found[1] or found[0]


def _old_policy(
    s: pa.Schema, name: str, config: ObjectiveConfig, old_logprobs_col: str | None, rollout: str | None, given: dict, new: str | None
) -> str:
    """The old policy's column: the rollout's in bypass mode, else the old log-probs, which
    are not the rollout's (the same column in both roles is the bypass mode). An on-policy
    file holds only old log-probs (verl's batch, with no new ones): named as the new ones
    (``logprobs_col old_log_probs``) with no other old column, they are both (ratio 1)."""
    if config.bypass is not None:
        if old_logprobs_col not in (None, rollout):
            raise UsageError(f"`bypass` takes the rollout log-probs {rollout!r} as the old policy; drop `old_logprobs_col` {old_logprobs_col!r}")
        assert rollout is not None  # checked with the other options that need it
        return rollout
    others = [c for c in schema.ROLES["old"].candidates if c in s.names and c != new]
    if old_logprobs_col is None and new in schema.ROLES["old"].candidates and not others:
        return new
    old = schema.resolve_column(s, "old", old_logprobs_col, source=name, given=given)
    if old == rollout:
        raise UsageError(
            f"`old_logprobs_col` and `rollout_logprobs_col` are both {old!r}: the rollout policy as the old one is verl's "
            "bypass mode; pass `bypass` ppo_clip or reinforce (weights and rejection from new - rollout), and drop `old_logprobs_col`"
        )
    return old


def _entropy_column(s: pa.Schema, name: str, config: ObjectiveConfig, entropy_col: str | None, given: dict) -> str | None:
    """The token entropies' column, read only with ``top_entropy_quantile`` < 1 (then required)."""
    if config.top_entropy_quantile == 1:
        if entropy_col not in (None, schema.NO_COLUMN):
            raise UsageError("`entropy_col` is read only by `top_entropy_quantile` < 1; pass that too, or drop `entropy_col`")
        return None
    return schema.resolve_column(s, "entropy", entropy_col, source=name, given=given)


def objective_fields(plan: ObjectivePlan) -> list[pa.Field]:
    """The per-row columns `grpo objective` writes, in order."""
    names = [] if plan.per_token or not plan.reads_advantages else ["advantage"]
    names += ["objective_sum", "objective_mean", "n_tokens", "clip_frac", "ratio_mean", "ratio_max", "kl_old"]
    names += ["kl_ref"] if plan.tokens.ref else []
    names += list(MISMATCH_COLUMNS) if plan.tokens.rollout else []
    names += ["is_weight_mean"] if plan.config.is_level else []
    names += ["rejected_tokens"] if plan.config.reject or plan.config.reject_veto is not None else []
    return [pa.field(name, pa.int64() if name in ("n_tokens", "rejected_tokens") else pa.float64()) for name in names]


def is_mean_batch(batch: pa.RecordBatch, first_row: int, plan: ObjectivePlan) -> np.ndarray:
    """One batch's part of ``is_normalize``'s mean weight (:func:`~grpo_cli.objective.rollout.is_mean_part`)."""
    return is_mean_part(read_tokens(batch, plan.tokens), plan.config)


def entropy_parts(batch: pa.RecordBatch, first_row: int, plan: ObjectivePlan, wanted: tuple[Digits, ...]) -> list[np.ndarray]:
    """One batch's part of a pass for ``top_entropy_quantile``'s threshold (:func:`~grpo_cli.selection.part`)."""
    entropies = read_entropies(batch, plan.tokens)
    return [part(entropies, d) for d in wanted]


def batch_rows(batch: pa.RecordBatch, first_row: int, plan: ObjectivePlan, computed: np.ndarray | None) -> tuple[Tokens, np.ndarray | None]:
    """The batch's tokens and advantages: from ``computed`` (every row's, from the first
    pass), else from the plan's advantage column in the batch, else ``None`` (per token, in
    ``plan.tokens.advantage``)."""
    tokens = read_tokens(batch, plan.tokens)
    if not plan.reads_advantages:  # a value loss: its terms are not the advantage's
        return tokens, np.zeros(batch.num_rows)
    if computed is not None:
        return tokens, computed[first_row : first_row + batch.num_rows]
    if plan.advantage is not None:
        return tokens, scalars(batch.column(plan.advantage), plan.advantage)
    return tokens, None


def scan_batch(
    batch: pa.RecordBatch, first_row: int, plan: ObjectivePlan, computed: np.ndarray | None, partial: ScanPartial, state: object
) -> object:
    """A loss's scan of one batch (:func:`grpo_cli.objective.terms.scanned`)."""
    return partial(*batch_rows(batch, first_row, plan, computed), first_row, state)


def objective_batch(batch: pa.RecordBatch, first_row: int, plan: ObjectivePlan, computed: np.ndarray | None, context: object = None) -> Written:
    """The per-row columns (when the plan writes rows) and the partial summary of one batch
    (``context``: what the loss's scans found over the whole input, if it has any)."""
    terms, adv = batch_terms(batch, first_row, plan, computed, context)
    summary = ObjectiveSummary.of(terms, first_row, plan.config.micro_batch_size)
    return Written(_per_row_columns(terms, adv if plan.reads_advantages else None, plan) if plan.output.targets else {}, partial=summary)


def batch_terms(
    batch: pa.RecordBatch, first_row: int, plan: ObjectivePlan, computed: np.ndarray | None, context: object = None
) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """The per-row terms of one batch (:func:`~grpo_cli.objective.row_terms`), with each row's ``length`` (its tokens,
    masked ones included), and its advantages (``None``: per token)."""
    tokens, adv = batch_rows(batch, first_row, plan, computed)
    return {**row_terms(tokens, adv, plan.config, context=context, first_row=first_row), "length": tokens.lengths}, adv


def _per_row_columns(terms: dict[str, np.ndarray], adv: np.ndarray | None, plan: ObjectivePlan) -> dict[str, pa.Array]:
    n = terms["n_tokens"]
    empty = n == 0
    safe_n = np.where(empty, 1, n)

    def per_token(x: np.ndarray) -> pa.Array:
        return arrow_array(x / safe_n, mask=empty)

    flagged = sum(terms[f"flag_{flag.name}"] for flag in LOSSES[plan.config.loss].flags if flag.per_row)
    columns = {} if adv is None else {"advantage": arrow_array(adv)}
    columns.update(
        {
            "objective_sum": arrow_array(terms["objective_sum"]),
            "objective_mean": per_token(terms["objective_sum"]),
            "n_tokens": arrow_array(n),
            "clip_frac": per_token(np.asarray(flagged, dtype=np.float64)),
            "ratio_mean": per_token(terms["ratio_sum"]),
            "ratio_max": arrow_array(terms["ratio_max"], mask=empty),
            "kl_old": per_token(terms["kl_old_sum"]),
        }
    )
    if "kl_ref_sum" in terms:
        columns["kl_ref"] = per_token(terms["kl_ref_sum"])
    if "mismatch_tokens" in terms:
        columns.update(mismatch_columns(terms))
    if "is_weight_sum" in terms:
        columns["is_weight_mean"] = per_token(terms["is_weight_sum"])
    if "rejected_tokens" in terms:
        columns["rejected_tokens"] = arrow_array(terms["rejected_tokens"])
    return columns


plan = plan_objective

objective_file = file_function(sys.modules[__name__])
