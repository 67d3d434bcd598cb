"""The plan of `grpo filter`: the groups, the reward, the truncation flags, the row lengths."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from .. import schema
from ..config import AdvantageConfig
from ..errors import ColumnNotFoundError, UsageError
from ..filters import FilterConfig
from ..io import Source
from ..token_columns import StepColumns
from . import Grouping, Output, resolve_grouping, resolve_output, resolve_rewards


@dataclass(frozen=True)
class FilterPlan:
    """`grpo filter`: the groups and their ``rewards`` columns (read as ``reward_config``
    says: weights, nulls, clip), the ``truncated`` flag column, the token columns that give
    each row's length (``steps``, for the overlong penalty), and the ``mask`` column that
    masking truncated rows zeroes."""

    config: FilterConfig
    grouping: Grouping
    rewards: tuple[str, ...]
    reward_config: AdvantageConfig
    truncated: str | None
    steps: StepColumns | None
    mask: str | None
    output: Output
    unused: tuple[str, ...] = ()

    @property
    def roles(self) -> dict[str, str | None]:
        return {"prompt": self.grouping.prompt, "reward": self.reward if len(self.rewards) == 1 else list(self.rewards),
                "truncated": self.truncated, "tokens": self.steps.count if self.steps else None, "mask": self.mask}

    @property
    def reward(self) -> str:
        """The reward column the overlong penalty rewrites (there is one when it applies)."""
        return self.rewards[0]

    def run(self, engine: Any, source: Source) -> dict:
        """Run on ``engine`` (an :class:`~grpo_cli.engines.Engine`); the engine's figures."""
        return engine.filter(source, self)

    @property
    def figures(self) -> dict:
        return {"columns": self.roles, "unused_columns": list(self.unused)}


def plan_filter(
    source: Source,
    *,
    config: FilterConfig,
    prompt_col: str | None = None,
    reward_col: str | list[str] | None = None,
    reward_weights: tuple[float, ...] | None = None,
    multi_reward: str | None = None,
    on_null: str | None = None,
    reward_clip: tuple[float, float] | None = None,
    num_generations: int | None = None,
    truncated_col: str | None = None,
    mask_col: str | None = None,
    logprobs_col: str | None = None,
    output: str | None = None,
    output_dir: str | None = None,
    output_format: str | None = None,
    compression: str | None = None,
) -> FilterPlan:
    """The plan of `grpo filter` on ``source`` (see :func:`grpo_cli.filter_file`): the rewards
    are read as `grpo advantages` reads them (several columns, ``reward_weights``,
    ``multi_reward``, ``on_null``, ``reward_clip``); a row without any reward is refused."""
    s, name = source.schema, source.name
    grouped = config.drop_zero_variance or config.keep_if is not None
    grouping = resolve_grouping(source, prompt_col, num_generations, required=grouped)
    reward_config = AdvantageConfig(reward_weights=reward_weights, multi_reward=multi_reward, on_null=on_null, reward_clip=reward_clip)
    reward = resolve_rewards(source, reward_col, reward_config)
    if config.overlong_buffer is not None and len(reward) > 1:
        raise UsageError(f"the overlong penalty rewrites the reward column, and there are {len(reward)} ({', '.join(reward)}); "
                         "pass one `reward_col`")
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
    return FilterPlan(config, grouping, reward, reward_config, truncated if config.truncated else None, steps, mask,
                      resolve_output(source, output, output_dir, output_format, compression), unused)
