"""One plan per run: the input's columns and their roles, the options and the checks between
them, resolved once into a frozen plan whose ``run(engine, source)`` runs the command on an
engine's primitives.

The CLI and the Python API both call a command's ``plan`` (through :mod:`grpo_cli.files`).
Here are the pieces every plan resolves alike (groups, rewards, token columns, output) and
:func:`plan_advantages`, which the Python API shares; each other command's plan lives in its
module (:mod:`grpo_cli.commands`), so that a run imports only its command's. A plan holds
names and numbers only (no open file), so an engine can ship it to workers. Options given
where the resolved plan does not use them are refused here, each with what to pass instead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pyarrow as pa

from . import schema
from .config import AdvantageConfig, check_range
from .errors import ColumnNotFoundError, UsageError
from .estimators import ESTIMATORS, kl_after_baseline, lookup, needed_by, needs
from .io import Layout, Source, Writes, resolve_output_format
from .numerics import ROUND_DIGITS_MAX
from .passes import column_path, run_advantages

if TYPE_CHECKING:
    from .engines import Engine
    from .token_columns import StepColumns

SAMPLE_INDEX = "index"  # OpenRLHF numbers its samples here: blocks of `num_generations` rows follow it
OBJECTIVE_ESTIMATOR = "mean"  # `grpo objective` without an advantage column or a preset: r - group mean


@dataclass(frozen=True)
class Grouping:
    """How rows form groups: by the ``prompt`` id column, else consecutive blocks of
    ``num_generations`` rows, else one group of the whole input. With both, every group
    must have ``num_generations`` rows. ``detected``: the id column was found by its name
    (not given) for a run whose numbers need groups, so an id unique on every row, which
    would make every group one row, is refused (OpenRLHF's ``index`` numbers samples)."""

    prompt: str | None
    num_generations: int | None
    detected: bool = False
    within: tuple[str, ...] = ()  # a composite key: these columns, then ``prompt`` (``--prompt-col step --prompt-col input``)
    by: str | None = None  # the batch column: each of its values is a batch (``--by step``)
    by_file: bool = False  # each input file is a batch
    by_detected: bool = False  # ``by`` was found by its name
    order: str | None = None  # blocks of rows: the column that numbers the samples (OpenRLHF's ``index``), checked ascending

    @property
    def batched(self) -> bool:
        """The rows are split into batches (:attr:`by` or :attr:`by_file`)."""
        return self.by is not None or self.by_file

    @property
    def batches_described(self) -> str | None:
        """Where the batches come from, as the summary says it (``None``: one batch, the input)."""
        if self.by is not None:
            return f"by column {self.by!r}" + (", found by its name" if self.by_detected else "")
        return "by input file" if self.by_file else None

    @property
    def key(self) -> str | tuple[str, ...] | None:
        """What a row's group is read from: the id column, or the columns of a composite key."""
        return (*self.within, self.prompt) if self.within and self.prompt is not None else self.prompt

    @property
    def columns(self) -> list[str]:
        """The columns of the key (none without an id)."""
        return [*self.within, self.prompt] if self.prompt is not None else []

    @property
    def shown(self) -> str | list[str] | None:
        """The key's column as the summary names it (a list for a composite key)."""
        return self.columns if self.within else self.prompt

    @property
    def described(self) -> str:
        """Where the groups come from, as the summary says it."""
        if self.within:
            return "by columns " + ", ".join(repr(c) for c in self.columns)
        if self.prompt is not None:
            return f"by column {self.prompt!r}"
        if self.num_generations is not None:
            return f"consecutive blocks of {self.num_generations} rows"
        return "one group per batch" if self.batched else "one group: the whole input"


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
    summed: tuple[str, ...] = ()  # the reward columns that hold a list per row (summed)
    reward_mask: str | None = None  # the mask those lists are summed over (their valid tokens)

    @property
    def roles(self) -> dict:
        """Which column plays which role (``reward``: a list when there are several)."""
        s = self.steps
        return {
            "reward": self.rewards[0] if len(self.rewards) == 1 else list(self.rewards),
            "baseline": self.baseline,
            "tokens": s.count if s is not None and s.count != s.mask else None,
            "mask": s and s.mask,
            "kl_logprobs": s and s.policy,
            "ref_logprobs": s and s.ref,
            "values": s and s.values,
            **({"old_logprobs": s.old, "sum_pi_squared": s.sum_pi_squared} if s and s.sum_pi_squared else {}),  # older summaries have no key
            **({"is_weights": s.is_weights} if s and s.is_weights else {}),
        }


@dataclass(frozen=True)
class AdvantagesPlan:
    """`grpo advantages`: read ``inputs`` grouped by ``grouping``, compute with ``estimator``,
    write the column ``advantage_name`` (rounded to ``round_digits`` if given), or for a
    token-level estimator the list columns ``advantage_name`` and ``token_return``."""

    grouping: Grouping
    inputs: Inputs
    estimator: AdvantageConfig
    output: Output
    round_digits: int | None = None
    advantage_name: str = "advantage"

    @property
    def token_level(self) -> bool:
        """It writes per-token lists: a token-level estimator, or the KL after the baseline."""
        return lookup(self.estimator.estimator).level == "token" or kl_after_baseline(self.estimator)

    @property
    def roles(self) -> dict[str, str | None]:
        """Which column plays which role (``None``: no column does)."""
        return {"prompt": self.grouping.shown, **self.inputs.roles}

    def run(self, engine: Engine, source: Source) -> dict:
        """Compute and write the advantages on ``engine``; the figures of :func:`grpo_cli.summaries.advantage_figures`."""
        return run_advantages(engine, source, self)

    @property
    def figures(self) -> dict:
        """What the summary says of the plan itself (``rewards_summed``: the list reward
        columns, each row's reward their sum; only when there are some)."""
        summed = [name for name in self.inputs.rewards if name in self.inputs.summed]
        batches = self.grouping.batches_described
        return {"columns": self.roles, **({"rewards_summed": summed} if summed else {}), **({"batches": batches} if batches else {})}


def objective_estimator(estimator: str | None = None, preset: str | None = None, **options) -> AdvantageConfig | None:
    """The estimator of `grpo objective` from its estimator options as given (``None``: not
    given): ``None`` when none is, so the advantages come from an advantage column, else
    from estimator :data:`OBJECTIVE_ESTIMATOR` (or the preset's). These options need
    ``estimator``, since an advantage column takes none of them.
    """
    if estimator is None:
        for option, value in options.items():
            if value is not None and value is not False:
                raise UsageError(
                    f"`{option}` applies to an estimator, and none is given: the advantages come from an "
                    f"advantage column if there is one, else from estimator {OBJECTIVE_ESTIMATOR!r}, which takes "
                    f"no `{option}`; pass `estimator` (e.g. 'grpo'), or drop `{option}`"
                )
        return None
    return AdvantageConfig(preset=preset, estimator=estimator, **options)


def default_estimator(preset: str | None) -> AdvantageConfig:
    """What `grpo objective` computes advantages with when no estimator is given and no column
    holds them: the preset's estimator, else :data:`OBJECTIVE_ESTIMATOR`."""
    return AdvantageConfig(preset=preset) if preset is not None else AdvantageConfig(estimator=OBJECTIVE_ESTIMATOR)


def resolve_grouping(
    source: Source,
    prompt_col: str | list[str] | None,
    num_generations: int | None,
    *,
    required: bool,
    grouped: bool | None = None,
    batched: bool | None = None,
    by: str | None = None,
    by_file: bool = False,
) -> Grouping:
    """The groups: the prompt id column if there is one, else ``num_generations``; ``required``:
    one of them must be there; ``grouped`` (default ``required``): the run's numbers need
    groups (an id column found by name must then not be unique on every row). A run whose
    numbers need no groups does not ask which of two id columns to use: it uses none.
    Several ``prompt_col`` are a composite key: a group is the rows equal on every one
    (``step`` and ``input``: the same prompt at two steps is two groups).

    ``batched`` (default ``grouped``): the run computes advantages or groups, so it has
    batches: each value of ``by`` (default: a ``step`` column, if present; 'none': the input
    is one batch), or each input file (``by_file``)."""
    grouping = _groups(source, prompt_col, num_generations, required=required, grouped=grouped)
    batched = (required if grouped is None else grouped) if batched is None else batched
    if not batched:
        if by not in (None, schema.NO_COLUMN) or by_file:
            raise UsageError(
                f"`{'by' if by is not None else 'by_file'}` splits advantages and groups into batches, and this run computes neither; drop it"
            )
        return grouping
    return resolve_batches(source, grouping, by, by_file)


def resolve_batches(source: Source, grouping: Grouping, by: str | None, by_file: bool) -> Grouping:
    """``grouping`` in batches: each value of ``by`` (default: a ``step`` column, if present;
    'none': the input is one batch), or each input file (``by_file``)."""
    if by_file:
        if by not in (None, schema.NO_COLUMN):
            raise UsageError(f"`by` {by!r} and `by_file` each make the batches; pass one")
        return replace(grouping, by_file=True)
    column = schema.resolve_column(source.schema, "batch", by, required=False, source=source.name)
    if column is not None and pa.types.is_nested(source.schema.field(column).type):
        raise UsageError(f"column {column!r} of `by` holds {source.schema.field(column).type}; a batch column holds one value per row")
    return replace(grouping, by=column, by_detected=column is not None and by is None)


def _groups(source: Source, prompt_col: str | list[str] | None, num_generations: int | None, *, required: bool, grouped: bool | None) -> Grouping:
    """:func:`resolve_grouping`'s groups, before the batches."""
    schema.positive_int(num_generations, "num_generations")
    if prompt_col is not None and not isinstance(prompt_col, str):
        if len(set(prompt_col)) < len(prompt_col) or schema.NO_COLUMN in prompt_col:
            raise UsageError(f"`prompt_col` takes each column of a composite key once, and not 'none' (found {', '.join(prompt_col)})")
        if len(prompt_col) > 1:
            key = [schema.resolve_column(source.schema, "prompt", c, source=source.name) for c in prompt_col]
            return Grouping(key[-1], num_generations, within=tuple(key[:-1]))
        prompt_col = prompt_col[0]
    grouped = required if grouped is None else grouped
    try:
        prompt = schema.resolve_column(source.schema, "prompt", prompt_col, required=False, source=source.name)
    except UsageError:
        if required or grouped or prompt_col is not None:
            raise
        prompt = None  # two candidates, and nothing needs them
    if prompt is None and num_generations is None and required:
        raise ColumnNotFoundError(
            f"{source.name}: no prompt id column (looked for {', '.join(schema.ROLES['prompt'].candidates)}); "
            "pass `prompt_col`, or `num_generations` N to group consecutive blocks of N rows"
        )
    order = SAMPLE_INDEX if prompt is None and num_generations is not None and _integers(source, SAMPLE_INDEX) else None
    return Grouping(prompt, num_generations, detected=prompt is not None and prompt_col is None and grouped, order=order)


def _integers(source: Source, name: str) -> bool:
    """The input has an integer column ``name``."""
    return name in source.schema.names and pa.types.is_integer(source.schema.field(name).type)


def resolve_rewards(source: Source, reward_col: str | list[str] | tuple[str, ...] | None, config: AdvantageConfig) -> tuple[str, ...]:
    """The reward columns (one, or several: one per reward function), each a column or a
    struct field ``column.field``; as many as ``config.reward_weights``."""
    given = [reward_col] if reward_col is None or isinstance(reward_col, str) else list(reward_col)
    if len(set(given)) < len(given):
        raise UsageError(f"`reward_col` names a column twice ({', '.join(map(str, given))})")
    rewards = tuple(schema.resolve_column(source.schema, "reward", name, source=source.name) for name in given)
    for reward in rewards:
        path = column_path(source, reward)
        lacking = next((p for p, s in zip(source.parts, source.part_schemas) if len(path) > 1 and schema.field_path(s, reward) is None), None)
        if lacking is not None:  # its rows would read null: unscored in silence
            raise ColumnNotFoundError(f"{lacking.name}: no field {reward!r}, which this run reads (other input files have it)")
        field = pa.field(reward, schema.field_type(source.schema, path))
        schema.check_numeric(field, source.name, "reward")
    if config.reward_weights is not None and len(config.reward_weights) != len(rewards):
        raise UsageError(
            f"`reward_weights` has {len(config.reward_weights)} weights for {len(rewards)} reward columns "
            f"({', '.join(rewards)}); give one weight per `reward_col`"
        )
    return rewards


def resolve_inputs(
    source: Source,
    config: AdvantageConfig,
    reward_col,
    baseline_col: str | None,
    steps: StepColumns | None,
    *,
    per_token: bool = False,
    mask_col: str | None = None,
) -> Inputs:
    """The rewards, and the baseline column if the estimator reads one. ``per_token``: the
    command writes per-token advantages (`grpo advantages`); the others take one per row.
    List rewards are summed over the estimator's token mask, else ``mask_col``'s."""
    spec = lookup(config.estimator)
    if kl_after_baseline(config) and not per_token:
        raise UsageError(
            "`kl_at` 'after-baseline' gives each token its own advantage: write them with `grpo advantages -o FILE`, "
            "then pass that file here; or pass `kl_at` 'before-baseline'"
        )
    baseline = None
    if "baseline" in spec.needs:
        baseline = schema.resolve_column(source.schema, "baseline", baseline_col, source=source.name)
        schema.check_numeric(source.schema.field(baseline), source.name, "baseline")
    elif baseline_col is not None:
        raise UsageError(f"`baseline_col` is read only by estimator 'remax' (found {config.estimator!r}); drop it, or pass `estimator` 'remax'")
    rewards = resolve_rewards(source, reward_col, config)
    summed = summed_rewards(source, rewards)
    return Inputs(rewards, baseline, steps, summed, resolve_reward_mask(source, summed, steps.mask if steps and steps.mask else mask_col))


def summed_rewards(source: Source, rewards: tuple[str, ...]) -> tuple[str, ...]:
    """The reward columns that hold a list per row (each row's reward is their sum)."""
    return tuple(r for r in rewards if schema.is_list(schema.field_type(source.schema, column_path(source, r))))


def resolve_reward_mask(source: Source, summed: tuple[str, ...], mask_col: str | None) -> str | None:
    """The token mask list rewards are summed over (``mask_col``, or found by its name; none
    without list rewards): a row's reward is the sum over its valid tokens."""
    if not summed:
        return None
    return schema.resolve_column(source.schema, "mask", mask_col, required=False, source=source.name)


def reads_tokens(config: AdvantageConfig) -> bool:
    """Whether the estimator reads token columns: token-level, a row's length (also to whiten
    over tokens, :func:`~grpo_cli.estimators.needs`), or the KL in the reward."""
    return lookup(config.estimator).level == "token" or "length" in needs(config) or config.kl_in_reward is not None


def resolve_steps(source: Source, config: AdvantageConfig, **columns: str | None) -> StepColumns | None:
    """The token columns the estimator of `grpo advantages` reads (``None``: none). The row's
    tokens are counted in the mask, else in the log-probs; a column option given where no
    token column is read is refused."""
    if not reads_tokens(config):
        for option, value in columns.items():
            if value is not None:
                raise UsageError(
                    f"`{option}` is not read: estimator {config.estimator!r} reads no token column "
                    f"(without `kl_in_reward` or `multi_reward` 'normalize-then-sum-tokens'); drop `{option}`"
                )
        return None
    from .token_columns import StepColumns  # imported only by a plan that reads token columns

    s, name = source.schema, source.name
    given = schema.given_columns(
        {role: columns.get(schema.ROLES[role].param) for role in ("mask", "old", "new", "ref", "values", "sum_pi_squared", "is_weights")}
    )
    mask = schema.resolve_column(s, "mask", columns["mask_col"], required=False, source=name, given=given)
    old = schema.resolve_column(s, "old", columns["old_logprobs_col"], required=False, source=name, given=given)
    new = schema.resolve_column(s, "new", columns["logprobs_col"], required=False, source=name, given=given)
    ref = policy = None
    if config.kl_in_reward is not None:
        try:
            ref = schema.resolve_column(s, "ref", columns["ref_logprobs_col"], source=name, given=given)
        except ColumnNotFoundError as missing:
            if "kl_in_reward" in config.given:
                raise
            raise ColumnNotFoundError(
                f"{missing}; preset {config.preset!r} puts the KL in the reward for estimator {config.estimator!r} "
                f"(`kl_in_reward` {config.kl_in_reward:g}): pass `kl_in_reward` 0 to leave it out"
            ) from None
        policy = old or new
        if policy is None:
            raise ColumnNotFoundError(
                f"{name}: `kl_in_reward` needs the rollout policy's log-probs (looked for "
                f"{', '.join(schema.ROLES['old'].candidates + schema.ROLES['new'].candidates)}); pass `old_logprobs_col`"
            )
    elif columns["ref_logprobs_col"] is not None:
        raise UsageError("`ref_logprobs_col` is read only by `kl_in_reward`; pass `kl_in_reward` BETA, or drop it")
    count = mask or old or new
    if count is None:
        raise ColumnNotFoundError(
            f"{name}: {needed_by(config, 'length')} needs each row's tokens: no mask or log-probs column "
            f"(looked for {', '.join(schema.ROLES['mask'].candidates + schema.ROLES['old'].candidates)}); "
            "pass `mask_col` or `logprobs_col`"
        )
    values = None
    if "values" in lookup(config.estimator).needs:
        values = schema.resolve_column(s, "values", columns["values_col"], source=name, given=given)
    elif columns["values_col"] is not None:
        raise UsageError(f"`values_col` is read only by estimator 'gae' (found {config.estimator!r}); drop it, or pass `estimator` 'gae'")
    sum_pi_squared = is_weights = None
    if "sum_pi_squared" in lookup(config.estimator).needs:
        sum_pi_squared = schema.resolve_column(s, "sum_pi_squared", columns.get("sum_pi_squared_col"), source=name, given=given)
        is_weights = schema.resolve_column(s, "is_weights", columns.get("is_weights_col"), required=False, source=name, given=given)
        if old is None:
            raise ColumnNotFoundError(
                f"{name}: estimator {config.estimator!r} needs the old log-probs (looked for {', '.join(schema.ROLES['old'].candidates)}); "
                "pass `old_logprobs_col`"
            )
    else:
        otb = ", ".join(repr(e.name) for e in ESTIMATORS.values() if "sum_pi_squared" in e.needs)
        for option in ("sum_pi_squared_col", "is_weights_col"):
            if columns.get(option) not in (None, schema.NO_COLUMN):
                raise UsageError(f"`{option}` is read only by estimators {otb} (found {config.estimator!r}); drop it")
    return StepColumns(count, mask, policy, ref, values, old if sum_pi_squared else None, sum_pi_squared, is_weights)


def resolve_output(source: Source, output: str | None, output_dir: str | None, output_format: str | None, compression: str | None) -> Output:
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
    prompt_col: str | list[str] | None = None,
    reward_col: str | list[str] | None = None,
    baseline_col: str | None = None,
    num_generations: int | None = None,
    by: str | None = None,
    by_file: bool = False,
    mask_col: str | None = None,
    logprobs_col: str | None = None,
    old_logprobs_col: str | None = None,
    ref_logprobs_col: str | None = None,
    values_col: str | None = None,
    sum_pi_squared_col: str | None = None,
    is_weights_col: str | None = None,
    round_digits: int | None = None,
    advantage_name: str | None = None,
    output: str | None = None,
    output_dir: str | None = None,
    output_format: str | None = None,
    compression: str | None = None,
) -> AdvantagesPlan:
    """The plan of `grpo advantages` on ``source`` (see :func:`grpo_cli.advantages_file`):
    the advantages are written as column ``advantage_name`` (default ``advantage``, or
    ``token_advantage`` for a token-level estimator), replacing a column of that name the
    input has (a trainer's own, say) unless the run reads it."""
    config = config or AdvantageConfig()
    if round_digits is not None and (lookup(config.estimator).level == "token" or kl_after_baseline(config)):
        raise UsageError(f"`round_digits` rounds the per-row advantage column, and estimator {config.estimator!r} writes per-token lists; drop it")
    if round_digits is not None:
        check_range("round_digits", round_digits, 0, ROUND_DIGITS_MAX)
        if output is None and output_dir is None:
            raise UsageError("`round_digits` rounds the written advantages (the summary never is); pass `output` or `output_dir` too, or drop it")
    out = resolve_output(source, output, output_dir, output_format, compression)
    grouping = resolve_grouping(source, prompt_col, num_generations, required=lookup(config.estimator).grouped, batched=True, by=by, by_file=by_file)
    summing = bool(summed_rewards(source, resolve_rewards(source, reward_col, config)))  # a mask is read to sum list rewards
    steps = resolve_steps(
        source,
        config,
        mask_col=mask_col if reads_tokens(config) or not summing else None,
        logprobs_col=logprobs_col,
        old_logprobs_col=old_logprobs_col,
        ref_logprobs_col=ref_logprobs_col,
        values_col=values_col,
        sum_pi_squared_col=sum_pi_squared_col,
        is_weights_col=is_weights_col,
    )
    if advantage_name is not None and output is None and output_dir is None:
        raise UsageError("`advantage_name` names the written column; pass `output` or `output_dir` too, or drop it")
    name = advantage_name or ("token_advantage" if lookup(config.estimator).level == "token" or kl_after_baseline(config) else "advantage")
    inputs = resolve_inputs(source, config, reward_col, baseline_col, steps, per_token=True, mask_col=mask_col)
    plan = AdvantagesPlan(grouping, inputs, config, out, round_digits, name)
    for role, columns in plan.roles.items():
        for column in [columns] if isinstance(columns, str) else columns or []:
            if name in (column, column.split(".")[0]):
                raise UsageError(f"`advantage_name` {name!r} would overwrite the {role} column the run reads; pass another `advantage_name`")
    return plan
