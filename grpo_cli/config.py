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


AGGREGATIONS = ("seq-mean-token-sum", "seq-mean-token-mean", "token-mean", "token-sum", "seq-mean-token-sum-norm")
KL_ESTIMATORS = ("k1", "k2", "k3", "abs")
RATIO_LEVELS = ("token", "sequence")


@dataclass(frozen=True)
class ObjectiveConfig:
    """The clipped policy objective (seed 002's defaults: Dr.GRPO, token sum, mean over rows).

    Attributes
    ----------
    epsilon
        Clip range for both sides: ``clip(rho, 1 - eps_low, 1 + eps_high)``.
    epsilon_low, epsilon_high
        Override one side (DAPO's clip-higher); ``None`` means ``epsilon``.
    dual_clip
        ``C > 1``: for ``A < 0`` the token term becomes ``max(surrogate, C * A)``.
    ratio_level
        ``token`` (PPO) or ``sequence`` (GSPO: ``exp`` of the mean token log-ratio of the row).
    agg
        How token terms become one number; see :func:`grpo_cli.objective.aggregate`.
    max_length
        The constant of ``seq-mean-token-sum-norm`` (required by it, unused otherwise).
    beta, kl
        KL penalty against reference log-probs: ``L - beta * KL`` with estimator ``kl``.
    logratio_clamp
        ``new - old`` is clamped to ``[-c, c]`` before ``exp`` (as verl, c = 20) so the
        ratio never overflows; clamped tokens are counted in the summary.
    """

    epsilon: float = 0.2
    epsilon_low: float | None = None
    epsilon_high: float | None = None
    dual_clip: float | None = None
    ratio_level: str = "token"
    agg: str = "seq-mean-token-sum"
    max_length: int | None = None
    beta: float = 0.0
    kl: str = "k3"
    logratio_clamp: float = 20.0

    def __post_init__(self) -> None:
        for name in ("epsilon", "epsilon_low", "epsilon_high"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise UsageError(f"require `{name}` > 0 (found {value!r})")
        if not self.eps_low < 1:
            raise UsageError(f"require `epsilon_low` < 1 so that 1 - epsilon_low > 0 (found {self.eps_low!r})")
        if self.dual_clip is not None and not self.dual_clip > 1:
            raise UsageError(f"require `dual_clip` > 1 (found {self.dual_clip!r})")
        _choice("ratio_level", self.ratio_level, RATIO_LEVELS)
        _choice("agg", self.agg, AGGREGATIONS)
        if self.agg == "seq-mean-token-sum-norm" and (self.max_length is None or self.max_length < 1):
            raise UsageError(f"`agg` 'seq-mean-token-sum-norm' needs `max_length` >= 1 (found {self.max_length!r})")
        if not self.beta >= 0:
            raise UsageError(f"require `beta` >= 0 (found {self.beta!r})")
        _choice("kl", self.kl, KL_ESTIMATORS)
        if not self.logratio_clamp > 0:
            raise UsageError(f"require `logratio_clamp` > 0 (found {self.logratio_clamp!r})")

    @property
    def eps_low(self) -> float:
        return self.epsilon if self.epsilon_low is None else self.epsilon_low

    @property
    def eps_high(self) -> float:
        return self.epsilon if self.epsilon_high is None else self.epsilon_high
