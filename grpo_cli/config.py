"""The options of the two computations, each with its one default and help.

Every field is ``None`` until given; where it is not, its default applies (the field's
``default`` metadata, which CLI help and the README show). An option given where the
resolved configuration does not use it is a :class:`UsageError` that says why, never a
silent no-op. After construction every field holds its resolved value and :attr:`given`
names the fields the caller set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from . import estimators
from .errors import UsageError
from .objective import AGGREGATIONS, ALIASES, KL_ESTIMATORS, LOGRATIO_CLAMP_MAX, LOSSES, RATIO_LEVELS
from .objective.rollout import IS_ALIASES, REJECT_ALIASES, REJECT_LEVELS
from .presets import PRESETS, preset_values

STD_KINDS = {"population": 0, "sample": 1}
WHITEN_EPS_AT = ("std", "var", "var-floor")
ESTIMATOR_PARAMS = {"scale", "std", "eps", "gamma", "lam"}  # the options some estimators take and others refuse
MULTI_REWARD = ("sum-then-normalize", "normalize-then-sum")
ON_NULL = ("unscorable", "error")


def option(default: Any, help: str) -> Any:
    """A config field: ``None`` until given, then ``default`` where it was not."""
    return field(default=None, metadata={"default": default, "help": help})


def value_range(text: str | None, name: str) -> tuple[float, float] | None:
    """``"LO,HI"`` as two floats (``None`` stays ``None``).

    >>> value_range("-10,10", "reward_clip")
    (-10.0, 10.0)
    """
    if text is None:
        return None
    try:
        lo, hi = (float(part) for part in text.split(","))
    except ValueError:
        raise UsageError(f"`{name}` takes LO,HI (two numbers; found {text!r})") from None
    return lo, hi


def numbers(text: str | None, name: str) -> tuple[float, ...] | None:
    """``"1,0.5"`` as floats (``None`` stays ``None``).

    >>> numbers("1,0.5", "reward_weights")
    (1.0, 0.5)
    """
    if text is None:
        return None
    try:
        return tuple(float(part) for part in text.split(","))
    except ValueError:
        raise UsageError(f"`{name}` takes numbers separated by commas (found {text!r})") from None


def check_range(name: str, value: float, low: float, high: float = np.inf, *, open_low: bool = False) -> None:
    """Refuse ``value`` unless it is finite and in ``[low, high]`` (``open_low``: ``low`` excluded).

    >>> check_range("beta", float("inf"), 0)
    Traceback (most recent call last):
    ...
    grpo_cli.errors.UsageError: `beta` must be >= 0 and finite (found inf)
    """
    if not ((value > low if open_low else value >= low) and value <= high and np.isfinite(value)):
        bounds = (f"{'>' if open_low else '>='} {low:g} and finite" if high == np.inf
                  else f"in {'(' if open_low else '['}{low:g}, {high:g}]")
        raise UsageError(f"`{name}` must be {bounds} (found {value!r})")


def weight_bounds(bounds) -> tuple[float, float] | None:
    """``is_mask``'s ``(LO, HI)`` as floats, 0 <= LO < HI (``None`` stays ``None``)."""
    if bounds is None:
        return None
    lo, hi = (float(x) for x in bounds)
    if not 0 <= lo < hi:
        raise UsageError(f"`is_mask` must be 0 <= LO < HI (found {lo!r}, {hi!r})")
    return lo, hi


def defaults(cls) -> dict[str, Any]:
    """Each option of a config class and its default."""
    return {f.name: f.metadata["default"] for f in fields(cls)}


def _choice(name: str, value: str, valid) -> None:
    if value not in valid:
        raise UsageError(f"unknown `{name}` {value!r} (valid: {', '.join(valid)})")


