"""Frozen, validated configuration shared by the CLI, the Python API and the engine."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import UsageError

ESTIMATOR_ALIASES = {"grpo": "grpo", "rloo": "rloo", "mean": "mean", "drgrpo": "mean", "unbiased": "mean"}
SCALES = ("group", "batch", "none")
STD_KINDS = {"population": 0, "sample": 1}


def _choice(name: str, value: str, valid) -> None:
    if value not in valid:
        raise UsageError(f"unknown `{name}` {value!r} (valid: {', '.join(valid)})")


@dataclass(frozen=True)
class AdvantageConfig:
    """How rewards become advantages.

    Attributes
    ----------
    estimator
        ``grpo`` (baseline: group mean), ``rloo`` (baseline: mean of the *other* rewards)
        or ``mean`` (aliases ``drgrpo``, ``unbiased``: group mean, never scaled).
    scale
        ``group`` (divide by the group's reward std), ``batch`` (by the std of all rewards)
        or ``none``. ``None`` means the estimator's default: ``group`` for grpo/rloo, ``none``
        for mean. ``mean`` with any scale but ``none`` is an error.
    std
        ``population`` (ddof 0, seed 000's convention; the CLI default) or ``sample``
        (ddof 1, as Twinkle, verl, TRL and OpenRLHF).
    eps
        Added to the std before dividing: ``A = (r - b) / (std + eps)``.
    """

    estimator: str = "grpo"
    scale: str | None = None
    std: str = "population"
    eps: float = 0.0

    def __post_init__(self) -> None:
        _choice("estimator", self.estimator, tuple(ESTIMATOR_ALIASES))
        canonical = ESTIMATOR_ALIASES[self.estimator]
        scale = self.scale if self.scale is not None else ("none" if canonical == "mean" else "group")
        _choice("scale", scale, SCALES)
        if canonical == "mean" and scale != "none":
            raise UsageError(
                f"estimator {self.estimator!r} is never scaled; drop `scale` {scale!r} or use `grpo`"
            )
        _choice("std", self.std, tuple(STD_KINDS))
        if not self.eps >= 0:
            raise UsageError(f"require `eps` >= 0 (found {self.eps!r})")
        object.__setattr__(self, "estimator", canonical)
        object.__setattr__(self, "scale", scale)

    @property
    def ddof(self) -> int:
        return STD_KINDS[self.std]
