"""The options of `grpo objective` (and of :func:`grpo_cli.policy_objective`): the loss and its
clipping, the aggregation, the KL penalty and the rollout correction, each with its one
default and help (see :mod:`grpo_cli.config` for how options are given and resolved).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..config import CLIP, INPUT, KL_PANEL, ROLLOUT, Options, check_choice, check_range, defaults, listing, option, value_range, weight_bounds
from ..errors import UsageError
from ..kl import KL_ESTIMATORS
from ..numerics import LOGRATIO_CLAMP_MAX
from ..presets import PRESETS
from . import AGGREGATIONS, ALIASES, LOSSES, RATIO_LEVELS
from .rollout import IS_ALIASES, REJECT_ALIASES, REJECT_LEVELS

CISPO_CLIPS = ("two-sided", "upper", "epsilon-high")
KL_WEIGHTS = ("none", "ratio")
OWN_OPTIONS = (
    "cispo_clip",
    "dro_beta",
    "clip_cov_ratio",
    "clip_cov_lb",
    "clip_cov_ub",
    "kl_cov_ratio",
    "ppo_kl_coef",
    "seed",
    "vespo_k_pos",
    "vespo_lambda_pos",
    "vespo_k_neg",
    "vespo_lambda_neg",
)


@dataclass(frozen=True, kw_only=True)
class ObjectiveConfig(Options):
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
    cispo_clip
        CISPO's weight: ``two-sided`` clip (verl), ``upper`` ``min(rho, 1 + epsilon_high)``
        (Twinkle), ``epsilon-high`` ``min(rho, epsilon_high)`` (TRL: epsilon_high is the cap).
    dro_beta
        DRO's quadratic penalty weight (required by ``dro``).
    clip_cov_ratio, clip_cov_lb, clip_cov_ub, kl_cov_ratio, ppo_kl_coef, seed
        verl's covariance losses (:mod:`grpo_cli.objective.cov`): the share of tokens chosen,
        clip_cov's covariance bounds and the ``seed`` of its draw, kl_cov's penalty weight.
    vespo_k_pos, vespo_lambda_pos, vespo_k_neg, vespo_lambda_neg
        VESPO's gamma weight ``exp(lambda + k log w - lambda w)`` where ``A >= 0`` and ``A < 0``.
    ratio_level
        ``token`` (PPO) or ``sequence`` (GSPO: ``exp`` of the mean token log-ratio of the row).
    agg
        How token terms become one number (see :data:`grpo_cli.objective.AGGREGATIONS`;
        TRL's loss_type names are accepted, :data:`grpo_cli.objective.ALIASES`).
    max_length
        The constant of ``seq-mean-token-sum-norm`` (required by it, refused by the others).
    beta, kl, kl_weight, kl_clamp
        KL penalty against reference log-probs: ``L - beta * KL`` with estimator ``kl``,
        each token's KL clamped to ``[-kl_clamp, kl_clamp]`` and, with ``kl_weight`` ratio,
        times the ratio rho.
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

    PANEL: ClassVar[str] = CLIP

    preset: str = option(None, "Another framework's conventions for every option not given (see `grpo presets`).", panel=INPUT, choices=PRESETS)
    loss: str = option("ppo", "The per-token objective: " + listing({n: loss.help for n, loss in LOSSES.items()}), choices=LOSSES)
    epsilon: float = option(0.2, "Clip range: clip(rho, 1 - eps, 1 + eps).")
    epsilon_low: float = option(None, "Override the low side of the clip range.", shown="--epsilon")
    epsilon_high: float = option(None, "Override the high side of the clip range (DAPO clip-higher).", shown="--epsilon")
    dual_clip: float = option(None, "C > 1: for A < 0 the token term is max(surrogate, C*A).")
    delta: float = option(None, "TRL's two-sided clipping: the unclipped ratio is also capped at DELTA > 1.")
    tau_pos: float = option(1.0, "SAPO's gate temperature where A > 0.")
    tau_neg: float = option(1.05, "SAPO's gate temperature where A < 0.")
    cispo_clip: str = option(
        "two-sided",
        "CISPO's weight: two-sided = clip(rho, 1 - eps_low, 1 + eps_high) (verl); upper = min(rho, 1 + eps_high) "
        "(Twinkle); epsilon-high = min(rho, eps_high), eps_high being the cap itself (TRL).",
        choices=CISPO_CLIPS,
    )
    dro_beta: float = option(None, "DRO's weight beta > 0 of the quadratic penalty beta/2 (new - old)^2 (required by it).")
    clip_cov_ratio: float = option(0.0002, "clip_cov: the share of counted tokens drawn (at least one).")
    clip_cov_lb: float = option(1.0, "clip_cov: draw among tokens whose covariance is above this bound...")
    clip_cov_ub: float = option(5.0, "... and below this one.")
    kl_cov_ratio: float = option(0.0002, "kl_cov: the share of counted tokens, of largest covariance, penalised (at least one).")
    ppo_kl_coef: float = option(0.1, "kl_cov: the penalty's weight, ppo_kl_coef * |new - old| (verl's config: 0.1).")
    seed: int = option(
        0, "clip_cov's random draw (numpy's PCG64: not torch's generator, so not verl's draw; the same for any batch size or thread count)."
    )
    vespo_k_pos: float = option(2.0, "VESPO's power k where A >= 0 (fades rows of w < 1).")
    vespo_lambda_pos: float = option(3.0, "VESPO's decay lambda where A >= 0 (fades rows of w > 1).")
    vespo_k_neg: float = option(3.0, "VESPO's power k where A < 0.")
    vespo_lambda_neg: float = option(2.0, "VESPO's decay lambda where A < 0.")
    ratio_level: str = option("token", "token (PPO) or sequence (GSPO: exp of the row's mean log-ratio).", choices=RATIO_LEVELS)
    agg: str = option(
        "seq-mean-token-sum",
        "How token terms become one number (or TRL's loss_type: "
        + ", ".join(f"{k} = {v}" for k, v in ALIASES.items())
        + "): "
        + listing({n: a.help for n, a in AGGREGATIONS.items()}),
        choices=(*AGGREGATIONS, *ALIASES),
    )
    max_length: int = option(None, "The constant of seq-mean-token-sum-norm (required by it).")
    logratio_clamp: float = option(20.0, "Clamp new - old (and old - rollout) to [-c, c] before exp (counted in the summary).")
    is_level: str = option(
        None,
        "Weight each token's loss term by pi_old / pi_rollout: token = exp(old - rollout), sequence = exp of "
        "the row's sum on every token (or TRL's " + ", ".join(IS_ALIASES) + ").",
        panel=ROLLOUT,
        metavar="LEVEL",
        flags=("--is",),
    )
    is_cap: float = option(None, "Truncate the weights at C (TIS).", panel=ROLLOUT, metavar="C")
    is_mask: tuple = option(
        None, "Set weights outside [LO, HI] to 0 (IcePop; the token stays counted).", panel=ROLLOUT, parse=value_range, metavar="LO,HI"
    )
    reject: str = option(
        None,
        "Reject tokens or rows whose KL(rollout || old) estimate is out of bounds: k1, k2, k3 (or verl's "
        "token_k1, seq_sum_k1, seq_mean_k3, ...); rejected tokens leave the mask.",
        panel=ROLLOUT,
        metavar="KL",
    )
    reject_level: str = option(
        "token", "Where --reject's estimate is taken: per token, or a row's sum or mean (rejects the row).", panel=ROLLOUT, choices=REJECT_LEVELS
    )
    reject_threshold: str = option(
        None, "--reject's bounds: k1 'LO,HI' as ratios (or 'X': 1/X to X); k2, k3 'X' (upper).", panel=ROLLOUT, metavar="BOUNDS"
    )
    beta: float = option(0.0, "KL penalty weight against reference log-probs: L - beta*KL.", panel=KL_PANEL)
    kl: str = option(
        "k3",
        "KL estimator with d = new - ref: " + listing({n: (f.__doc__ or "").strip() for n, f in KL_ESTIMATORS.items()}),
        panel=KL_PANEL,
        choices=KL_ESTIMATORS,
    )
    kl_weight: str = option(
        "none", "The KL penalty per token: none = beta*KL; ratio = beta*rho*KL (TRL's use_bias_correction_kl).", panel=KL_PANEL, choices=KL_WEIGHTS
    )
    kl_clamp: float = option(None, "Clamp the KL penalty's per-token value to [-c, c] (verl's low_var_kl: 10).", panel=KL_PANEL, metavar="C")

    def __post_init__(self) -> None:
        given = self._fill_defaults("objective")
        self._rollout_correction(given)
        check_choice("loss", self.loss, tuple(LOSSES))
        loss = LOSSES[self.loss]
        for name in sorted(given & (loss_params() - set(loss.params))):
            taken = ", ".join(f"`{p}`" for p in loss.params) or "none of them"
            fixed = dict(loss.defaults)
            why = f" (it is defined with `{name}` {fixed[name]!r})" if name in fixed else ""
            raise UsageError(f"loss {self.loss!r} takes no `{name}`{why}; of the loss options it takes {taken}")
        base = defaults(ObjectiveConfig)
        self._set(
            **{name: base[name] for name in loss_params() - set(loss.params)}  # a preset's, for another loss
            | {name: value for name, value in loss.defaults if name not in given}
        )
        if self.delta is not None:
            if "dual_clip" in given:
                raise UsageError("`dual_clip` and `delta` both cap the ratio where A < 0 (verl's and TRL's name); pass one")
            check_range("delta", self.delta, 1, open_low=True)
            self._set(dual_clip=None)  # a preset's dual clip gives way to the delta given
        for name in ("tau_pos", "tau_neg"):
            check_range(name, getattr(self, name), 0, open_low=True)
        self._loss_options(given)
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
            raise UsageError(f"`epsilon_low` must be <= 1 (1 - epsilon_low is the lower bound of the ratio; 1: none) (found {self.epsilon_low!r})")
        if self.dual_clip is not None:
            check_range("dual_clip", self.dual_clip, 1, open_low=True)
        check_choice("ratio_level", self.ratio_level, tuple(RATIO_LEVELS))
        check_choice("agg", self.agg, (*AGGREGATIONS, *ALIASES))
        self._set(agg=ALIASES.get(self.agg, self.agg))
        if AGGREGATIONS[self.agg].needs_max_length:
            if self.max_length is None or self.max_length < 1:
                raise UsageError(f"`agg` {self.agg!r} needs `max_length` >= 1 (found {self.max_length!r})")
        elif "max_length" in given:
            normed = " or ".join(repr(name) for name, a in AGGREGATIONS.items() if a.needs_max_length)
            raise UsageError(f"`max_length` applies only to `agg` {normed} (found `agg` {self.agg!r}); drop it")
        check_range("beta", self.beta, 0)
        check_choice("kl", self.kl, tuple(KL_ESTIMATORS))
        check_range("logratio_clamp", self.logratio_clamp, 0, LOGRATIO_CLAMP_MAX, open_low=True)
        if self.is_level is not None and self.loss == "gmpo":
            raise UsageError(
                "loss 'gmpo' takes the geometric mean of its weights in verl, which is not modelled; drop `is_level`, or pass another `loss`"
            )
        if self.is_level is not None and self.loss == "vespo":
            raise UsageError(
                "loss 'vespo' folds the weights into its gamma weight in TRL, which is not modelled; drop `is_level`, or pass another `loss`"
            )

    def _loss_options(self, given: frozenset[str]) -> None:
        """Check the options of CISPO, DRO and verl's covariance losses, and the KL penalty's."""
        check_choice("cispo_clip", self.cispo_clip, CISPO_CLIPS)
        if self.cispo_clip != "two-sided" and "epsilon_low" in given:
            raise UsageError(f"`cispo_clip` {self.cispo_clip!r} caps the weight from above only; drop `epsilon_low`")
        if self.loss == "dro" and (self.dro_beta is None or not self.dro_beta > 0):
            raise UsageError(f"loss 'dro' needs `dro_beta` > 0 (found {self.dro_beta!r})")
        if self.dro_beta is not None:
            check_range("dro_beta", self.dro_beta, 0, open_low=True)
        for name in ("clip_cov_ratio", "kl_cov_ratio"):
            check_range(name, getattr(self, name), 0, 1, open_low=True)
        check_range("ppo_kl_coef", self.ppo_kl_coef, 0)
        if not self.clip_cov_lb < self.clip_cov_ub:
            raise UsageError(f"`clip_cov_lb` must be < `clip_cov_ub` (found {self.clip_cov_lb!r}, {self.clip_cov_ub!r})")
        if not (isinstance(self.seed, (int, np.integer)) and self.seed >= 0):
            raise UsageError(f"`seed` must be an integer >= 0 (found {self.seed!r})")
        for name in ("vespo_k_pos", "vespo_k_neg"):
            check_range(name, getattr(self, name), -np.inf)
        for name in ("vespo_lambda_pos", "vespo_lambda_neg"):
            check_range(name, getattr(self, name), 0)
        check_choice("kl_weight", self.kl_weight, KL_WEIGHTS)
        for name in sorted(given & {"kl_weight", "kl_clamp"}):
            if self.beta == 0:
                raise UsageError(f"`{name}` applies to the KL penalty; pass `beta` > 0 too, or drop it")
        if self.kl_clamp is not None:
            check_range("kl_clamp", self.kl_clamp, 0, open_low=True)

    def _rollout_correction(self, given: frozenset[str]) -> None:
        """Resolve and check the rollout-correction options (TRL's and verl's names included)."""
        if self.is_level is None:
            for name in sorted(given & {"is_cap", "is_mask"}):
                raise UsageError(f"`{name}` bounds the importance weights; pass `is_level` token or sequence too, or drop it")
        else:
            check_choice("is_level", self.is_level, ("token", "sequence", *IS_ALIASES))
            if self.is_level in IS_ALIASES:
                level, bound = IS_ALIASES[self.is_level]
                other = ({"is_cap", "is_mask"} - {bound}).pop()
                if getattr(self, bound) is None or getattr(self, other) is not None:
                    raise UsageError(f"`is_level` {self.is_level!r} takes `{bound}` (and not `{other}`); pass `is_level` {level!r} to combine both")
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
        check_choice("reject", self.reject, ("k1", "k2", "k3", *REJECT_ALIASES))
        check_choice("reject_level", self.reject_level, REJECT_LEVELS)
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
        loss_options = {
            k: getattr(self, k) if k in taken else None for k in ("epsilon_low", "epsilon_high", "dual_clip", "delta", "tau_pos", "tau_neg")
        }
        # the options of the losses that take them (CISPO's weight when it is not the one its summaries always had)
        loss_options.update({k: getattr(self, k) for k in OWN_OPTIONS if k in taken and (k, getattr(self, k)) != ("cispo_clip", "two-sided")})
        return {
            "preset": self.preset,
            "loss": self.loss,
            "agg": self.agg,
            **loss_options,
            "ratio_level": self.ratio_level,
            "beta": self.beta,
            "kl": self.kl,
            "max_length": self.max_length,
            "logratio_clamp": self.logratio_clamp,
            **({"kl_weight": self.kl_weight} if self.kl_weight != "none" else {}),  # only when set, as older summaries
            **({"kl_clamp": self.kl_clamp} if self.kl_clamp is not None else {}),
            "is_level": self.is_level,
            "is_cap": self.is_cap,
            "is_mask": self.is_mask,
            "reject": self.reject,
            **{k: getattr(self, k) if self.reject else None for k in ("reject_level", "reject_threshold")},
        }


def loss_params() -> set[str]:
    """The options that belong to some loss (every other objective option applies to all)."""
    return {p for loss in LOSSES.values() for p in loss.params}
