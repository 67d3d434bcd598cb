"""One plan per run: the input's columns and their roles, the options and the checks between
them, resolved once into a frozen plan that every engine runs.

The CLI and the Python API both call :func:`plan_advantages` / :func:`plan_objective`
(through :mod:`grpo_cli.files`). A plan holds names and numbers only (no open file), so an
engine can ship it to workers. Options given where the resolved plan does not use them are
refused here, each with what to pass instead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pyarrow as pa

from . import schema
from .compare import parse_estimators
from .config import AdvantageConfig, check_range
from .filters import FilterConfig
from .mismatch import MismatchConfig
from .objective.config import ObjectiveConfig
from .errors import ColumnNotFoundError, UsageError
from .estimators import lookup
from .io import Source, Writes, resolve_output_format
from .numerics import ROUND_DIGITS_MAX
from .writer import Layout
from .token_columns import StepColumns, TokenColumns

OBJECTIVE_ESTIMATOR = "mean"  # `grpo objective` without an advantage column or a preset: r - group mean


@dataclass(frozen=True)
class Grouping:
    """How rows form groups: by the ``prompt`` id column, else consecutive blocks of
    ``num_generations`` rows, else one group of the whole input. With both, every group
    must have ``num_generations`` rows."""

    prompt: str | None
    num_generations: int | None

    @property
    def described(self) -> str:
        """Where the groups come from, as the summary says it."""
        if self.prompt is not None:
            return f"by column {self.prompt!r}"
        if self.num_generations is not None:
            return f"consecutive blocks of {self.num_generations} rows"
        return "one group: the whole input"


@dataclass(frozen=True)
class Output:
    """Where the annotated rows go (no targets: the summary only) and in which format;
    ``per_input``: one target per input file, each with that file's own columns; ``layout``:
    how parquet is written."""

    targets: tuple[str, ...]
    format: str
    per_input: bool = False
    layout: Layout = Layout()


@dataclass(frozen=True)
class Inputs:
    """What the estimator reads besides the grouping: the ``rewards`` columns, a
    ``baseline`` reward column, and token columns (``steps``)."""

    rewards: tuple[str, ...]
    baseline: str | None = None
    steps: StepColumns | None = None

    @property
    def roles(self) -> dict:
        """Which column plays which role (``reward``: a list when there are several)."""
        s = self.steps or StepColumns("")
        return {"reward": self.rewards[0] if len(self.rewards) == 1 else list(self.rewards), "baseline": self.baseline,
                "tokens": s.count if s.count and s.count != s.mask else None, "mask": s.mask, "kl_logprobs": s.policy,
                "ref_logprobs": s.ref, "values": s.values}


@dataclass(frozen=True)
class AdvantagesPlan:
    """`grpo advantages`: read ``inputs`` grouped by ``grouping``, compute with ``estimator``,
    write ``advantage`` (rounded to ``round_digits`` if given), or for a token-level
    estimator the list columns ``token_advantage`` and ``token_return``."""

    grouping: Grouping
    inputs: Inputs
    estimator: AdvantageConfig
    output: Output
    round_digits: int | None = None

    @property
    def token_level(self) -> bool:
        return lookup(self.estimator.estimator).level == "token"

    @property
    def roles(self) -> dict[str, str | None]:
        """Which column plays which role (``None``: no column does)."""
        return {"prompt": self.grouping.prompt, **self.inputs.roles}

    @property
    def figures(self) -> dict:
        """What the summary says of the plan itself."""
        return {"columns": self.roles}


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


@dataclass(frozen=True)
class MismatchPlan:
    """`grpo mismatch`: the old and rollout log-prob columns (``tokens.new`` is the old
    column: no new policy is read), the mask, and the prompt id column that names rows."""

    config: MismatchConfig
    tokens: TokenColumns
    prompt: str | None
    output: Output

    @property
    def roles(self) -> dict[str, str | None]:
        t = self.tokens
        return {"prompt": self.prompt, "old_logprobs": t.old, "rollout_logprobs": t.rollout, "mask": t.mask}

    @property
    def figures(self) -> dict:
        return {"columns": self.roles}

    @property
    def columns(self) -> list[str]:
        return list(dict.fromkeys(self.tokens.names))


def plan_mismatch(
    source: Source,
    *,
    config: MismatchConfig | None = None,
    prompt_col: str | None = None,
    old_logprobs_col: str | None = None,
    rollout_logprobs_col: str | None = None,
    mask_col: str | None = None,
    output: str | None = None,
    output_dir: str | None = None,
    output_format: str | None = None,
    compression: str | None = None,
) -> MismatchPlan:
    """The plan of `grpo mismatch` on ``source`` (see :func:`grpo_cli.mismatch_file`)."""
    s, name = source.schema, source.name
    old = schema.resolve_column(s, "old", old_logprobs_col, source=name)
    rollout = schema.resolve_column(s, "rollout", rollout_logprobs_col, source=name)
    tokens = TokenColumns(new=old, old=old, mask=schema.resolve_column(s, "mask", mask_col, required=False, source=name), rollout=rollout)
    prompt = schema.resolve_column(s, "prompt", prompt_col, required=False, source=name)
    return MismatchPlan(config or MismatchConfig(), tokens, prompt, _output(source, output, output_dir, output_format, compression))


@dataclass(frozen=True)
class FilterPlan:
    """`grpo filter`: the groups and their ``reward`` column, the ``truncated`` flag column,
    the token columns that give each row's length (``steps``, for the overlong penalty), and
    the ``mask`` column that masking truncated rows zeroes."""

    config: FilterConfig
    grouping: Grouping
    reward: str
    truncated: str | None
    steps: StepColumns | None
    mask: str | None
    output: Output
    unused: tuple[str, ...] = ()

    @property
    def roles(self) -> dict[str, str | None]:
        return {"prompt": self.grouping.prompt, "reward": self.reward, "truncated": self.truncated,
                "tokens": self.steps.count if self.steps else None, "mask": self.mask}

    @property
    def figures(self) -> dict:
        return {"columns": self.roles, "unused_columns": list(self.unused)}


def plan_filter(
    source: Source,
    *,
    config: FilterConfig,
    prompt_col: str | None = None,
    reward_col: str | None = None,
    num_generations: int | None = None,
    truncated_col: str | None = None,
    mask_col: str | None = None,
    logprobs_col: str | None = None,
    output: str | None = None,
    output_dir: str | None = None,
    output_format: str | None = None,
    compression: str | None = None,
) -> FilterPlan:
    """The plan of `grpo filter` on ``source`` (see :func:`grpo_cli.filter_file`)."""
    s, name = source.schema, source.name
    grouped = config.drop_zero_variance or config.keep_if is not None
    grouping = _grouping(source, prompt_col, num_generations, required=grouped)
    reward = _rewards(source, reward_col, AdvantageConfig())
    if len(reward) != 1:
        raise UsageError("`grpo filter` reads one reward column; pass one `reward_col`")
    if config.overlong_buffer is not None and "." in reward[0] and reward[0] not in s.names:
        raise UsageError(f"the overlong penalty rewrites the reward, and {reward[0]!r} is a struct field; pass a top-level `reward_col`")
    truncated = schema.resolve_column(s, "truncated", truncated_col, required=config.truncated is not None, source=name)
    if truncated is not None and config.truncated is not None:
        field = s.field(truncated)
        if not (pa.types.is_boolean(field.type) or pa.types.is_integer(field.type)):
            raise UsageError(f"{name}: column {truncated!r} (truncation flag) must hold booleans or 0/1 (found {field.type})")
    counting = config.overlong_buffer is not None
    mask = schema.resolve_column(s, "mask", mask_col, required=config.truncated == "mask", source=name) \
        if counting or config.truncated == "mask" else None
    steps = None
    if config.overlong_buffer is not None:
        count = mask or schema.resolve_column(s, "new", logprobs_col, required=False, source=name) \
            or schema.resolve_column(s, "old", None, required=False, source=name)
        if count is None:
            raise ColumnNotFoundError(f"{name}: the overlong penalty needs each row's length: no mask or log-probs column; pass `mask_col`")
        steps = StepColumns(count, mask)
    unused = (truncated,) if truncated is not None and config.truncated is None else ()
    return FilterPlan(config, grouping, reward[0], truncated if config.truncated else None, steps, mask,
                      _output(source, output, output_dir, output_format, compression), unused)


@dataclass(frozen=True)
class ComparePlan:
    """`grpo compare`: the groups, and each estimator (its label, what it reads, its options);
    ``top``: how many of the most affected groups to list."""

    grouping: Grouping
    estimators: tuple[tuple[str, Inputs, AdvantageConfig], ...]
    output: Output
    top: int = 5

    @property
    def roles(self) -> dict:
        return {"prompt": self.grouping.prompt, **self.estimators[0][1].roles}

    @property
    def figures(self) -> dict:
        return {"columns": self.roles, "config": {label: config.figures for label, _, config in self.estimators}}


def plan_compare(
    source: Source,
    *,
    estimators: str,
    prompt_col: str | None = None,
    reward_col: str | list[str] | None = None,
    num_generations: int | None = None,
    baseline_col: str | None = None,
    mask_col: str | None = None,
    top: int = 5,
    output: str | None = None,
    output_dir: str | None = None,
    output_format: str | None = None,
    compression: str | None = None,
) -> ComparePlan:
    """The plan of `grpo compare` on ``source`` (see :func:`grpo_cli.compare_file`): the
    column options apply to the estimators that read those columns."""
    specs = parse_estimators(estimators)
    if top < 0:
        raise UsageError(f"`top` must be >= 0 (found {top!r})")
    grouping = _grouping(source, prompt_col, num_generations, required=any(lookup(c.estimator).grouped for _, c in specs))
    resolved = []
    for label, config in specs:
        needs = lookup(config.estimator).needs
        steps = _steps(source, config, mask_col=mask_col if reads_tokens(config) else None, logprobs_col=None, old_logprobs_col=None,
                       ref_logprobs_col=None, values_col=None)
        resolved.append((label, _inputs(source, config, reward_col, baseline_col if "baseline" in needs else None, steps), config))
    return ComparePlan(grouping, tuple(resolved), _output(source, output, output_dir, output_format, compression), top)


@dataclass(frozen=True)
class InspectPlan:
    """`grpo inspect`: each role's column and why (``roles``), the groups, the reward, the token
    columns that give each row's length (``steps``), a truncation column, and every column
    (``columns``, whose nulls are counted)."""

    roles: dict
    grouping: Grouping
    inputs: Inputs | None
    steps: StepColumns | None
    truncated: str | None
    columns: tuple[str, ...]

    @property
    def figures(self) -> dict:
        return {}


def plan_inspect(
    source: Source,
    *,
    prompt_col: str | None = None,
    reward_col: str | None = None,
    num_generations: int | None = None,
    mask_col: str | None = None,
    logprobs_col: str | None = None,
    old_logprobs_col: str | None = None,
    ref_logprobs_col: str | None = None,
    rollout_logprobs_col: str | None = None,
    advantage_col: str | None = None,
    truncated_col: str | None = None,
    output: None = None,
) -> InspectPlan:
    """The plan of `grpo inspect` on ``source`` (see :func:`grpo_cli.inspect_file`): it never
    stops on a role it cannot resolve; it says why. It writes no rows (``output`` is refused)."""
    if output is not None:
        raise UsageError("`grpo inspect` writes no rows; drop `output`")
    s, name = source.schema, source.name
    given = {"prompt": prompt_col, "reward": reward_col, "new": logprobs_col, "old": old_logprobs_col, "ref": ref_logprobs_col,
             "rollout": rollout_logprobs_col, "mask": mask_col, "advantage": advantage_col, "truncated": truncated_col}
    roles = {role: schema.explain_role(s, role, given[role], name) for role in given}
    schema.positive_int(num_generations, "num_generations")
    grouping = Grouping(roles["prompt"]["column"], num_generations)
    reward = roles["reward"]["column"]
    if reward is not None:
        schema.check_numeric(pa.field(reward, schema.field_type(s, schema.field_path(s, reward))), name, "reward")
    count = roles["mask"]["column"] or roles["new"]["column"] or roles["old"]["column"]
    steps = StepColumns(count, roles["mask"]["column"]) if count is not None else None
    return InspectPlan(roles, grouping, Inputs((reward,)) if reward is not None else None, steps, roles["truncated"]["column"],
                       tuple(s.names))


def _grouping(source: Source, prompt_col: str | None, num_generations: int | None, *, required: bool) -> Grouping:
    schema.positive_int(num_generations, "num_generations")
    prompt = schema.resolve_column(source.schema, "prompt", prompt_col, required=False, source=source.name)
    if prompt is None and num_generations is None and required:
        raise ColumnNotFoundError(
            f"{source.name}: no prompt id column (looked for {', '.join(schema.ROLES['prompt'].candidates)}); "
            "pass `prompt_col`, or `num_generations` N to group consecutive blocks of N rows"
        )
    return Grouping(prompt, num_generations)


def _rewards(source: Source, reward_col: str | list[str] | tuple[str, ...] | None, config: AdvantageConfig) -> tuple[str, ...]:
    """The reward columns (one, or several: one per reward function), each a column or a
    struct field ``column.field``; as many as ``config.reward_weights``."""
    given = [reward_col] if reward_col is None or isinstance(reward_col, str) else list(reward_col)
    if len(set(given)) < len(given):
        raise UsageError(f"`reward_col` names a column twice ({', '.join(given)})")
    rewards = tuple(schema.resolve_column(source.schema, "reward", name, source=source.name) for name in given)
    for reward in rewards:
        field = pa.field(reward, schema.field_type(source.schema, schema.field_path(source.schema, reward)))
        schema.check_numeric(field, source.name, "reward")
    if config.reward_weights is not None and len(config.reward_weights) != len(rewards):
        raise UsageError(f"`reward_weights` has {len(config.reward_weights)} weights for {len(rewards)} reward columns "
                         f"({', '.join(rewards)}); give one weight per `reward_col`")
    return rewards


def _inputs(source: Source, config: AdvantageConfig, reward_col, baseline_col: str | None, steps: StepColumns | None) -> Inputs:
    """The rewards, and the baseline column if the estimator reads one."""
    spec = lookup(config.estimator)
    baseline = None
    if "baseline" in spec.needs:
        baseline = schema.resolve_column(source.schema, "baseline", baseline_col, source=source.name)
        schema.check_numeric(source.schema.field(baseline), source.name, "baseline")
    elif baseline_col is not None:
        raise UsageError(f"`baseline_col` is read only by estimator 'remax' (found {config.estimator!r}); drop it, or pass `estimator` 'remax'")
    return Inputs(_rewards(source, reward_col, config), baseline, steps)


def reads_tokens(config: AdvantageConfig) -> bool:
    """Whether the estimator reads token columns: token-level, a row's length, or the KL in the reward."""
    spec = lookup(config.estimator)
    return spec.level == "token" or "length" in spec.needs or config.kl_in_reward is not None