class _Options:
    """Shared by the config classes: record what was given, fill the defaults."""

    def _fill_defaults(self, part: str) -> frozenset[str]:
        """Fill what was not given from the preset (if any), else the default; return what was given."""
        given = frozenset(f.name for f in fields(self) if getattr(self, f.name) is not None)
        if getattr(self, "preset", None) is not None:
            _choice("preset", self.preset, tuple(PRESETS))
        chosen = preset_values(getattr(self, "preset", None), part)
        for f in fields(self):
            if f.name not in given:
                object.__setattr__(self, f.name, chosen.get(f.name, f.metadata["default"]))
        return given - {"preset"}

    @property
    def given(self) -> frozenset[str]:
        """The options the caller set (the others hold their defaults)."""
        return self._given

    def _set(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)


@dataclass(frozen=True)
class AdvantageConfig(_Options):
    """How rewards become advantages: ``A = (r - b) / s``.

    Attributes
    ----------
    estimator
        The baseline ``b`` (see :data:`grpo_cli.estimators.ESTIMATORS`).
    scale
        The divisor ``s``: ``group`` (the group's reward std + eps), ``batch`` (the std of all
        rewards + eps) or ``none``. Not given: the estimator's default.
    std
        ``population`` (ddof 0, seed 000's convention) or ``sample`` (ddof 1, as Twinkle,
        verl, TRL and OpenRLHF); only for ``scale`` group or batch.
    eps
        Added to the std before dividing; only for ``scale`` group or batch.
    reward_weights, multi_reward
        Several reward columns: their weights, and whether the weighted sum is estimated
        (``sum-then-normalize``) or each column is and the advantages are summed, then
        whitened (``normalize-then-sum``, GDPO).
    on_null
        A row whose every reward is null: ``unscorable`` (left out of its group, advantage
        0) or ``error``.
    reward_clip
        ``(lo, hi)``: rewards are clipped to it before the baseline.
    kl_in_reward, kl
        ``r - kl_in_reward * sum_t KL_t`` (old vs reference log-probs, estimator ``kl``)
        before the baseline; token-level estimators subtract it per token.
    whiten, whiten_std, whiten_eps_at, whiten_eps
        Whiten the advantages over the whole input: ``(A - mean) / s`` with the std of
        ``whiten_std`` and ``whiten_eps`` added where ``whiten_eps_at`` says.
    gamma, lam
        Discount and GAE lambda of the token-level estimators.
    singleton
        The advantage of a group of one row (see :data:`grpo_cli.estimators.SINGLETONS`).
    """

    preset: str = option(None, "Another framework's conventions for every option not given (see `grpo presets`).")
    estimator: str = option("grpo", "The baseline b of A = (r - b) / s.")
    scale: str = option(None, "The divisor s: the group's reward std + eps, the std of all rewards + eps, or 1.")
    std: str = option("population", "population = ddof 0 (the worked examples of the original GRPO notes); sample = ddof 1 (ModelScope Twinkle, verl, TRL, OpenRLHF).")
    eps: float = option(0.0, "Added to the std before dividing.")
    reward_weights: tuple = option(None, "Weights of the reward columns, in order (default: 1 each).")
    multi_reward: str = option("sum-then-normalize", "Several reward columns: estimate their weighted sum (TRL's default), "
                                                     "or estimate each and whiten the weighted sum of the advantages (GDPO).")
    on_null: str = option("unscorable", "A row whose every reward is null: unscorable = left out of its group's statistics, "
                                        "advantage 0 (TRL); error = refuse. A null among several rewards counts as 0.")
    reward_clip: tuple = option(None, "Clip each reward to [LO, HI] before the baseline (as OpenRLHF's and TRL's RLOO reward clip).")
    kl_in_reward: float = option(None, "r - BETA * sum of the row's KL (old vs reference log-probs) before the baseline; "
                                       "token-level estimators subtract BETA * KL_t at each token.")
    kl: str = option("k1", "KL estimator of --kl-in-reward, with d = old - ref.")
    gamma: float = option(1.0, "Discount of the token-level returns.")
    lam: float = option(1.0, "GAE lambda.")
    whiten: bool = option(False, "After the estimator, A = (A - mean) / s over the whole input (rows, or valid tokens "
                                 "for token-level estimators), as TRL's normalize_advantages.")
    whiten_std: str = option("sample", "The std of --whiten.")
    whiten_eps_at: str = option("std", "Where --whiten-eps goes: std = (A - mean) / (std + eps) (TRL); var = / sqrt(var + eps) "
                                       "(verl); var-floor = / sqrt(max(var, eps)) (OpenRLHF).")
    whiten_eps: float = option(1e-8, "The epsilon of --whiten.")
    singleton: str = option("zero", "The advantage of a group of one row: " + "; ".join(
        f"{name}: {(fn.__doc__ or '').strip().rstrip('.')}" for name, fn in estimators.SINGLETONS.items()) + ".")

    def __post_init__(self) -> None:
        given = self._fill_defaults("advantage")
        spec = estimators.lookup(self.estimator)
        for name in sorted(given & ESTIMATOR_PARAMS - set(spec.params)):
            why = "; it is never scaled" if spec.scales == ("none",) else ""
            raise UsageError(f"estimator {self.estimator!r} takes no `{name}`{why}; drop `{name}`, or pass another `estimator`")
        scale = self.scale if "scale" in given or self.scale in spec.scales else spec.default_scale
        _choice("scale", scale, estimators.SCALES)
        if scale not in spec.scales:
            if spec.scales == ("none",):
                raise UsageError(f"estimator {self.estimator!r} is never scaled; drop `scale` {scale!r}, or pass `estimator` 'grpo'")
            raise UsageError(f"estimator {self.estimator!r} takes `scale` {', '.join(spec.scales)} (found {scale!r})")
        _choice("std", self.std, tuple(STD_KINDS))
        _choice("singleton", self.singleton, tuple(estimators.SINGLETONS))
        if self.reward_clip is not None:
            lo, hi = self.reward_clip
            if not lo < hi:
                raise UsageError(f"`reward_clip` must be LO < HI (found {lo!r}, {hi!r})")
            self._set(reward_clip=(float(lo), float(hi)))
        _choice("multi_reward", self.multi_reward, MULTI_REWARD)
        _choice("on_null", self.on_null, ON_NULL)
        if self.reward_weights is not None:
            self._set(reward_weights=tuple(float(w) for w in self.reward_weights))
            if not all(np.isfinite(self.reward_weights)):
                raise UsageError(f"`reward_weights` must be finite (found {self.reward_weights!r})")
        if self.kl_in_reward is None:
            if "kl" in given:
                raise UsageError("`kl` is the estimator of `kl_in_reward`; pass `kl_in_reward` BETA too, or drop `kl`")
        else:
            check_range("kl_in_reward", self.kl_in_reward, 0)
            if self.multi_reward == "normalize-then-sum":
                raise UsageError("`kl_in_reward` subtracts from one reward, and `multi_reward` 'normalize-then-sum' estimates each "
                                 "column apart; pass `multi_reward` 'sum-then-normalize', or drop `kl_in_reward`")
        _choice("kl", self.kl, tuple(KL_ESTIMATORS))
        for name in ("gamma", "lam"):
            check_range(name, getattr(self, name), 0, 1)
        if spec.whitens or self.multi_reward == "normalize-then-sum":
            self._set(whiten=True)  # part of the estimator (REINFORCE++, GAE) or of the aggregation (GDPO)
        for name in sorted(given & {"whiten_std", "whiten_eps_at", "whiten_eps"}):
            if not self.whiten:
                raise UsageError(f"`{name}` applies only with `whiten`; pass `whiten` too, or drop it")
        _choice("whiten_std", self.whiten_std, tuple(STD_KINDS))
        _choice("whiten_eps_at", self.whiten_eps_at, WHITEN_EPS_AT)
        check_range("whiten_eps", self.whiten_eps, 0)
        if self.singleton == "unit-std" and scale == "batch" and "singleton" in given:
            raise UsageError("`singleton` 'unit-std' gives a group of one std 1, which `scale` 'batch' does not use; "
                             "pass `singleton` 'zero' or 'reward', or `scale` 'group' or 'none'")
        check_range("eps", self.eps, 0)
        if scale == "none":
            for name in sorted(given & {"std", "eps"}):
                raise UsageError(f"`{name}` applies only to scaled advantages and `scale` is 'none'; "
                                 f"drop `{name}`, or pass `scale` 'group' or 'batch'")
        self._set(estimator=spec.name, scale=scale, _given=given)

    @property
    def ddof(self) -> int:
        return STD_KINDS[self.std]

    @property
    def figures(self) -> dict:
        """The resolved options as summaries record them (``None``: an option that does not apply)."""
        spec = estimators.lookup(self.estimator)
        whiten = {k: getattr(self, k) if self.whiten else None for k in ("whiten_std", "whiten_eps_at", "whiten_eps")}
        return {"preset": self.preset, "estimator": self.estimator, "scale": self.scale, "std": self.std, "eps": self.eps,
                "singleton": self.singleton, "reward_weights": self.reward_weights, "multi_reward": self.multi_reward,
                "on_null": self.on_null, "reward_clip": self.reward_clip, "kl_in_reward": self.kl_in_reward,
                "kl": self.kl if self.kl_in_reward is not None else None,
                **{k: getattr(self, k) if k in spec.params else None for k in ("gamma", "lam")}, **whiten}


