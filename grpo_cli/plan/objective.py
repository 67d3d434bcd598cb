"""The plan of `grpo objective`: the token columns, where the advantages come from, the objective."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .. import schema
from ..config import AdvantageConfig
from ..errors import ColumnNotFoundError, UsageError
from ..estimators import lookup
from ..io import Source
from ..objective.config import ObjectiveConfig
from ..token_columns import StepColumns, TokenColumns
from . import Grouping, Inputs, Output, reads_tokens, resolve_grouping, resolve_inputs, resolve_output

OBJECTIVE_ESTIMATOR = "mean"  # `grpo objective` without an advantage column or a preset: r - group mean


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
    def roles(self) -> dict[str, str | None]:
        """Which column plays which role (``None``: no column does)."""
        t = self.tokens
        i = self.inputs.roles if self.inputs else {}
        return {"prompt": self.grouping.prompt, "reward": i.get("reward"), "baseline": i.get("baseline"),
                "advantage": self.advantage or t.advantage, "logprobs": t.new, "old_logprobs": t.old, "ref_logprobs": t.ref,
                "rollout_logprobs": t.rollout, "mask": t.mask}

    @property
    def advantages_from(self) -> dict:
        """Where the advantages come from: a column (per row or per token), or an estimator
        and its options."""
        if self.estimator is None:
            return {"column": self.advantage or self.tokens.advantage, "per_token": self.per_token}
        figures = {k: v for k, v in self.estimator.figures.items() if k != "preset"}  # the objective's config has it
        if self.estimator.scale == "none":
            figures.update(std=None, eps=None)
        return figures

    def run(self, engine: Any, source: Source) -> dict:
        """Run on ``engine`` (an :class:`~grpo_cli.engines.Engine`); the engine's figures."""
        return engine.objective(source, self)

    @property
    def figures(self) -> dict:
        """What the summary says of the plan itself (``config`` entries join the summary's)."""
        return {"columns": self.roles, "unused_columns": list(self.unused), "config": {"advantages": self.advantages_from}}

    @property
    def first_pass(self) -> bool:
        """Whether ids or rewards are read before streaming: to compute advantages, or to
        check group sizes against ``num_generations``."""
        return self.estimator is not None or self.grouping.num_generations is not None

    @property
    def per_token(self) -> bool:
        return self.tokens.advantage is not None

    @property
    def columns(self) -> list[str]:
        """The columns a summary-only run streams."""
        return self.tokens.names + ([self.advantage] if self.advantage else [])


def objective_estimator(estimator: str | None = None, preset: str | None = None, **options) -> AdvantageConfig | None:
    """The estimator of `grpo objective` from its estimator options as given (``None``: not
    given): ``None`` when none is, so the advantages come from an advantage column, else
    from estimator :data:`OBJECTIVE_ESTIMATOR` (or the preset's). These options need
    ``estimator``, since an advantage column takes none of them.
    """
    if estimator is None:
        for option, value in options.items():
            if value is not None and value is not False:
                raise UsageError(f"`{option}` applies to an estimator, and none is given: the advantages come from an "
                                 f"advantage column if there is one, else from estimator {OBJECTIVE_ESTIMATOR!r}, which takes "
                                 f"no `{option}`; pass `estimator` (e.g. 'grpo'), or drop `{option}`")
        return None
    return AdvantageConfig(preset=preset, estimator=estimator, **options)


def default_estimator(preset: str | None) -> AdvantageConfig:
    """What `grpo objective` computes advantages with when no estimator is given and no column
    holds them: the preset's estimator, else :data:`OBJECTIVE_ESTIMATOR`."""
    return AdvantageConfig(preset=preset) if preset is not None else AdvantageConfig(estimator=OBJECTIVE_ESTIMATOR)