def _steps(source: Source, config: AdvantageConfig, **columns: str | None) -> StepColumns | None:
    """The token columns the estimator of `grpo advantages` reads (``None``: none). The row's
    tokens are counted in the mask, else in the log-probs; a column option given where no
    token column is read is refused."""
    if not reads_tokens(config):
        for option, value in columns.items():
            if value is not None:
                raise UsageError(f"`{option}` is not read: estimator {config.estimator!r} reads no token column "
                                 f"(without `kl_in_reward`); drop `{option}`")
        return None
    s, name = source.schema, source.name
    mask = schema.resolve_column(s, "mask", columns["mask_col"], required=False, source=name)
    old = schema.resolve_column(s, "old", columns["old_logprobs_col"], required=False, source=name)
    new = schema.resolve_column(s, "new", columns["logprobs_col"], required=False, source=name)
    ref = policy = None
    if config.kl_in_reward is not None:
        ref = schema.resolve_column(s, "ref", columns["ref_logprobs_col"], source=name)
        policy = old or new
        if policy is None:
            raise ColumnNotFoundError(f"{name}: `kl_in_reward` needs the rollout policy's log-probs (looked for "
                                      f"{', '.join(schema.ROLES['old'].candidates + schema.ROLES['new'].candidates)}); pass `old_logprobs_col`")
    elif columns["ref_logprobs_col"] is not None:
        raise UsageError("`ref_logprobs_col` is read only by `kl_in_reward`; pass `kl_in_reward` BETA, or drop it")
    count = mask or old or new
    if count is None:
        raise ColumnNotFoundError(f"{name}: estimator {config.estimator!r} needs each row's tokens: no mask or log-probs column "
                                  f"(looked for {', '.join(schema.ROLES['mask'].candidates + schema.ROLES['old'].candidates)}); "
                                  "pass `mask_col` or `logprobs_col`")
    values = None
    if "values" in lookup(config.estimator).needs:
        values = schema.resolve_column(s, "values", columns["values_col"], source=name)
    elif columns["values_col"] is not None:
        raise UsageError(f"`values_col` is read only by estimator 'gae' (found {config.estimator!r}); drop it, or pass `estimator` 'gae'")
    return StepColumns(count, mask, policy, ref, values)


