"""The plan of `grpo compare`: the groups, and each estimator with what it reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..compare import parse_estimators
from ..config import AdvantageConfig
from ..errors import UsageError
from ..estimators import lookup
from ..io import Source
from . import Grouping, Inputs, Output, reads_tokens, resolve_grouping, resolve_inputs, resolve_output, resolve_steps


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

    def run(self, engine: Any, source: Source) -> dict:
        """Run on ``engine`` (an :class:`~grpo_cli.engines.Engine`); the engine's figures."""
        return engine.compare(source, self)

    @property
    def figures(self) -> dict:
        return {"columns": self.roles, "config": {label: config.figures for label, _, config in self.estimators}}


def plan_compare(
    source: Source,
    *,
    estimators: str,
    preset: str | None = None,
    reward_weights: tuple[float, ...] | None = None,
    multi_reward: str | None = None,
    on_null: str | None = None,
    reward_clip: tuple[float, float] | None = None,
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
    column options apply to the estimators that read those columns; ``preset`` and the reward
    options to every estimator, for the options it is not given (a preset's name in
    ``estimators`` stands for its own)."""
    specs = parse_estimators(estimators, preset=preset, reward_weights=reward_weights, multi_reward=multi_reward, on_null=on_null,
                             reward_clip=reward_clip)
    if top < 0:
        raise UsageError(f"`top` must be >= 0 (found {top!r})")
    grouping = resolve_grouping(source, prompt_col, num_generations, required=any(lookup(c.estimator).grouped for _, c in specs))
    resolved = []
    for label, config in specs:
        needs = lookup(config.estimator).needs
        steps = resolve_steps(source, config, mask_col=mask_col if reads_tokens(config) else None, logprobs_col=None, old_logprobs_col=None,
                              ref_logprobs_col=None, values_col=None)
        resolved.append((label, resolve_inputs(source, config, reward_col, baseline_col if "baseline" in needs else None, steps), config))
    return ComparePlan(grouping, tuple(resolved), resolve_output(source, output, output_dir, output_format, compression), top)
