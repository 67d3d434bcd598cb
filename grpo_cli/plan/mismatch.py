"""The plan of `grpo mismatch`: the old and rollout log-prob columns, the mask, the prompt ids."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import schema
from ..io import Source
from ..mismatch import MismatchConfig
from ..token_columns import TokenColumns
from . import Grouping, Output, resolve_grouping, resolve_output


@dataclass(frozen=True)
class MismatchPlan:
    """`grpo mismatch`: the old and rollout log-prob columns (``tokens.new`` is the old
    column: no new policy is read), the mask, and the groups (their prompt id column names
    rows; with ``num_generations``, every group's size is checked)."""

    config: MismatchConfig
    tokens: TokenColumns
    grouping: Grouping
    output: Output

    @property
    def prompt(self) -> str | None:
        return self.grouping.prompt

    @property
    def roles(self) -> dict[str, str | None]:
        t = self.tokens
        return {"prompt": self.prompt, "old_logprobs": t.old, "rollout_logprobs": t.rollout, "mask": t.mask}

    def run(self, engine: Any, source: Source) -> dict:
        """Run on ``engine`` (an :class:`~grpo_cli.engines.Engine`); the engine's figures."""
        return engine.mismatch(source, self)

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
    num_generations: int | None = None,
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
    grouping = resolve_grouping(source, prompt_col, num_generations, required=False)
    return MismatchPlan(config or MismatchConfig(), tokens, grouping, resolve_output(source, output, output_dir, output_format, compression))