def _output(source: Source, output: str | None, output_dir: str | None, output_format: str | None, compression: str | None) -> Output:
    """Where the rows go, in which format, and how parquet is written. The paths were checked
    when the input was opened, before it was read (:meth:`~grpo_cli.io.Writes.check`)."""
    for name, given in (("output_format", output_format), ("compression", compression)):
        if output is None and output_dir is None and given is not None:
            raise UsageError(f"`{name}` applies to written rows; pass `output` or `output_dir` too, or drop it")
    targets = Writes(output, output_dir, output_format).targets(source.parts)
    fmt = resolve_output_format(output, output_format, source.format) if output is not None else output_format or source.format
    if compression is not None and fmt != "parquet":
        raise UsageError(f"`compression` applies to parquet output, and this output is {fmt}; drop it")
    return Output(tuple(targets), fmt, output_dir is not None, source.layout(compression))


def plan_advantages(
    source: Source,
    *,
    config: AdvantageConfig | None = None,
    prompt_col: str | None = None,
    reward_col: str | list[str] | None = None,
    baseline_col: str | None = None,
    num_generations: int | None = None,
    mask_col: str | None = None,
    logprobs_col: str | None = None,
    old_logprobs_col: str | None = None,
    ref_logprobs_col: str | None = None,
    values_col: str | None = None,
    round_digits: int | None = None,
    output: str | None = None,
    output_dir: str | None = None,
    output_format: str | None = None,
    compression: str | None = None,
) -> AdvantagesPlan:
    """The plan of `grpo advantages` on ``source`` (see :func:`grpo_cli.advantages_file`)."""
    config = config or AdvantageConfig()
    if round_digits is not None and lookup(config.estimator).level == "token":
        raise UsageError(f"`round_digits` rounds the per-row advantage column, and estimator {config.estimator!r} writes per-token lists; drop it")
    if round_digits is not None:
        check_range("round_digits", round_digits, 0, ROUND_DIGITS_MAX)
        if output is None and output_dir is None:
            raise UsageError("`round_digits` rounds the written advantages (the summary never is); pass `output` or `output_dir` too, or drop it")
    out = _output(source, output, output_dir, output_format, compression)
    grouping = _grouping(source, prompt_col, num_generations, required=lookup(config.estimator).grouped)
    steps = _steps(source, config, mask_col=mask_col, logprobs_col=logprobs_col, old_logprobs_col=old_logprobs_col,
                   ref_logprobs_col=ref_logprobs_col, values_col=values_col)
    return AdvantagesPlan(grouping, _inputs(source, config, reward_col, baseline_col, steps), config, out, round_digits)


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
    out = _output(source, output, output_dir, output_format, compression)
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
    grouping = _grouping(source, prompt_col, num_generations, required=False)
    inputs = None
    if estimator is not None:
        if lookup(estimator.estimator).level == "token":
            raise UsageError(f"estimator {estimator.estimator!r} gives per-token advantages: write them with "
                             f"`grpo advantages --estimator {estimator.estimator} -o FILE`, then pass that file here")
        if estimator.kl_in_reward is not None and tokens.ref is None:
            raise UsageError(f"`kl_in_reward` needs reference log-probs: pass `ref_logprobs_col` (looked for {', '.join(schema.ROLES['ref'].candidates)})")
        steps = StepColumns(tokens.mask or tokens.new, tokens.mask, tokens.old, tokens.ref) if reads_tokens(estimator) else None
        inputs = _inputs(source, estimator, reward_col, baseline_col, steps)
    plan = ObjectivePlan(config, tokens, grouping, None if per_token else column, inputs, estimator, out)
    used = tuple(plan.roles.values())
    return replace(plan, unused=tuple(schema.lookalikes(s, "ref", used) + schema.lookalikes(s, "mask", used)))