@dataclass(frozen=True)
class ObjectiveConfig(_Options):
    """The policy objective (seed 002's defaults: PPO clipping, token sum, mean over rows).

    Attributes
    ----------
    loss
        The per-token objective (see :data:`grpo_cli.objective.LOSSES`). Each loss takes
        some of the options below (the others are refused, and a preset's are dropped) and
        may be defined with values of others (GSPO: sequence ratio, per-sequence mean),
        which apply unless given.
    epsilon
        Clip range for both sides: ``clip(rho, 1 - epsilon_low, 1 + epsilon_high)``.
    epsilon_low, epsilon_high
        Override one side (DAPO's clip-higher); not given: ``epsilon``. ``epsilon_low`` 1:
        no lower bound.
    dual_clip, delta
        ``C > 1``: for ``A < 0`` the token term becomes ``max(surrogate, C * A)`` (verl);
        ``delta``: the unclipped ratio is capped at ``delta`` (TRL).
    tau_pos, tau_neg
        SAPO's gate temperatures where ``A > 0`` and ``A < 0``.
    ratio_level
        ``token`` (PPO) or ``sequence`` (GSPO: ``exp`` of the mean token log-ratio of the row).
    agg
        How token terms become one number (see :data:`grpo_cli.objective.AGGREGATIONS`;
        TRL's loss_type names are accepted, :data:`grpo_cli.objective.ALIASES`).
    max_length
        The constant of ``seq-mean-token-sum-norm`` (required by it, refused by the others).
    beta, kl
        KL penalty against reference log-probs: ``L - beta * KL`` with estimator ``kl``.
    logratio_clamp
        ``new - old`` is clamped to ``[-c, c]`` before ``exp`` (as verl, c = 20) so the
        ratio never overflows; clamped tokens are counted in the summary. The rollout
        correction's log-weights ``old - rollout`` are clamped alike.
    is_level, is_cap, is_mask
        Rollout correction (see :mod:`grpo_cli.objective.rollout`): importance weights of
        the old policy over the rollout sampler per ``token`` or ``sequence`` (TRL's mode
        names are accepted), truncated at ``is_cap``, set to 0 outside ``is_mask``.
    reject, reject_level, reject_threshold
        Rejection of tokens or rows whose KL estimate ``reject`` (per ``token``,
        ``sequence-sum`` or ``sequence-mean``; verl's names are accepted) is out of bounds:
        for ``k1`` the ratio bounds ``"LO,HI"`` (or ``"X"``: 1/X to X), for ``k2``/``k3``
        the upper bound ``"X"``.
    """

    preset: str = option(None, "Another framework's conventions for every option not given (see `grpo presets`).")
    loss: str = option("ppo", "The per-token objective.")
    epsilon: float = option(0.2, "Clip range: clip(rho, 1 - eps, 1 + eps).")
    epsilon_low: float = option(None, "Override the low side of the clip range.")
    epsilon_high: float = option(None, "Override the high side of the clip range (DAPO clip-higher).")
    dual_clip: float = option(None, "C > 1: for A < 0 the token term is max(surrogate, C*A).")
    delta: float = option(None, "TRL's two-sided clipping: the unclipped ratio is also capped at DELTA > 1.")
    tau_pos: float = option(1.0, "SAPO's gate temperature where A > 0.")
    tau_neg: float = option(1.05, "SAPO's gate temperature where A < 0.")
    ratio_level: str = option("token", "token (PPO) or sequence (GSPO: exp of the row's mean log-ratio).")
    agg: str = option("seq-mean-token-sum", "How token terms become one number (or TRL's loss_type: "
                      + ", ".join(f"{k} = {v}" for k, v in ALIASES.items()) + ").")
    max_length: int = option(None, "The constant of seq-mean-token-sum-norm (required by it).")
    beta: float = option(0.0, "KL penalty weight against reference log-probs: L - beta*KL.")
    kl: str = option("k3", "KL estimator with d = new - ref.")
    logratio_clamp: float = option(20.0, "Clamp new - old (and old - rollout) to [-c, c] before exp (counted in the summary).")
    is_level: str = option(None, "Weight each token's loss term by pi_old / pi_rollout: token = exp(old - rollout), sequence = exp of "
                                 "the row's sum on every token (or TRL's " + ", ".join(IS_ALIASES) + ").")
    is_cap: float = option(None, "Truncate the weights at C (TIS).")
    is_mask: tuple = option(None, "Set weights outside [LO, HI] to 0 (IcePop; the token stays counted).")
    reject: str = option(None, "Reject tokens or rows whose KL(rollout || old) estimate is out of bounds: k1, k2, k3 (or verl's "
                               "token_k1, seq_sum_k1, seq_mean_k3, ...); rejected tokens leave the mask.")
    reject_level: str = option("token", "Where --reject's estimate is taken: per token, or a row's sum or mean (rejects the row).")
    reject_threshold: str = option(None, "--reject's bounds: k1 'LO,HI' as ratios (or 'X': 1/X to X); k2, k3 'X' (upper).")

    def __post_init__(self) -> None:
        given = self._fill_defaults("objective")
        self._rollout_correction(given)
        _choice("loss", self.loss, tuple(LOSSES))
        loss = LOSSES[self.loss]
        for name in sorted(given & (loss_params() - set(loss.params))):
            taken = ", ".join(f"`{p}`" for p in loss.params) or "none of them"
            fixed = dict(loss.defaults)
            why = f" (it is defined with `{name}` {fixed[name]!r})" if name in fixed else ""
            raise UsageError(f"loss {self.loss!r} takes no `{name}`{why}; of the loss options it takes {taken}")
        base = defaults(ObjectiveConfig)
        self._set(**{name: base[name] for name in loss_params() - set(loss.params)}  # a preset's, for another loss
                  | {name: value for name, value in loss.defaults if name not in given})
        if self.delta is not None:
            if "dual_clip" in given:
                raise UsageError("`dual_clip` and `delta` both cap the ratio where A < 0 (verl's and TRL's name); pass one")
            check_range("delta", self.delta, 1, open_low=True)
            self._set(dual_clip=None)  # a preset's dual clip gives way to the delta given
        for name in ("tau_pos", "tau_neg"):
            check_range(name, getattr(self, name), 0, open_low=True)
        if {"epsilon", "epsilon_low", "epsilon_high"} <= given:
            raise UsageError("`epsilon_low` and `epsilon_high` both override `epsilon`; drop one of the three")
        self._set(
            epsilon_low=self.epsilon if self.epsilon_low is None else self.epsilon_low,
            epsilon_high=self.epsilon if self.epsilon_high is None else self.epsilon_high,
            _given=given,
        )
        for name in ("epsilon", "epsilon_low", "epsilon_high"):
            check_range(name, getattr(self, name), 0, open_low=True)
        if not self.epsilon_low <= 1:
            raise UsageError(f"`epsilon_low` must be <= 1 (1 - epsilon_low is the lower bound of the ratio; 1: none) "
                             f"(found {self.epsilon_low!r})")
        if self.dual_clip is not None:
            check_range("dual_clip", self.dual_clip, 1, open_low=True)
        _choice("ratio_level", self.ratio_level, tuple(RATIO_LEVELS))
        _choice("agg", self.agg, (*AGGREGATIONS, *ALIASES))
        self._set(agg=ALIASES.get(self.agg, self.agg))
        if AGGREGATIONS[self.agg].needs_max_length:
            if self.max_length is None or self.max_length < 1:
                raise UsageError(f"`agg` {self.agg!r} needs `max_length` >= 1 (found {self.max_length!r})")
        elif "max_length" in given:
            normed = " or ".join(repr(name) for name, a in AGGREGATIONS.items() if a.needs_max_length)
            raise UsageError(f"`max_length` applies only to `agg` {normed} (found `agg` {self.agg!r}); drop it")
        check_range("beta", self.beta, 0)
        _choice("kl", self.kl, tuple(KL_ESTIMATORS))
        check_range("logratio_clamp", self.logratio_clamp, 0, LOGRATIO_CLAMP_MAX, open_low=True)
        if self.is_level is not None and self.loss == "gmpo":
            raise UsageError("loss 'gmpo' takes the geometric mean of its weights in verl, which is not modelled; drop `is_level`, "
                             "or pass another `loss`")

    def _rollout_correction(self, given: frozenset[str]) -> None:
        """Resolve and check the rollout-correction options (TRL's and verl's names included)."""
        if self.is_level is None:
            for name in sorted(given & {"is_cap", "is_mask"}):
                raise UsageError(f"`{name}` bounds the importance weights; pass `is_level` token or sequence too, or drop it")
        else:
            _choice("is_level", self.is_level, ("token", "sequence", *IS_ALIASES))
            if self.is_level in IS_ALIASES:
                level, bound = IS_ALIASES[self.is_level]
                other = ({"is_cap", "is_mask"} - {bound}).pop()
                if getattr(self, bound) is None or getattr(self, other) is not None:
                    raise UsageError(f"`is_level` {self.is_level!r} takes `{bound}` (and not `{other}`); pass `is_level` "
                                     f"{level!r} to combine both")
                self._set(is_level=level)
        if self.is_cap is not None:
            check_range("is_cap", self.is_cap, 0, open_low=True)
        self._set(is_mask=weight_bounds(self.is_mask))
        if self.reject is None:
            for name in sorted(given & {"reject_level", "reject_threshold"}):
                raise UsageError(f"`{name}` applies to `reject`; pass `reject` k1, k2 or k3 too, or drop it")
            return
        if self.reject in REJECT_ALIASES:
            kind, level = REJECT_ALIASES[self.reject]
            if "reject_level" in given and self.reject_level != level:
                raise UsageError(f"`reject` {self.reject!r} is taken per {level}; drop `reject_level` {self.reject_level!r}")
            self._set(reject=kind, reject_level=level)
        _choice("reject", self.reject, ("k1", "k2", "k3", *REJECT_ALIASES))
        _choice("reject_level", self.reject_level, REJECT_LEVELS)
        if self.reject_threshold is None:
            raise UsageError(f"`reject` {self.reject!r} needs `reject_threshold` (k1: 'LO,HI' ratio bounds or 'X'; k2, k3: 'X')")
        self._set(reject_threshold=str(self.reject_threshold))
        self.reject_bounds  # noqa: B018  (checks the threshold now, not in the first batch)

    @property
    def reject_bounds(self) -> tuple[float, float]:
        """The kept range of the ``reject`` estimate: k1 in log space, ``[log LO, log HI]``; k2
        and k3 ``[-inf, X]``.

        >>> ObjectiveConfig(reject="k1", reject_threshold="2").reject_bounds == (-np.log(2), np.log(2))
        True
        """
        text = self.reject_threshold
        parts = text.split(",")
        try:
            values = [float(p) for p in parts]
        except ValueError:
            raise UsageError(f"`reject_threshold` takes numbers (found {text!r})") from None
        if self.reject != "k1":
            if len(values) != 1 or not values[0] > 0:
                raise UsageError(f"`reject` {self.reject!r} takes one upper bound X > 0 as `reject_threshold` (found {text!r})")
            return -np.inf, values[0]
        if len(values) == 1:
            if not values[0] > 1:
                raise UsageError(f"`reject_threshold` X for k1 keeps ratios in [1/X, X], so X must be > 1 (found {text!r})")
            values = [1.0 / values[0], values[0]]
        if len(values) != 2 or not 0 < values[0] < values[1]:
            raise UsageError(f"`reject_threshold` for k1 takes ratio bounds 0 < LO < HI (found {text!r})")
        return float(np.log(values[0])), float(np.log(values[1]))


    @property
    def figures(self) -> dict:
        """The resolved options as summaries record them (``None``: an option the loss does not take)."""
        taken = LOSSES[self.loss].params
        loss_options = {k: getattr(self, k) if k in taken else None
                        for k in ("epsilon_low", "epsilon_high", "dual_clip", "delta", "tau_pos", "tau_neg")}
        return {"preset": self.preset, "loss": self.loss, "agg": self.agg, **loss_options, "ratio_level": self.ratio_level,
                "beta": self.beta, "kl": self.kl, "max_length": self.max_length,
                "logratio_clamp": self.logratio_clamp, "is_level": self.is_level, "is_cap": self.is_cap, "is_mask": self.is_mask,
                "reject": self.reject,
                **{k: getattr(self, k) if self.reject else None for k in ("reject_level", "reject_threshold")}}


