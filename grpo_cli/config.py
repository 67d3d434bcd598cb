"""Options: how they are given, defaulted and checked, and the advantages' own
(:class:`AdvantageConfig`, which `grpo advantages`, `objective` and `compare` share). The
other commands' options live with them: :class:`grpo_cli.objective.config.ObjectiveConfig`,
:class:`grpo_cli.mismatch.MismatchConfig`, :class:`grpo_cli.filters.FilterConfig`.

Every field is ``None`` until given; where it is not, its default applies (the field's
``default`` metadata, which CLI help and the README show). An option given where the
resolved configuration does not use it is a :class:`UsageError` that says why, never a
silent no-op. After construction every field holds its resolved value and :attr:`given`
names the fields the caller set.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar, Iterable

import numpy as np

from . import estimators
from .errors import UsageError, check_keywords
from .kl import KL_ESTIMATORS
from .presets import NAMES, lookup, preset_values

STD_KINDS = {"population": 0, "sample": 1}
WHITEN_EPS_AT_KINDS = ("std", "var", "var-floor")
ESTIMATOR_PARAMS = {"scale", "std", "eps", "gamma", "lam", "group_stats"}  # the options some estimators take and others refuse
KL_AT = ("before-baseline", "after-baseline")
MULTI_REWARD = ("sum-then-normalize", "normalize-then-sum", "normalize-then-sum-tokens")
MASKED_STEPS = ("skip", "restart", "count")  # a masked token inside a row, for the token-level returns
ON_NULL = ("unscorable", "error")


# The help's panels, where each option is shown (its config class's, unless a field says otherwise)
INPUT, COLUMNS, ESTIMATOR, CLIP, KL_PANEL, ROLLOUT, OUTPUT = (
    "Input",
    "Columns",
    "Advantages",
    "Clip and aggregation",
    "KL",
    "Rollout correction",
    "Output and run",
)


def option(
    default: Any,
    help: str,
    *,
    group: str = "",
    panel: str | None = None,
    choices: Iterable[str] | None = None,
    parse: Callable[[str, str], Any] | None = None,
    metavar: str | None = None,
    shown: str | None = None,
    flags: tuple[str, ...] = (),
) -> Any:
    """A config field: ``None`` until given, then ``default`` where it was not.

    The field is also the option's one declaration, from which :mod:`grpo_cli.options` makes
    the CLI's: ``group``, the set of options a command takes together (``rewards``: every
    command that reads rewards); ``panel`` of the help (else the class's ``PANEL``); its
    ``choices``; ``parse(text, name)``, the value of the CLI's text (``"LO,HI"``); ``metavar``;
    the default as ``shown`` in the help; and its ``flags`` (else ``--field-name``).
    """
    cli = {"group": group, "panel": panel, "choices": choices, "parse": parse, "metavar": metavar, "shown": shown, "flags": flags}
    return field(default=None, metadata={"default": default, "help": help, **cli})


FIELD_TYPES = {"str": str, "float": float, "int": int, "bool": bool, "tuple": str}  # a field's annotation; a tuple is given as text


def field_type(f) -> type:
    """The type a config field's value is given as (its annotation; ``Optional`` dropped)."""
    return FIELD_TYPES[getattr(f.type, "__name__", str(f.type)).removesuffix(" | None")]


def from_text(cls, name: str, text: str, where: str) -> Any:
    """Option ``name`` of config class ``cls`` given as ``text`` (a field's ``parse``, else its
    type: a number, true or false, a name); ``where`` it was given, for the error.

    >>> from_text(AdvantageConfig, "reward_clip", "-1 1", "grpo")
    (-1.0, 1.0)
    """
    f = next((f for f in fields(cls) if f.name == name), None)
    if f is None:
        check_keywords([name], [f.name for f in fields(cls)], where)
    assert f is not None
    if f.metadata["parse"] is not None:
        return f.metadata["parse"](",".join(text.replace(",", " ").split()), name)  # several numbers: spaces or commas
    kind = field_type(f)
    if kind is bool:
        if text.lower() not in ("true", "false"):
            raise UsageError(f"{where}: `{name}` takes true or false (found {text!r})")
        return text.lower() == "true"
    try:
        return kind(text)
    except ValueError:
        raise UsageError(f"{where}: `{name}` takes a number (found {text!r})") from None


def listing(entries: dict[str, str]) -> str:
    """``name: text; name: text.``, a registry's entries as one line of help.

    >>> listing({"k1": "d.", "k2": "d^2 / 2"})
    'k1: d; k2: d^2 / 2.'
    """
    return "; ".join(f"{name}: {text.rstrip('.')}" for name, text in entries.items()) + "."


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
        bounds = f"{'>' if open_low else '>='} {low:g} and finite" if high == np.inf else f"in {'(' if open_low else '['}{low:g}, {high:g}]"
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


def check_choice(name: str, value: str, valid) -> None:
    """Refuse ``value`` unless it is one of ``valid``, naming them."""
    if value not in valid:
        raise UsageError(f"unknown `{name}` {value!r} (valid: {', '.join(valid)})")


class Options:
    """Shared by the config classes (dataclasses): record what was given, fill the defaults."""

    _given: frozenset[str]
    preset: str | None
    __dataclass_fields__: ClassVar[dict[str, Any]]  # each config class is a dataclass

    def _fill_defaults(
        self, part: str, key: str = "", canonical: Callable[[str], str] = str, own: Callable[[str], dict] = lambda _: {}
    ) -> frozenset[str]:
        """Fill what was not given and return what was. A field not given takes the preset's
        value for the ``key`` option's value in use (the estimator, the loss: given, else the
        preset's, by its ``canonical`` name), else that one's ``own`` definition, else the
        preset's base value, else its default."""
        given = frozenset(f.name for f in fields(self) if getattr(self, f.name) is not None)
        preset = getattr(self, "preset", None)
        if preset is not None:
            check_choice("preset", preset, NAMES)
            preset = lookup(preset).name
            object.__setattr__(self, "preset", preset)
        base = preset_values(preset, part, "")[1]
        chosen = canonical(getattr(self, key) if key in given else base.get(key, self.__dataclass_fields__[key].metadata["default"])) if key else ""
        layers = (preset_values(preset, part, chosen)[0], own(chosen), base)
        for f in fields(self):
            if f.name not in given:
                object.__setattr__(self, f.name, next((layer[f.name] for layer in layers if f.name in layer), f.metadata["default"]))
        return given - {"preset"}

    @property
    def given(self) -> frozenset[str]:
        """The options the caller set (the others hold their defaults)."""
        return self._given

    def _set(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)


@dataclass(frozen=True, kw_only=True)
class AdvantageConfig(Options):
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
        whitened over rows (``normalize-then-sum``, GDPO as TRL) or over valid tokens
        (``normalize-then-sum-tokens``, GDPO as verl 0.9.1).
    on_null
        A row whose every reward is null: ``unscorable`` (left out of its group, advantage
        0) or ``error``.
    reward_clip
        ``(lo, hi)``: rewards are clipped to it before the baseline.
    advantage_clip
        ``(lo, hi)``: ``(r - b) / s`` is clipped to it after the baseline, before any
        whitening (OpenRLHF's reward clip); a token-level estimator's ``r`` (its ``b`` is 0).
    kl_in_reward, kl, kl_at
        ``r - kl_in_reward * sum_t KL_t`` (old vs reference log-probs, estimator ``kl``)
        before the baseline; token-level estimators subtract it per token. ``kl_at``
        'after-baseline': ``A_t = A - kl_in_reward * sum_{s >= t} KL_s`` per token, after a
        row-level estimator's baseline (OpenRLHF).
    whiten, whiten_std, whiten_eps_at, whiten_eps
        Whiten the advantages over the whole input: ``(A - mean) / s`` with the std of
        ``whiten_std`` and ``whiten_eps`` added where ``whiten_eps_at`` says.
    gamma, lam
        Discount and GAE lambda of the token-level estimators.
    singleton
        The advantage of a group of one row (see :data:`grpo_cli.estimators.SINGLETONS`).
    group_stats
        GRPO's group mean and std: ``float64`` (exact 0 for a group of equal rewards), or in
        float32 as verl's grpo_vectorized, whose std is always the sample std plus ``eps``
        and whose group of one row is ``r / fl32(1 + eps)``: ``float32`` (verl 0.9.1,
        two-pass variance) or ``float32-one-pass`` (verl 0.7.0: one-pass variance floored at
        ``eps``; 0.7.0's grpo_vectorized fails in a trainer run, see
        :mod:`grpo_cli.estimators.float32`).
    """

    PANEL: ClassVar[str] = ESTIMATOR

    preset: str | None = option(
        None, "A framework's conventions, at a release (verl@0.7), for every option not given (see `grpo presets`).", panel=INPUT, choices=NAMES
    )
    estimator: str = option(
        "grpo",
        "The baseline b of A = (r - b) / s. " + listing({" = ".join((e.name, *e.aliases)): e.help for e in estimators.ESTIMATORS.values()}),
        group="estimator",
        choices=estimators.names(),
    )
    scale: str = option(
        None,
        "The divisor s: the group's reward std + eps, the std of all rewards + eps, or 1.",
        group="estimator",
        choices=estimators.SCALES,
        shown="the estimator's: " + ", ".join(f"{e.default_scale} for {e.name}" for e in estimators.ESTIMATORS.values()),
    )
    std: str = option(
        "population",
        "population = ddof 0 (the worked examples of the original GRPO notes); sample = ddof 1 (ModelScope Twinkle, verl, TRL, OpenRLHF).",
        group="estimator",
        choices=STD_KINDS,
    )
    eps: float = option(0.0, "Added to the std before dividing.", group="estimator")
    singleton: str = option(
        "zero",
        "The advantage of a group of one row: " + listing({name: (fn.__doc__ or "").strip() for name, fn in estimators.SINGLETONS.items()}),
        group="estimator",
        choices=estimators.SINGLETONS,
    )
    group_stats: str = option(
        "float64",
        "GRPO's group mean and std: float64; float32 = verl 0.9.1's grpo_vectorized (float32 sums, two-pass variance, "
        "std + eps in float32: equal rewards that float32 does not hold give (r - fl32(mean)) / eps, not 0); "
        "float32-one-pass = verl 0.7.0's (one-pass variance, floored at eps).",
        group="estimator",
        choices=estimators.GROUP_STATS,
    )
    gamma: float = option(1.0, "Discount of the token-level returns.", group="returns")
    lam: float = option(1.0, "GAE lambda.", group="returns")
    masked_steps: str = option(
        "skip",
        "A masked token inside a row, for the token-level returns: skip = no step, the return and GAE carry past it "
        "(verl 0.9.1, Twinkle); restart = the return restarts after it (verl 0.7's REINFORCE++); "
        "count = a step of reward and value 0 (OpenRLHF).",
        group="returns",
        choices=MASKED_STEPS,
    )
    reward_weights: tuple = option(
        None, "Weights of the reward columns, in order.", group="rewards", parse=numbers, metavar="W1,W2,...", shown="1 each"
    )
    multi_reward: str = option(
        "sum-then-normalize",
        "Several reward columns: estimate their weighted sum (TRL's default), or estimate each and whiten the weighted sum "
        "of the advantages (GDPO) over rows (normalize-then-sum, TRL) or over valid tokens, a row counted once per token "
        "(normalize-then-sum-tokens, verl 0.9.1 gdpo; reads a mask or log-probs column).",
        group="rewards",
        choices=MULTI_REWARD,
    )
    on_null: str = option(
        "unscorable",
        "A row whose every reward is null: unscorable = left out of its group's statistics, "
        "advantage 0 (TRL); error = refuse. A null among several rewards counts as 0.",
        group="rewards",
        choices=ON_NULL,
    )
    reward_clip: tuple = option(
        None,
        "Clip each reward to [LO, HI] before the baseline (as OpenRLHF's and TRL's RLOO reward clip).",
        group="rewards",
        parse=value_range,
        metavar="LO,HI",
    )
    advantage_clip: tuple = option(
        None,
        "Clip each advantage (r - b) / s to [LO, HI] after the baseline, before any whitening (OpenRLHF's reward clip, "
        "its default -10,10); a token-level estimator's reward (its baseline is 0), before the per-token KL.",
        group="estimator",
        parse=value_range,
        metavar="LO,HI",
    )
    kl_at: str = option(
        "before-baseline",
        "Where --kl-in-reward applies: before-baseline = r - BETA * sum_t KL_t, then the estimator (TRL's RLOO, verl); "
        "after-baseline = A_t = A - BETA * sum_{s >= t} KL_s, a row-level estimator's advantage minus the KL to go at each "
        "token, written as per-token lists and whitened after, if at all (OpenRLHF). Token-level estimators: the same either way.",
        group="kl_in_reward",
        choices=KL_AT,
    )
    kl_in_reward: float = option(
        None,
        "r - BETA * sum of the row's KL (old vs reference log-probs) before the baseline; token-level estimators subtract BETA * KL_t at each token.",
        group="kl_in_reward",
        metavar="BETA",
    )
    kl: str = option(
        "k1",
        "KL estimator of --kl-in-reward, with d = old - ref: " + listing({n: (f.__doc__ or "").strip() for n, f in KL_ESTIMATORS.items()}),
        group="kl_in_reward",
        choices=KL_ESTIMATORS,
    )
    kl_reward_clamp: float = option(None, "Clamp each token's KL of --kl-in-reward to [-C, C] (OpenRLHF: 10).", group="kl_in_reward", metavar="C")
    whiten: bool = option(
        False,
        "After the estimator, A = (A - mean) / s over the whole input (rows, or valid tokens "
        "for token-level estimators), as TRL's normalize_advantages. Always on for "
        + ", ".join(e.name for e in estimators.ESTIMATORS.values() if e.whitens)
        + " and the normalize-then-sum modes.",
        group="whitening",
    )
    whiten_std: str = option("sample", "The std of --whiten.", group="whitening", choices=STD_KINDS)
    whiten_eps_at: str = option(
        "std",
        "Where --whiten-eps goes: std = (A - mean) / (std + eps) (TRL); var = / sqrt(var + eps) "
        "(verl); var-floor = / sqrt(max(var, eps)) (OpenRLHF).",
        group="whitening",
        choices=WHITEN_EPS_AT_KINDS,
    )
    whiten_eps: float = option(1e-8, "The epsilon of --whiten.", group="whitening")

    def __post_init__(self) -> None:
        given = self._fill_defaults("advantage", "estimator", lambda name: estimators.lookup(name).name)
        spec = estimators.lookup(self.estimator)
        base = defaults(AdvantageConfig)
        self._set(**{name: base[name] for name in ESTIMATOR_PARAMS - set(spec.params) - given})  # a preset's, for another estimator
        for name in sorted(given & ESTIMATOR_PARAMS - set(spec.params)):
            why = "; it is never scaled" if spec.scales == ("none",) else ""
            raise UsageError(f"estimator {self.estimator!r} takes no `{name}`{why}; drop `{name}`, or pass another `estimator`")
        scale = self.scale if "scale" in given or self.scale in spec.scales else spec.default_scale
        check_choice("scale", scale, estimators.SCALES)
        if scale not in spec.scales:
            if spec.scales == ("none",):
                raise UsageError(f"estimator {self.estimator!r} is never scaled; drop `scale` {scale!r}, or pass `estimator` 'grpo'")
            raise UsageError(f"estimator {self.estimator!r} takes `scale` {', '.join(spec.scales)} (found {scale!r})")
        check_choice("std", self.std, tuple(STD_KINDS))
        check_choice("singleton", self.singleton, tuple(estimators.SINGLETONS))
        if "singleton" in given and not spec.grouped:
            raise UsageError(f"estimator {self.estimator!r} takes no groups, so no group of one row; drop `singleton`")
        if "singleton" in given and spec.sums is not None:
            raise UsageError(f"estimator {self.estimator!r} gives a group of one row its returns (as verl); drop `singleton`")
        if spec.sums is not None and self.advantage_clip is not None:
            if "advantage_clip" in given:
                raise UsageError(f"`advantage_clip` clips a row's r - b, and estimator {self.estimator!r} has a baseline per token; drop it")
            self._set(advantage_clip=None)  # a preset's (OpenRLHF's), for the estimators it has
        for name in ("reward_clip", "advantage_clip"):
            if getattr(self, name) is not None:
                lo, hi = getattr(self, name)
                if not lo < hi:
                    raise UsageError(f"`{name}` must be LO < HI (found {lo!r}, {hi!r})")
                self._set(**{name: (float(lo), float(hi))})
        check_choice("multi_reward", self.multi_reward, MULTI_REWARD)
        check_choice("on_null", self.on_null, ON_NULL)
        if self.reward_weights is not None:
            self._set(reward_weights=tuple(float(w) for w in self.reward_weights))
            if not all(np.isfinite(self.reward_weights)):
                raise UsageError(f"`reward_weights` must be finite (found {self.reward_weights!r})")
        check_choice("kl_at", self.kl_at, KL_AT)
        if self.kl_in_reward == 0 and "kl_in_reward" in given and not given & {"kl", "kl_at"}:
            self._set(kl_in_reward=None)  # 0 given: no KL in the reward (a preset's turned off)
        if self.kl_in_reward is None:
            if "kl" in given:
                raise UsageError("`kl` is the estimator of `kl_in_reward`; pass `kl_in_reward` BETA too, or drop `kl`")
            for name in sorted(given & {"kl_at", "kl_reward_clamp"}):
                raise UsageError(f"`{name}` applies to `kl_in_reward`; pass `kl_in_reward` BETA too, or drop `{name}`")
        else:
            check_range("kl_in_reward", self.kl_in_reward, 0)
            if self.kl_reward_clamp is not None:
                check_range("kl_reward_clamp", self.kl_reward_clamp, 0, open_low=True)
            if self.multi_reward != "sum-then-normalize":
                raise UsageError(
                    f"`kl_in_reward` subtracts from one reward, and `multi_reward` {self.multi_reward!r} estimates each "
                    "column apart; pass `multi_reward` 'sum-then-normalize', or drop `kl_in_reward`"
                )
        if self.multi_reward == "normalize-then-sum-tokens" and spec.level == "token":
            raise UsageError(
                f"`multi_reward` 'normalize-then-sum-tokens' estimates each reward column per row, and estimator {self.estimator!r} "
                "is token-level; pass a row-level `estimator` (e.g. 'grpo'), or `multi_reward` 'sum-then-normalize'"
            )
        check_choice("kl", self.kl, tuple(KL_ESTIMATORS))
        for name in ("gamma", "lam"):
            check_range(name, getattr(self, name), 0, 1)
        check_choice("masked_steps", self.masked_steps, MASKED_STEPS)
        if self.masked_steps != "skip" and spec.sums is not None:
            raise UsageError(
                f"estimator {self.estimator!r} carries its returns past masked tokens (as verl); drop `masked_steps` {self.masked_steps!r}"
            )
        if "masked_steps" in given and spec.level != "token" and not estimators.kl_after_baseline(self):
            raise UsageError(
                f"`masked_steps` applies to token-level returns, and estimator {self.estimator!r} has none "
                "(nor a KL after its baseline); drop it, or pass a token-level `estimator` (reinforce, gae)"
            )
        if spec.whitens or self.multi_reward != "sum-then-normalize":
            if "whiten" in given:
                part = f"estimator {self.estimator!r}" if spec.whitens else f"`multi_reward` {self.multi_reward!r}"
                raise UsageError(f"{part} always whitens its advantages; drop `whiten` (`whiten_std` and the other whitening options say how)")
            self._set(whiten=True)  # part of the estimator (REINFORCE++, GAE) or of the aggregation (GDPO)
        for name in sorted(given & {"whiten_std", "whiten_eps_at", "whiten_eps"}):
            if not self.whiten:
                raise UsageError(f"`{name}` applies only with `whiten`; pass `whiten` too, or drop it")
        check_choice("whiten_std", self.whiten_std, tuple(STD_KINDS))
        check_choice("whiten_eps_at", self.whiten_eps_at, WHITEN_EPS_AT_KINDS)
        check_range("whiten_eps", self.whiten_eps, 0)
        if self.singleton == "unit-std" and scale == "batch" and "singleton" in given:
            raise UsageError(
                "`singleton` 'unit-std' gives a group of one std 1, which `scale` 'batch' does not use; "
                "pass `singleton` 'zero' or 'reward', or `scale` 'group' or 'none'"
            )
        check_range("eps", self.eps, 0)
        self._group_stats(given, scale)
        if scale == "none":
            for name in sorted(given & {"std", "eps"}):
                raise UsageError(
                    f"`{name}` applies only to scaled advantages and `scale` is 'none'; drop `{name}`, or pass `scale` 'group' or 'batch'"
                )
            self._set(std=base["std"], eps=base["eps"])  # a preset's, for scaled advantages
        self._set(estimator=spec.name, scale=scale, _given=given)

    def _group_stats(self, given: frozenset[str], scale: str) -> None:
        """``group_stats`` float32 is verl's grpo_vectorized: the group's sample std, its own group of one row."""
        check_choice("group_stats", self.group_stats, estimators.GROUP_STATS)
        if self.group_stats == "float64":
            return
        if (scale, self.std) != ("group", "sample"):
            raise UsageError(
                f"`group_stats` {self.group_stats!r} is verl's grpo_vectorized, which divides by the group's sample std; "
                f"pass `scale` 'group' and `std` 'sample' (found {scale!r}, {self.std!r})"
            )
        if not self.eps > 0:
            raise UsageError(f"`group_stats` {self.group_stats!r} divides by the float32 std + eps, 0 for equal rewards; pass `eps` > 0 (verl: 1e-6)")
        if "singleton" in given and self.singleton != "unit-std":
            raise UsageError(
                f"`group_stats` {self.group_stats!r} gives a group of one row mean 0 and std 1 (verl's grpo_vectorized); "
                f"drop `singleton` {self.singleton!r}"
            )
        self._set(singleton="unit-std")

    @property
    def ddof(self) -> int:
        return STD_KINDS[self.std]

    def reward_kl(self, d: np.ndarray) -> np.ndarray:
        """Each token's KL of ``kl_in_reward``: estimator ``kl`` of ``d`` = policy - ref,
        clamped to [-kl_reward_clamp, kl_reward_clamp] if given."""
        kl = KL_ESTIMATORS[self.kl](d)
        return kl if self.kl_reward_clamp is None else np.clip(kl, -self.kl_reward_clamp, self.kl_reward_clamp)

    @property
    def figures(self) -> dict:
        """The resolved options as summaries record them (``None``: an option that does not apply)."""
        spec = estimators.lookup(self.estimator)
        whiten = {k: getattr(self, k) if self.whiten else None for k in ("whiten_std", "whiten_eps_at", "whiten_eps")}
        return {
            "preset": self.preset,
            "estimator": self.estimator,
            "scale": self.scale,
            "std": self.std,
            "eps": self.eps,
            "singleton": self.singleton,
            "reward_weights": self.reward_weights,
            "multi_reward": self.multi_reward,
            "on_null": self.on_null,
            "reward_clip": self.reward_clip,
            **({"advantage_clip": self.advantage_clip} if self.advantage_clip is not None else {}),  # older summaries have no key
            "kl_in_reward": self.kl_in_reward,
            "kl": self.kl if self.kl_in_reward is not None else None,
            **({"kl_at": self.kl_at} if self.kl_in_reward is not None and self.kl_at != "before-baseline" else {}),  # older summaries have no key
            **({"kl_reward_clamp": self.kl_reward_clamp} if self.kl_in_reward is not None and self.kl_reward_clamp is not None else {}),
            **{k: getattr(self, k) if k in spec.params else None for k in ("gamma", "lam")},
            **({"masked_steps": self.masked_steps} if self.masked_steps != "skip" else {}),  # older summaries have no key
            **({"group_stats": self.group_stats} if self.group_stats != "float64" else {}),  # older summaries have no key
            **whiten,
        }


REWARD_OPTIONS = frozenset(f.name for f in fields(AdvantageConfig) if f.metadata["group"] == "rewards")  # how the reward columns make the reward
