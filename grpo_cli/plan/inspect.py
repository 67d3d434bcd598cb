"""The plan of `grpo inspect`: each role's column and why, the groups, the reward, the token counts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


from .. import schema
from ..config import AdvantageConfig
from ..errors import UsageError
from ..io import Source
from ..token_columns import StepColumns
from . import Grouping, Inputs, resolve_rewards


@dataclass(frozen=True)
class InspectPlan:
    """`grpo inspect`: each role's column and why (``roles``), the groups, the reward, the token
    columns that give each row's length (``steps``), a truncation column, every column
    (``columns``, whose nulls are counted), and the ``estimator`` of the advantages shown."""

    roles: dict
    grouping: Grouping
    inputs: Inputs | None
    steps: StepColumns | None
    truncated: str | None
    columns: tuple[str, ...]
    estimator: AdvantageConfig

    def run(self, engine: Any, source: Source) -> dict:
        """Run on ``engine`` (an :class:`~grpo_cli.engines.Engine`); the engine's figures."""
        return engine.inspect(source, self)

    @property
    def figures(self) -> dict:
        return {}


def plan_inspect(
    source: Source,
    *,
    preset: str | None = None,
    prompt_col: str | None = None,
    reward_col: str | list[str] | None = None,
    reward_weights: tuple[float, ...] | None = None,
    multi_reward: str | None = None,
    on_null: str | None = None,
    reward_clip: tuple[float, float] | None = None,
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
    stops on a role it cannot resolve; it says why. It writes no rows (``output`` is refused).
    The rewards are read as `grpo advantages` reads them (several columns, ``reward_weights``,
    ``multi_reward``, ``on_null``, ``reward_clip``); the advantages shown are the default
    estimator's, or ``preset``'s."""
    if output is not None:
        raise UsageError("`grpo inspect` writes no rows; drop `output`")
    s, name = source.schema, source.name
    config = AdvantageConfig(preset=preset, reward_weights=reward_weights, multi_reward=multi_reward, on_null=on_null, reward_clip=reward_clip)
    several = reward_col is not None and not isinstance(reward_col, str)
    given = {"prompt": prompt_col, "reward": None if several else reward_col, "new": logprobs_col, "old": old_logprobs_col, "ref": ref_logprobs_col,
             "rollout": rollout_logprobs_col, "mask": mask_col, "advantage": advantage_col, "truncated": truncated_col}
    roles = {role: schema.explain_role(s, role, given[role], name) for role in given}
    schema.positive_int(num_generations, "num_generations")
    grouping = Grouping(roles["prompt"]["column"], num_generations)
    if several:
        roles["reward"] = {"column": None, "why": "given", "option": "reward_col"}
    reward = reward_col if several else roles["reward"]["column"]
    rewards = resolve_rewards(source, reward, config) if reward is not None else None
    if several:
        roles["reward"]["column"] = ", ".join(rewards)
    count = roles["mask"]["column"] or roles["new"]["column"] or roles["old"]["column"]
    steps = StepColumns(count, roles["mask"]["column"]) if count is not None else None
    return InspectPlan(roles, grouping, Inputs(rewards) if rewards is not None else None, steps, roles["truncated"]["column"],
                       tuple(s.names), config)