@dataclass(frozen=True)
class MismatchConfig(_Options):
    """The train/rollout mismatch report (see :mod:`grpo_cli.mismatch`).

    Attributes
    ----------
    is_cap, is_mask
        The share of tokens and rows whose importance weight a cap C (above) or a mask
        [LO, HI] (outside) would touch.
    logratio_clamp
        ``old - rollout`` is clamped to ``[-c, c]`` where it is exponentiated.
    worst
        How many rows to list, by their mean k3.
    """

    is_cap: float = option(2.0, "Report the tokens and rows whose weight pi_old / pi_rollout a cap C would truncate (verl's default threshold).")
    is_mask: tuple = option(None, "Report the tokens and rows whose weight a mask [LO, HI] would zero.")
    logratio_clamp: float = option(20.0, "Clamp old - rollout to [-c, c] before exp.")
    worst: int = option(10, "List this many rows, by their mean k3 of KL(rollout || old).")

    def __post_init__(self) -> None:
        given = self._fill_defaults("mismatch")
        check_range("is_cap", self.is_cap, 0, open_low=True)
        self._set(is_mask=weight_bounds(self.is_mask))
        check_range("logratio_clamp", self.logratio_clamp, 0, LOGRATIO_CLAMP_MAX, open_low=True)
        if not (isinstance(self.worst, int) and self.worst >= 0):
            raise UsageError(f"`worst` must be an integer >= 0 (found {self.worst!r})")
        self._set(_given=given)

    @property
    def figures(self) -> dict:
        """The resolved options as the report records them."""
        return {"is_cap": self.is_cap, "is_mask": None if self.is_mask is None else list(self.is_mask),
                "logratio_clamp": self.logratio_clamp, "worst": self.worst}


