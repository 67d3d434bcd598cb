"""The plan of `grpo inspect`: each role's column and why, the groups, the reward, the token counts."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from .. import schema
from ..errors import UsageError
from ..io import Source
from ..token_columns import StepColumns
from . import Grouping, Inputs


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
