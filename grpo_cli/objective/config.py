"""The options of `grpo objective` (and of :func:`grpo_cli.policy_objective`): the loss and its
clipping, the aggregation, the KL penalty and the rollout correction, each with its one
default and help (see :mod:`grpo_cli.config` for how options are given and resolved).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

import numpy as np

from ..config import CLIP, INPUT, KL_PANEL, ROLLOUT, Options, check_choice, check_range, defaults, listing, option, value_range, weight_bounds
from ..errors import UsageError
from ..kl import KL_ESTIMATORS
from ..numerics import LOGRATIO_CLAMP_MAX
from ..presets import NAMES, lookup
from . import AGGREGATIONS, ALIASES, LOSSES, RATIO_LEVELS
from .aggregation import EMPTY_ROWS
from .micro import RULES as MICRO_BATCH_RULES
from .rollout import BYPASS_MODES, GATES, IS_ALIASES, REJECT_ALIASES, REJECT_LEVELS, REJECT_STATISTICS, Criterion

CISPO_CLIPS = ("two-sided", "upper", "epsilon-high")
GMPO_EMPTY = ("zero", "advantage")
EMPTY_ROW_RULES = (*EMPTY_ROWS, "refuse")  # refuse: a row without tokens and with a per-row advantage (Twinkle 0.1 raises)
KL_WEIGHTS = ("none", "ratio")
UNRECORDED = (("cispo_clip", "two-sided"), ("gmpo_empty", "zero"))
KL_AGGREGATIONS = tuple(name for name, a in AGGREGATIONS.items() if not a.needs_max_length)
OWN_OPTIONS = (
    "cispo_clip",
    "gmpo_empty",
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
    "value_clip",
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
    gmpo_empty
        What GMPO's row without counted tokens adds to the mean over rows: ``zero`` (verl's
        geo_mean) or ``advantage``, ``A_i`` (TRL's GMPOTrainer: exp of the mean of no
        log-ratios is 1); only with ``agg`` seq-mean-token-mean and ``empty_rows`` count.
    dro_beta
        DRO's quadratic penalty weight (required by ``dro``).
    clip_cov_ratio, clip_cov_lb, clip_cov_ub, kl_cov_ratio, ppo_kl_coef, seed
        verl's covariance losses (:mod:`grpo_cli.objective.cov`): the share of tokens chosen,
        clip_cov's covariance bounds and the ``seed`` of its draw, kl_cov's penalty weight.
    vespo_k_pos, vespo_lambda_pos, vespo_k_neg, vespo_lambda_neg
        VESPO's gamma weight ``exp(lambda + k log w - lambda w)`` where ``A >= 0`` and ``A < 0``.
    value_clip
        ``ppo_value``'s clip of the new values around the old ones, ``V_old + clip(V - V_old,
        -c, c)`` (Twinkle's ``value_clip``, 0.2).
    ratio_level
        ``token`` (PPO) or ``sequence`` (GSPO: ``exp`` of the mean token log-ratio of the row).
    agg
        How token terms become one number (see :data:`grpo_cli.objective.AGGREGATIONS`;
        TRL's loss_type names are accepted, :data:`grpo_cli.objective.ALIASES`, and a
        preset's own, :attr:`grpo_cli.presets.Preset.aliases`: trl@1.9's luspo).
    max_length
        The constant of ``seq-mean-token-sum-norm`` and ``token-sum-norm`` (required by them,
        refused by the others).
    empty_rows
        Rows with no counted tokens (fully masked, or emptied by sequence-level rejection) in
        an aggregation's mean over rows: ``count`` (as 0; verl 0.9.1, TRL, twinkle-kit 0.5.1)
        or ``skip`` (left out; verl 0.7.0's actor, OpenRLHF); refused by the aggregations
        that take no mean over rows. ``refuse``, with any aggregation: such a row with a
        per-row advantage is refused, one with per-token advantages counts as 0 (twinkle-kit
        0.1: its ``repeat_interleave`` of the row advantages over the rows' token counts
        raises, loss/grpo.py:146-149).
    micro_batch_size, micro_batch_rule
        The input is one mini-batch; split it into micro-batches of ``micro_batch_size``
        consecutive rows (the last one shorter if the rows do not divide), each aggregated as
        ``micro_batch_rule`` says (:mod:`grpo_cli.objective.micro`): ``global`` (verl 0.9.1:
        the input's denominators; only a ``*-norm``'s ``L``, without ``max_length``, is each
        micro-batch's longest row), ``row-weighted`` (verl 0.7.0: each micro-batch alone,
        weighted by its rows) or ``mean`` (Twinkle: the mean of the micro-batches' values).
        The rollout correction's ``is_normalize`` takes its mean over the whole input (verl
        normalises in the trainer, before the actor splits the batch); verl's covariance
        losses, which choose their tokens per micro-batch, are refused.
    beta, kl, kl_weight, kl_clamp
        KL penalty against reference log-probs: ``L - beta * KL`` with estimator ``kl``,
        each token's KL clamped to ``[-kl_clamp, kl_clamp]`` and, with ``kl_weight`` ratio,
        times the ratio rho.
    kl_agg
        How the penalty's token terms become one number. Not given: ``agg``'s, the penalty
        being part of each token's term. Given: ``agg(L) - beta * kl_agg(KL)``, OpenRLHF
        0.11.2's KL loss, a token mean whatever the policy loss's aggregation
        (trainer/ray/ppo_actor.py:318-338, ``aggregate_loss(kl, mask)``, ``token_level_loss``
        True by default, models/loss.py:11-39).
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
        ``sequence-sum``, ``sequence-mean`` or ``sequence-max``; verl's names are accepted)
        is out of bounds: for ``k1`` the ratio bounds ``"LO,HI"`` (or verl's ``"LO_HI"``, or
        ``"X"``: 1/X to X), for ``k2``/``k3`` the upper bound ``"X"``; or OpenRLHF's gating
        divergences ``binary_kl``, ``tv`` of the sampled token's probabilities (upper bound ``"X"``). Several criteria,
        comma-separated (verl's ``rollout_rs`` list), reject what any rejects; their
        thresholds are one per criterion, comma-separated (k1 bounds ``"LO_HI"``), or one for all.
    reject_veto, reject_counted
        verl 0.7.0's veto: a row with a token of ``pi_old / pi_rollout < V`` is rejected;
        rejected tokens stay counted with weight 0 instead of leaving the mask.
    is_floor, is_normalize
        The weights' lower truncation bound; their division by their mean over the input.
    off_policy_mask
        TRL's off_policy_mask_threshold (OPSM): a row with ``A < 0`` whose mean over its
        tokens of ``sampled - new`` (the rollout log-probs, else the old ones) exceeds it
        weighs 0, its tokens still counted.
    top_entropy_quantile
        TRL's ``top_entropy_quantile`` rho: only the tokens whose entropy (the entropy
        column) is at least the ``1 - rho`` quantile of the input's counted tokens keep their
        loss term, the others weigh 0 and stay counted (:mod:`grpo_cli.objective.entropy`);
        1: off.
    bypass
        verl's bypass mode: the rollout log-probs are the old policy, and the weights and
        rejection take ``new - rollout``; ``ppo_clip`` is loss ``ppo`` unweighted,
        ``reinforce`` loss ``gpg`` times the weights.
    """

    PANEL: ClassVar[str] = CLIP

    preset: str | None = option(
        None, "A framework's conventions, at a release (verl@0.7), for every option not given (see `grpo presets`).", panel=INPUT, choices=NAMES
    )
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
    gmpo_empty: str = option(
        "zero",
        "What GMPO's row without counted tokens adds to the mean over rows: zero (verl's geo_mean) or advantage, "
        "A (TRL's GMPOTrainer: its weight is exp(0) = 1).",
        choices=GMPO_EMPTY,
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
    value_clip: float = option(0.2, "ppo_value: the new values are clipped to V_old +- C (Twinkle's value_clip).", metavar="C")
    ratio_level: str = option("token", "token (PPO) or sequence (GSPO: exp of the row's mean log-ratio).", choices=RATIO_LEVELS)
    agg: str = option(
        "seq-mean-token-sum",
        "How token terms become one number (or TRL's loss_type: "
        + ", ".join(f"{k} = {v}" for k, v in ALIASES.items())
        + "; with --preset trl@1.9, luspo = luspo-padded at token level): "
        + listing({n: a.help for n, a in AGGREGATIONS.items()}),
        choices=(*AGGREGATIONS, *ALIASES),
    )
    max_length: int = option(None, "The constant of seq-mean-token-sum-norm and token-sum-norm (required by them).")
    empty_rows: str = option(
        "count",
        "Rows with no counted tokens in a mean over rows: count (as 0; verl 0.9.1, TRL, Twinkle) or skip (left out; verl 0.7.0, OpenRLHF); "
        "refuse: a row with a per-row advantage is refused, with any --agg (Twinkle 0.1 raises), one with per-token advantages counts as 0.",
        choices=EMPTY_ROW_RULES,
    )
    micro_batch_size: int = option(
        None,
        "Split the input (one mini-batch) into micro-batches of N consecutive rows, the last one shorter if the rows "
        "do not divide; they make the objective as --micro-batch-rule says. Not given: the input is one micro-batch.",
        metavar="N",
    )
    micro_batch_rule: str = option(
        "global",
        "How the micro-batches make the mini-batch's value: global = the input's denominators in each, so the value is "
        "the input's, except that a *-norm aggregation without --max-length divides each by its longest row (verl 0.9.1); "
        "row-weighted = each aggregated alone, weighted by its rows (verl 0.7.0); mean = each aggregated alone, the mean "
        "of their values (Twinkle).",
        choices=tuple(MICRO_BATCH_RULES),
    )
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
        "token_k1, seq_sum_k1, seq_mean_k3, seq_max_k2, ...; several, comma-separated, reject what any rejects), or "
        "OpenRLHF's gating divergences of the sampled token's probabilities, binary_kl and tv; rejected tokens leave the mask.",
        panel=ROLLOUT,
        metavar="KL",
    )
    reject_level: str = option(
        "token",
        "Where --reject's estimate is taken: per token, or a row's sum, mean or max (k2, k3; rejects the row).",
        panel=ROLLOUT,
        choices=REJECT_LEVELS,
    )
    reject_threshold: str = option(
        None,
        "--reject's bounds: k1 'LO,HI' (or 'LO_HI') as ratios, or 'X': 1/X to X; k2, k3, binary_kl, tv 'X' (upper). "
        "Several criteria: one per criterion, comma-separated, or one for all.",
        panel=ROLLOUT,
        metavar="BOUNDS",
    )
    reject_veto: float = option(
        None, "Reject a row holding a token with pi_old / pi_rollout < V (verl 0.7.0's rollout_token_veto_threshold).", panel=ROLLOUT, metavar="V"
    )
    reject_counted: bool = option(
        False,
        "Rejected tokens stay counted, weighted 0, instead of leaving the mask (verl 0.9.1's bypass mode, OpenRLHF's seq-mask-tis).",
        panel=ROLLOUT,
    )
    is_floor: float = option(
        None, "Truncate the weights from below at F (TRL's vllm_importance_sampling_clip_min; OpenRLHF's TIS: 0.5).", panel=ROLLOUT, metavar="F"
    )
    is_normalize: bool = option(
        False,
        "Divide the weights by their mean over the input's counted tokens (sequence: rows), verl's rollout_is_batch_normalize.",
        panel=ROLLOUT,
    )
    off_policy_mask: float = option(
        None,
        "TRL's off_policy_mask_threshold: a row with A < 0 whose mean of sampled - new log-probs (the rollout's, else the old) "
        "exceeds DELTA weighs 0, its tokens still counted.",
        panel=ROLLOUT,
        metavar="DELTA",
    )
    top_entropy_quantile: float = option(
        1.0,
        "TRL's top_entropy_quantile: only the tokens whose entropy (--entropy-col) is at least the (1 - RHO) quantile "
        "of the input's counted tokens keep their loss term; the others weigh 0 and stay counted (1: off).",
        metavar="RHO",
    )
    bypass: str = option(
        None,
        "verl's bypass mode: the rollout log-probs are the old policy, weights and rejection take new - rollout: "
        "ppo_clip (loss ppo, unweighted) or reinforce (loss gpg times the weights).",
        panel=ROLLOUT,
        choices=BYPASS_MODES,
        metavar="LOSS",
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
    kl_agg: str = option(
        None,
        "Aggregate the KL penalty on its own: agg(L) - beta*KL_AGG(KL) (OpenRLHF: token-mean whatever --agg); not given: as --agg.",
        panel=KL_PANEL,
        choices=KL_AGGREGATIONS,
        metavar="KL_AGG",
    )

    def __post_init__(self) -> None:
        given = self._fill_defaults("objective", "loss", str, lambda name: dict(LOSSES[name].defaults) if name in LOSSES else {})
        self._rollout_correction(given)
        check_choice("loss", self.loss, tuple(LOSSES))
        loss = LOSSES[self.loss]
        fixed = dict(loss.defaults)
        for name in sorted(given & (loss_params() - set(loss.params))):
            taken = ", ".join(f"`{p}`" for p in loss.params) or "none of them"
            why = f" (it is defined with `{name}` {fixed[name]!r})" if name in fixed else ""
            raise UsageError(f"loss {self.loss!r} takes no `{name}`{why}; of the loss options it takes {taken}")
        base = defaults(ObjectiveConfig)
        self._set(**{name: base[name] for name in loss_params() - set(loss.params) - set(fixed)})  # a preset's, for another loss
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
        self._set(agg=self._aggregation())
        self._micro_batches(given)
        padded = self.micro_batch_size is not None and self.micro_batch_rule == "global"  # L: each micro-batch's longest row
        if AGGREGATIONS[self.agg].needs_max_length:
            if (self.max_length is None and not padded) or (self.max_length is not None and self.max_length < 1):
                raise UsageError(f"`agg` {self.agg!r} needs `max_length` >= 1 (found {self.max_length!r})")
        elif "max_length" in given:
            normed = " or ".join(repr(name) for name, a in AGGREGATIONS.items() if a.needs_max_length)
            raise UsageError(f"`max_length` applies only to `agg` {normed} (found `agg` {self.agg!r}); drop it")
        else:
            self._set(max_length=None)  # a preset's, for another aggregation
        check_choice("empty_rows", self.empty_rows, EMPTY_ROW_RULES)
        if self.gmpo_empty == "advantage" and (self.agg, self.empty_rows) != ("seq-mean-token-mean", "count"):
            raise UsageError(
                "`gmpo_empty` 'advantage' is a row's term in the mean of the row means: pass `agg` 'seq-mean-token-mean' "
                f"with `empty_rows` 'count' (found {self.agg!r}, {self.empty_rows!r})"
            )
        if self.kl_agg == self.agg or self.beta == 0:
            self._set(kl_agg=None)  # the penalty, if any, is aggregated with the loss
        if "empty_rows" in given and self.empty_rows != "refuse" and not any(AGGREGATIONS[a].over_rows for a in (self.agg, self.kl_agg or self.agg)):
            means = ", ".join(repr(name) for name, a in AGGREGATIONS.items() if a.over_rows)
            raise UsageError(f"`empty_rows` applies only to the means over rows, `agg` {means} (found `agg` {self.agg!r}); drop it")
        check_range("beta", self.beta, 0)
        check_choice("kl", self.kl, tuple(KL_ESTIMATORS))
        check_range("logratio_clamp", self.logratio_clamp, 0, LOGRATIO_CLAMP_MAX, open_low=True)
        if loss.critic:
            if self.weighting:
                raise UsageError(f"loss {self.loss!r} is the critic's, which the rollout correction does not weight; drop `{self.weighting[0]}`")
            if self.beta > 0:
                raise UsageError(f"loss {self.loss!r} is the critic's, which takes no KL penalty; drop `beta`")
        if self.is_level is not None and self.loss == "gmpo":
            raise UsageError(
                "loss 'gmpo' takes the geometric mean of its weights in verl, which is not modelled; drop `is_level`, or pass another `loss`"
            )
        if self.is_level is not None and self.loss == "vespo":
            raise UsageError(
                "loss 'vespo' folds the weights into its gamma weight in TRL, which is not modelled; drop `is_level`, or pass another `loss`"
            )

    def _micro_batches(self, given: frozenset[str]) -> None:
        """Check the micro-batch size and rule."""
        check_choice("micro_batch_rule", self.micro_batch_rule, tuple(MICRO_BATCH_RULES))
        if self.micro_batch_size is None:
            if "micro_batch_rule" in given:
                raise UsageError("`micro_batch_rule` applies to micro-batches; pass `micro_batch_size` too, or drop it")
            return
        if not (isinstance(self.micro_batch_size, (int, np.integer)) and self.micro_batch_size >= 1):
            raise UsageError(f"`micro_batch_size` must be an integer >= 1 (found {self.micro_batch_size!r})")
        if self.preset is not None and "micro_batch_rule" not in given and "micro_batch_rule" not in lookup(self.preset).objective:
            raise UsageError(f"preset {self.preset!r} does not say how its framework combines micro-batches; pass `micro_batch_rule` too")
        if LOSSES[self.loss].scans:
            raise UsageError(
                f"loss {self.loss!r} takes its statistics and chooses its tokens per micro-batch in verl, which is not modelled; drop `micro_batch_size`"
            )

    def _aggregation(self) -> str:
        """``agg`` with TRL's loss_type names resolved, the preset's own first (trl@1.9's
        luspo: ``luspo-padded`` at token level; at sequence level its per-token loss is one
        column, whose mean over rows is ``seq-mean-token-sum``), and ``luspo-padded`` checked."""
        aliases = {**ALIASES, **(lookup(self.preset).aliases if self.preset is not None else {})}
        agg = aliases.get(self.agg, self.agg)
        if not AGGREGATIONS[agg].padded:
            return agg
        if self.ratio_level != "token":
            if self.agg not in ALIASES:
                raise UsageError("`agg` 'luspo-padded' is TRL 1.9's luspo at token level; at `ratio_level` sequence it is 'seq-mean-token-sum'")
            if self.beta > 0:  # TRL 1.9 adds beta * KL per token before its B x T mean, the padding's KL included
                raise UsageError(
                    f"`agg` {self.agg!r} of preset {self.preset!r} with `beta` > 0 averages the KL of TRL's padding positions too, which a file does not hold; drop `beta`"
                )
            return ALIASES[self.agg]
        if self.loss != "ppo":
            raise UsageError(f"`agg` 'luspo-padded' takes loss 'ppo', TRL's luspo term, whose padding is taken at ratio 1 (found {self.loss!r})")
        if self.beta > 0:
            raise UsageError("`agg` 'luspo-padded' with `beta` > 0 adds the KL of TRL's padding positions, which a file does not hold; drop `beta`")
        if self.micro_batch_size is not None:
            raise UsageError(
                "`agg` 'luspo-padded' pads TRL's whole generation batch to its longest row, not each micro-batch; drop `micro_batch_size`"
            )
        if self.weighting:
            raise UsageError(f"`agg` 'luspo-padded' takes no `{self.weighting[0]}`: TRL weights its padding positions too, which is not modelled")
        return agg

    def check_per_token_advantages(self) -> None:
        """Refuse per-token advantages where ``agg`` needs one per row (``luspo-padded``: a padding position's term is its row's)."""
        if AGGREGATIONS[self.agg].padded:
            raise UsageError(f"`agg` {self.agg!r} takes one advantage per row (TRL's): a padding position's term is its row's")

    def _loss_options(self, given: frozenset[str]) -> None:
        """Check the options of CISPO, DRO and verl's covariance losses, and the KL penalty's."""
        check_choice("cispo_clip", self.cispo_clip, CISPO_CLIPS)
        check_choice("gmpo_empty", self.gmpo_empty, GMPO_EMPTY)
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
        for name in ("vespo_lambda_pos", "vespo_lambda_neg", "value_clip"):
            check_range(name, getattr(self, name), 0)
        check_choice("kl_weight", self.kl_weight, KL_WEIGHTS)
        if self.kl_agg is not None:
            check_choice("kl_agg", self.kl_agg, KL_AGGREGATIONS)
        for name in sorted(given & {"kl_weight", "kl_clamp", "kl_agg"}):
            if self.beta == 0:
                raise UsageError(f"`{name}` applies to the KL penalty; pass `beta` > 0 too, or drop it")
        if self.kl_clamp is not None:
            check_range("kl_clamp", self.kl_clamp, 0, open_low=True)
        clamped = lookup(self.preset).kl_clamped if self.preset is not None else None
        if "kl_clamp" not in given and clamped is not None and self.kl not in clamped:
            self._set(kl_clamp=None)  # a preset's clamp, for a KL estimator the framework does not clamp

    def _rollout_correction(self, given: frozenset[str]) -> None:
        """Resolve and check the rollout-correction options (TRL's and verl's names included)."""
        if self.is_level is None:
            for name in sorted(given & {"is_cap", "is_mask", "is_floor", "is_normalize"}):
                raise UsageError(f"`{name}` applies to the importance weights; pass `is_level` token or sequence too, or drop it")
        else:
            check_choice("is_level", self.is_level, ("token", "sequence", *IS_ALIASES))
            if self.is_level in IS_ALIASES:
                level, bounds = IS_ALIASES[self.is_level]
                others = sorted({"is_cap", "is_mask", "is_floor"} - set(bounds))
                if all(getattr(self, b) is None for b in bounds) or any(getattr(self, o) is not None for o in others):
                    takes = " or ".join(f"`{b}`" for b in bounds)
                    raise UsageError(
                        f"`is_level` {self.is_level!r} takes {takes} (and not {', '.join(f'`{o}`' for o in others)}); "
                        f"pass `is_level` {level!r} to combine them"
                    )
                self._set(is_level=level)
        if self.is_cap is not None:
            check_range("is_cap", self.is_cap, 0, open_low=True)
        if self.is_floor is not None:
            check_range("is_floor", self.is_floor, 0, np.inf if self.is_cap is None else self.is_cap, open_low=True)
            if self.is_mask is not None:
                raise UsageError("`is_floor` raises the weights `is_mask` sets to 0; pass one of them")
        self._set(is_mask=weight_bounds(self.is_mask))
        if self.reject_veto is not None:
            check_range("reject_veto", self.reject_veto, 0, open_low=True)
        if self.off_policy_mask is not None:
            check_range("off_policy_mask", self.off_policy_mask, 0)
        check_range("top_entropy_quantile", self.top_entropy_quantile, 0, 1)
        if self.reject_counted and self.reject is None and self.reject_veto is None:
            raise UsageError("`reject_counted` applies to rejected tokens; pass `reject` or `reject_veto` too, or drop it")
        self._bypass(given)
        if self.reject is None:
            for name in sorted(given & {"reject_level", "reject_threshold"}):
                raise UsageError(f"`{name}` applies to `reject`; pass `reject` k1, k2 or k3 too, or drop it")
            return
        names = str(self.reject).split(",")
        if len(set(names)) < len(names):
            raise UsageError(f"`reject` names a criterion twice (found {self.reject!r})")
        for name in names:
            check_choice("reject", name, (*REJECT_STATISTICS, *REJECT_ALIASES))
            level = REJECT_ALIASES.get(name, (name, self.reject_level))[1]
            if name in REJECT_ALIASES and "reject_level" in given and self.reject_level != level:
                raise UsageError(f"`reject` {name!r} is taken per {level}; drop `reject_level` {self.reject_level!r}")
        if len(names) == 1 and self.reject in REJECT_ALIASES:
            self._set(reject=REJECT_ALIASES[self.reject][0], reject_level=REJECT_ALIASES[self.reject][1])
        check_choice("reject_level", self.reject_level, REJECT_LEVELS)
        if self.reject_threshold is None:
            raise UsageError(f"`reject` {self.reject!r} needs `reject_threshold` (k1: 'LO,HI' ratio bounds or 'X'; k2, k3: 'X')")
        self._set(reject_threshold=str(self.reject_threshold))
        self.reject_criteria  # noqa: B018  (checks the thresholds now, not in the first batch)

    def _bypass(self, given: frozenset[str]) -> None:
        """verl's bypass mode: its loss (``ppo_clip``: ``ppo``, ``reinforce``: ``gpg``) in place of a preset's."""
        if self.bypass is None:
            return
        check_choice("bypass", self.bypass, BYPASS_MODES)
        loss = {"ppo_clip": "ppo", "reinforce": "gpg"}[self.bypass]
        if "loss" in given and self.loss != loss:
            raise UsageError(f"`bypass` {self.bypass!r} is loss {loss!r} (verl replaces the configured loss); drop `loss` {self.loss!r}")
        weighting = {"is_level", "is_cap", "is_mask", "is_floor", "is_normalize"}
        if self.bypass == "ppo_clip" and self.is_level is not None:
            for name in sorted(given & weighting):
                raise UsageError(f"`bypass` 'ppo_clip' does not weight its terms (verl computes the weights for its metrics only); drop `{name}`")
            base = defaults(ObjectiveConfig)
            self._set(**{name: base[name] for name in weighting})  # a preset's weights give way
        self._set(loss=loss)

    @cached_property
    def reject_criteria(self) -> tuple[Criterion, ...]:
        """The rejection criteria of ``reject``: one, or one per name of a comma-separated list,
        each with its bounds (see :func:`reject_bounds`).

        >>> ObjectiveConfig(reject="token_k1,seq_max_k3", reject_threshold="0.5_2,0.1").reject_criteria[1]
        Criterion(kl='k3', level='sequence-max', lo=-inf, hi=0.1)
        """
        if self.reject is None:
            return ()
        names = self.reject.split(",")
        texts = [self.reject_threshold] if len(names) == 1 else self.reject_threshold.split(",")
        if len(texts) == 1:
            texts *= len(names)
        if len(texts) != len(names):
            raise UsageError(
                f"`reject_threshold` takes one bound per `reject` criterion, or one for all (found {self.reject_threshold!r} for {self.reject!r})"
            )
        out = []
        for name, text in zip(names, texts):
            kl, level = REJECT_ALIASES.get(name, (name, self.reject_level))
            if level == "sequence-max" and kl == "k1":
                raise UsageError("`reject_level` 'sequence-max' takes k2 or k3 (verl's seq_max_k2, seq_max_k3); k1 is signed")
            out.append(Criterion(kl, level, *reject_bounds(kl, text)))
        return tuple(out)

    @property
    def correcting(self) -> list[str]:
        """The rollout-correction options given (``bypass``, ``is_level``, ``reject``,
        ``reject_veto``): each needs the rollout sampler's log-probs."""
        return [option for option in ("bypass", "is_level", "reject", "reject_veto") if getattr(self, option) is not None]

    @property
    def weighting(self) -> list[str]:
        """The options given that weight or drop tokens by the rollout sampler or the sequence
        (``is_level``, ``reject``, ``reject_veto``, ``off_policy_mask``)."""
        return [option for option in ("is_level", "reject", "reject_veto", "off_policy_mask") if getattr(self, option) is not None]

    @property
    def is_mean(self) -> float:
        """``is_normalize``'s divisor, the mean weight over the whole input (:func:`~grpo_cli.objective.rollout.is_mean`)."""
        return self._passed("is_mean", "is_normalize")

    @property
    def entropy_threshold(self) -> float:
        """``top_entropy_quantile``'s threshold, the quantile over the whole input (:func:`~grpo_cli.objective.entropy.entropy_threshold`)."""
        return self._passed("entropy_threshold", "top_entropy_quantile")

    def _passed(self, name: str, option: str) -> float:
        value = getattr(self, f"_{name}", None)
        if value is None:
            raise RuntimeError(f"`{option}` needs `{name}`, a figure of the whole input: call `with_passed` first")
        return value

    def with_passed(self, **figures: float) -> ObjectiveConfig:
        """This config with figures of the whole input that passes before the objective's find
        (``is_mean``, ``entropy_threshold``)."""
        config = copy.copy(self)
        config._set(**{f"_{name}": value for name, value in figures.items()})
        return config

    @property
    def figures(self) -> dict:
        """The resolved options as summaries record them (``None``: an option the loss does not take)."""
        taken = LOSSES[self.loss].params
        loss_options = {
            k: getattr(self, k) if k in taken else None for k in ("epsilon_low", "epsilon_high", "dual_clip", "delta", "tau_pos", "tau_neg")
        }
        # the options of the losses that take them (CISPO's weight and GMPO's empty row when not the ones their summaries always had)
        loss_options.update({k: getattr(self, k) for k in OWN_OPTIONS if k in taken and (k, getattr(self, k)) not in UNRECORDED})
        return {
            "preset": self.preset,
            "loss": self.loss,
            "agg": self.agg,
            **loss_options,
            "ratio_level": self.ratio_level,
            "beta": self.beta,
            "kl": self.kl,
            "max_length": self.max_length,
            "empty_rows": self.empty_rows if AGGREGATIONS[self.agg].over_rows or self.empty_rows == "refuse" else None,
            "logratio_clamp": self.logratio_clamp,
            **({"kl_weight": self.kl_weight} if self.beta > 0 and self.kl_weight != "none" else {}),  # only where they apply
            **({"kl_clamp": self.kl_clamp} if self.beta > 0 and self.kl_clamp is not None else {}),
            **({"kl_agg": self.kl_agg} if self.kl_agg is not None else {}),
            "is_level": self.is_level,
            "is_cap": self.is_cap,
            "is_mask": self.is_mask,
            "reject": self.reject,
            **{k: getattr(self, k) if self.reject else None for k in ("reject_level", "reject_threshold")},
            "reject_veto": self.reject_veto,
            "reject_counted": self.reject_counted,
            "is_floor": self.is_floor,
            "is_normalize": self.is_normalize,
            "bypass": self.bypass,
            **({"off_policy_mask": self.off_policy_mask} if self.off_policy_mask is not None else {}),  # older summaries have no key
            **({"micro_batch_size": self.micro_batch_size, "micro_batch_rule": self.micro_batch_rule} if self.micro_batch_size is not None else {}),
            **self._entropy_figures,
        }

    @property
    def _entropy_figures(self) -> dict:
        """``top_entropy_quantile`` and its threshold, when on (older summaries have no key)."""
        if self.top_entropy_quantile == 1:
            return {}
        tau = getattr(self, "_entropy_threshold", None)
        return {"top_entropy_quantile": self.top_entropy_quantile, "entropy_threshold": None if tau is None or tau == np.inf else tau}


def reject_bounds(kl: str, text: str) -> tuple[float, float]:
    """The kept range of a ``kl`` estimate from its threshold ``text``: k1 in log space,
    ``[log LO, log HI]`` from ``"LO,HI"``, ``"LO_HI"`` or ``"X"`` (1/X to X); k2 and k3
    ``[-inf, X]``; binary_kl and tv ``[0, X]`` (OpenRLHF's, which a rounding below 0 leaves).

    >>> reject_bounds("k1", "2") == (-np.log(2), np.log(2))
    True
    """
    parts = text.replace("_", ",").split(",")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise UsageError(f"`reject_threshold` takes numbers (found {text!r})") from None
    if kl != "k1":
        if len(values) != 1 or not values[0] > 0:
            raise UsageError(f"`reject` {kl!r} takes one upper bound X > 0 as `reject_threshold` (found {text!r})")
        return (0.0 if kl in GATES else -np.inf), values[0]  # OpenRLHF keeps a divergence in [0, X]
    if len(values) == 1:
        if not values[0] > 1:
            raise UsageError(f"`reject_threshold` X for k1 keeps ratios in [1/X, X], so X must be > 1 (found {text!r})")
        values = [1.0 / values[0], values[0]]
    if len(values) != 2 or not 0 < values[0] < values[1]:
        raise UsageError(f"`reject_threshold` for k1 takes ratio bounds 0 < LO < HI (found {text!r})")
    return float(np.log(values[0])), float(np.log(values[1]))


def loss_params() -> set[str]:
    """The options that belong to some loss (every other objective option applies to all)."""
    return {p for loss in LOSSES.values() for p in loss.params}