def plan_objective(
    source: Source,
    *,
    config: ObjectiveConfig | None = None,
    advantage_config: AdvantageConfig | None = None,
    advantage_col: str | None = None,
    prompt_col: str | None = None,
    reward_col: str | list[str] | None = None,
    baseline_col: str | None = None,
    num_generations: int | None = None,
    logprobs_col: str | None = None,
    old_logprobs_col: str | None = None,
    ref_logprobs_col: str | None = None,
    rollout_logprobs_col: str | None = None,
    mask_col: str | None = None,
    output: str | None = None,
    output_dir: str | None = None,
    output_format: str | None = None,
    compression: str | None = None,
) -> ObjectivePlan:
    """The plan of `grpo objective` on ``source`` (see :func:`grpo_cli.objective_file`).

    Advantages: computed from the rewards with ``advantage_config`` if given; else read from
    ``advantage_col``, or an ``advantage`` column if the input has one; else computed with
    estimator :data:`OBJECTIVE_ESTIMATOR` (or ``config.preset``'s).
    """
    config = config or ObjectiveConfig()
    out = resolve_output(source, output, output_dir, output_format, compression)
    s, name = source.schema, source.name
    ref = schema.resolve_column(s, "ref", ref_logprobs_col, required=False, source=name)
    if ref is None and (config.beta > 0 or "kl" in config.given):
        looked = ", ".join(schema.ROLES["ref"].candidates)
        option = "`beta` > 0" if config.beta > 0 else "`kl`"
        raise UsageError(f"{option} needs reference log-probs: pass `ref_logprobs_col` (looked for {looked})")
    rollout = schema.resolve_column(s, "rollout", rollout_logprobs_col, required=False, source=name)
    correcting = [option for option in ("is_level", "reject") if getattr(config, option) is not None]
    if rollout is None and correcting:
        raise ColumnNotFoundError(f"{name}: `{correcting[0]}` needs the rollout sampler's log-probs: pass `rollout_logprobs_col` "
                                  f"(looked for {', '.join(schema.ROLES['rollout'].candidates)})")
    if advantage_config is not None and advantage_col is not None:
        raise UsageError("pass either `advantage_col` or `advantage_config` (an estimator), not both")
    column = None
    if advantage_config is None:
        column = schema.resolve_column(s, "advantage", advantage_col, required=advantage_col is not None, source=name)
    for option, value in (("reward_col", reward_col), ("baseline_col", baseline_col)):
        if column is not None and value is not None:
            raise UsageError(f"`{option}` is not read: the advantages come from column {column!r}; "
                             f"drop `{option}`, or pass `estimator` to compute them from the rewards")
    per_token = column is not None and schema.is_list(s.field(column).type)
    if column is not None and not per_token:
        schema.check_numeric(s.field(column), name, "advantage")
    estimator = None if column is not None else advantage_config or default_estimator(config.preset)
    tokens = TokenColumns(
        new=schema.resolve_column(s, "new", logprobs_col, source=name),
        old=schema.resolve_column(s, "old", old_logprobs_col, source=name),
        ref=ref,
        mask=schema.resolve_column(s, "mask", mask_col, required=False, source=name),
        advantage=column if per_token else None,
        rollout=rollout,
    )
    grouping = resolve_grouping(source, prompt_col, num_generations, required=False)
    inputs = None
    if estimator is not None:
        if lookup(estimator.estimator).level == "token":
            raise UsageError(f"estimator {estimator.estimator!r} gives per-token advantages: write them with "
                             f"`grpo advantages --estimator {estimator.estimator} -o FILE`, then pass that file here")
        if estimator.kl_in_reward is not None and tokens.ref is None:
            raise UsageError(f"`kl_in_reward` needs reference log-probs: pass `ref_logprobs_col` (looked for {', '.join(schema.ROLES['ref'].candidates)})")
        steps = StepColumns(tokens.mask or tokens.new, tokens.mask, tokens.old, tokens.ref) if reads_tokens(estimator) else None
        inputs = resolve_inputs(source, estimator, reward_col, baseline_col, steps)
    plan = ObjectivePlan(config, tokens, grouping, None if per_token else column, inputs, estimator, out)
    used = tuple(plan.roles.values())
    return replace(plan, unused=tuple(schema.lookalikes(s, "ref", used) + schema.lookalikes(s, "mask", used)))
