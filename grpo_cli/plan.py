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
from .config import AdvantageConfig, ObjectiveConfig
from .errors import ColumnNotFoundError, UsageError
from .io import Source, output_targets
from .token_columns import TokenColumns

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
    ``per_input``: one target per input file, each with that file's own columns."""

    targets: tuple[str, ...]
    format: str
    per_input: bool = False


@dataclass(frozen=True)
class AdvantagesPlan:
    """`grpo advantages`: read ``reward`` grouped by ``grouping``, compute with ``estimator``,
    write ``advantage`` (rounded to ``round_digits`` if given)."""

    grouping: Grouping
    reward: str
    estimator: AdvantageConfig
    output: Output
    round_digits: int | None = None

    @property
    def roles(self) -> dict[str, str | None]:
        """Which column plays which role (``None``: no column does)."""
        return {"prompt": self.grouping.prompt, "reward": self.reward}

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
    reward: str | None
    estimator: AdvantageConfig | None
    output: Output
    unused: tuple[str, ...] = ()

    @property
    def roles(self) -> dict[str, str | None]:
        """Which column plays which role (``None``: no column does)."""
        t = self.tokens
        return {"prompt": self.grouping.prompt, "reward": self.reward, "advantage": self.advantage or t.advantage,
                "logprobs": t.new, "old_logprobs": t.old, "ref_logprobs": t.ref, "mask": t.mask}

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


def _grouping(source: Source, prompt_col: str | None, num_generations: int | None, *, required: bool) -> Grouping:
    schema.positive_int(num_generations, "num_generations")
    prompt = schema.resolve_column(source.schema, "prompt", prompt_col, required=False, source=source.name)
    if prompt is None and num_generations is None and required:
        raise ColumnNotFoundError(
            f"{source.name}: no prompt id column (looked for {', '.join(schema.ROLES['prompt'].candidates)}); "
            "pass `prompt_col`, or `num_generations` N to group consecutive blocks of N rows"
        )
    return Grouping(prompt, num_generations)


def _reward(source: Source, reward_col: str | None) -> str:
    """The reward column, or struct field ``column.field`` (one reward function of several)."""
    reward = schema.resolve_column(source.schema, "reward", reward_col, source=source.name)
    field = pa.field(reward, schema.field_type(source.schema, schema.field_path(source.schema, reward)))
    schema.check_numeric(field, source.name, "reward")
    return reward


def _output(source: Source, output: str | None, output_dir: str | None, output_format: str | None) -> Output:
    if output is None and output_dir is None and output_format is not None:
        raise UsageError("`output_format` applies to written rows; pass `output` or `output_dir` too, or drop it")
    targets, fmt = output_targets(source, output, output_dir, output_format)
    return Output(tuple(targets), fmt, output_dir is not None)


def plan_advantages(
    source: Source,
    *,
    config: AdvantageConfig | None = None,
    prompt_col: str | None = None,
    reward_col: str | None = None,
    num_generations: int | None = None,
    round_digits: int | None = None,
    output: str | None = None,
    output_dir: str | None = None,
    output_format: str | None = None,
) -> AdvantagesPlan:
    """The plan of `grpo advantages` on ``source`` (see :func:`grpo_cli.advantages_file`)."""
    if round_digits is not None:
        if round_digits < 0:
            raise UsageError(f"`round_digits` must be >= 0 (found {round_digits!r})")
        if output is None and output_dir is None:
            raise UsageError("`round_digits` rounds the written advantages (the summary never is); pass `output` or `output_dir` too, or drop it")
    out = _output(source, output, output_dir, output_format)
    grouping = _grouping(source, prompt_col, num_generations, required=True)
    return AdvantagesPlan(grouping, _reward(source, reward_col), config or AdvantageConfig(), out, round_digits)


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
    reward_col: str | None = None,
    num_generations: int | None = None,
    logprobs_col: str | None = None,
    old_logprobs_col: str | None = None,
    ref_logprobs_col: str | None = None,
    mask_col: str | None = None,
    output: str | None = None,
    output_dir: str | None = None,
    output_format: str | None = None,
) -> ObjectivePlan:
    """The plan of `grpo objective` on ``source`` (see :func:`grpo_cli.objective_file`).

    Advantages: computed from the rewards with ``advantage_config`` if given; else read from
    ``advantage_col``, or an ``advantage`` column if the input has one; else computed with
    estimator :data:`OBJECTIVE_ESTIMATOR` (or ``config.preset``'s).
    """
    config = config or ObjectiveConfig()
    out = _output(source, output, output_dir, output_format)
    s, name = source.schema, source.name
    ref = schema.resolve_column(s, "ref", ref_logprobs_col, required=False, source=name)
    if ref is None and (config.beta > 0 or "kl" in config.given):
        looked = ", ".join(schema.ROLES["ref"].candidates)
        option = "`beta` > 0" if config.beta > 0 else "`kl`"
        raise UsageError(f"{option} needs reference log-probs: pass `ref_logprobs_col` (looked for {looked})")
    if advantage_config is not None and advantage_col is not None:
        raise UsageError("pass either `advantage_col` or `advantage_config` (an estimator), not both")
    column = None
    if advantage_config is None:
        column = schema.resolve_column(s, "advantage", advantage_col, required=advantage_col is not None, source=name)
    if column is not None and reward_col is not None:
        raise UsageError(f"`reward_col` is not read: the advantages come from column {column!r}; "
                         "drop `reward_col`, or pass `estimator` to compute them from the rewards")
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
    )
    grouping = _grouping(source, prompt_col, num_generations, required=False)
    reward = _reward(source, reward_col) if estimator is not None else None
    plan = ObjectivePlan(config, tokens, grouping, None if per_token else column, reward, estimator, out)
    used = tuple(plan.roles.values())
    return replace(plan, unused=tuple(schema.lookalikes(s, "ref", used) + schema.lookalikes(s, "mask", used)))