KEEP_IF = re.compile(r"^\s*(?:(?P<lo>[-+0-9.eE]+)\s*(?P<lo_op><=?)\s*)?(?P<stat>mean|std|min|max)\s*"
                     r"(?:(?P<hi_op><=?)\s*(?P<hi>[-+0-9.eE]+))?\s*$")
TRUNCATED = ("drop", "mask")


@dataclass(frozen=True)
class FilterConfig(_Options):
    """Which rows `grpo filter` keeps (see :mod:`grpo_cli.filters`).

    Attributes
    ----------
    drop_zero_variance
        Drop groups of two or more rows whose rewards are all equal (DAPO's dynamic sampling).
    keep_if
        Keep groups whose reward statistic lies in bounds, ``"LO < mean < HI"`` (OpenRLHF's
        dynamic filtering; ``<=`` for inclusive, one side may be left out; ``mean``, ``std``
        (population), ``min``, ``max``).
    truncated
        Rows a truncation column marks: ``drop`` them, or ``mask`` them (their token mask set
        to 0, as TRL's ``mask_truncated_completions``).
    overlong_buffer, max_length, overlong_factor
        DAPO's overlong penalty: ``r += min(-(L - (max_length - buffer)) / buffer * factor, 0)``
        with L the row's valid tokens.
    """

    drop_zero_variance: bool = option(False, "Drop groups (of 2+ rows) whose rewards are all equal (DAPO dynamic sampling).")
    keep_if: str = option(None, "Keep groups whose reward statistic is in bounds: 'LO<mean<HI' (OpenRLHF; <= inclusive; mean, std, min, max).")
    truncated: str = option(None, "Rows the truncation column marks: drop them, or mask them (token mask set to 0; TRL).")
    overlong_buffer: int = option(None, "DAPO's overlong penalty: the last B tokens before --max-length are penalised linearly.")
    max_length: int = option(None, "The maximum response length of the overlong penalty.")
    overlong_factor: float = option(1.0, "The penalty at --max-length: r += min(-(L - (max_length - B)) / B * factor, 0).")

    def __post_init__(self) -> None:
        given = self._fill_defaults("filter")
        if self.keep_if is not None:
            self.keep_bounds  # noqa: B018  (parsed now)
        if self.truncated is not None:
            _choice("truncated", self.truncated, TRUNCATED)
        if self.overlong_buffer is None:
            for name in sorted(given & {"max_length", "overlong_factor"}):
                raise UsageError(f"`{name}` belongs to the overlong penalty; pass `overlong_buffer` too, or drop it")
        else:
            if self.max_length is None:
                raise UsageError("`overlong_buffer` needs `max_length`, the maximum response length")
            if not 0 < self.overlong_buffer <= self.max_length:
                raise UsageError(f"`overlong_buffer` must be in [1, max_length] (found {self.overlong_buffer!r}, max_length {self.max_length!r})")
            check_range("overlong_factor", self.overlong_factor, 0)
        if not (self.drop_zero_variance or self.keep_if or self.truncated or self.overlong_buffer):
            raise UsageError("no rule given: pass `drop_zero_variance`, `keep_if`, `truncated` or `overlong_buffer`")
        self._set(_given=given)

    @property
    def keep_bounds(self) -> tuple[str, float, bool, float, bool]:
        """``keep_if`` as (statistic, lo, lo inclusive, hi, hi inclusive); a side left out is infinite.

        >>> FilterConfig(keep_if="0<mean<=1").keep_bounds
        ('mean', 0.0, False, 1.0, True)
        """
        found = KEEP_IF.match(self.keep_if)
        try:
            lo = float(found["lo"]) if found and found["lo"] else -np.inf
            hi = float(found["hi"]) if found and found["hi"] else np.inf
        except ValueError:
            found = None
        if not found or (found["lo"] is None and found["hi"] is None) or not lo < hi:
            raise UsageError(f"`keep_if` takes 'LO<STAT<HI' with STAT mean, std, min or max, LO < HI, "
                             f"one side optional, <= for inclusive (found {self.keep_if!r})")
        return found["stat"], lo, found["lo_op"] == "<=", hi, found["hi_op"] == "<="

    @property
    def figures(self) -> dict:
        """The resolved options as the summary records them."""
        return {k: getattr(self, k) for k in ("drop_zero_variance", "keep_if", "truncated", "overlong_buffer", "max_length")} | {
            "overlong_factor": self.overlong_factor if self.overlong_buffer is not None else None}


def loss_params() -> set[str]:
    """The options that belong to some loss (every other objective option applies to all)."""
    return {p for loss in LOSSES.values() for p in loss.params}
