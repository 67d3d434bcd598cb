"""Per-row terms of the objective: ratio, loss, KL, composed on blocks of whole rows.

Token math is float64 on blocks of about :data:`~grpo_cli.tokens.BLOCK_TOKENS` tokens, so each pass
stays in cache; a row's numbers do not depend on the blocking. Masked tokens count nowhere.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from ..errors import RowError, present
from ..kl import KL_ESTIMATORS, k3, k3_with_ratio
from .aggregation import AGGREGATIONS
from .entropy import entropy_kept
from .losses import LOSSES, Loss, LossInputs, SignedFactors
from .ratio import RATIO_LEVELS
from .rollout import corrected, log_ratios, mismatch_terms, off_policy_kept
from ..tokens import BLOCK_TOKENS, Tokens, joined, row_count, row_reduce, row_sum


def row_terms(
    tokens: Tokens, advantages: np.ndarray | None, config, block_tokens: int = BLOCK_TOKENS, context: object = None, first_row: int = 0
) -> dict[str, np.ndarray]:
    """Per-row sums and extremes of every token quantity (see :func:`block_terms`), computed
    on blocks of about ``block_tokens`` tokens (:meth:`Tokens.row_blocks`).

    ``advantages`` holds one advantage per row, or is ``None`` when ``tokens.advantage``
    holds one per token. ``config`` is an :class:`~grpo_cli.objective.config.ObjectiveConfig`. A row
    whose sum is beyond float64 is refused (:func:`check_row_sums`). For a loss with scans
    (:class:`~grpo_cli.objective.losses.Scan`), ``context`` is what they found over the whole
    input, whose row ``first_row`` is these rows' first; ``None``: these rows are the whole
    input (:func:`scanned`).
    """
    if context is None and LOSSES[config.loss].scans:
        context = scanned(lambda partial, state: [partial(tokens, advantages, 0, state)], config)
    blocks = tokens.row_blocks(block_tokens)
    with np.errstate(over="ignore", invalid="ignore"):  # a row's sum beyond float64 is inf or NaN: refused below
        parts = [
            block_terms(tokens.rows_slice(a, b), None if advantages is None else advantages[a:b], config, context, first_row + a) for a, b in blocks
        ]
    terms = joined(parts)
    check_row_sums(terms)
    if config.empty_rows == "refuse" and advantages is not None and not LOSSES[config.loss].critic:
        check_no_empty_rows(terms["n_tokens"])
    return terms


def check_no_empty_rows(n_tokens: np.ndarray) -> None:
    """``empty_rows`` 'refuse' with per-row advantages: the first row without counted tokens is
    refused, as twinkle-kit 0.1 raises there (loss/grpo.py:146-149, ``repeat_interleave`` of B
    advantages over the token counts of the rows that have tokens: a RuntimeError)."""
    empty = np.flatnonzero(n_tokens == 0)
    if empty.size:
        raise RowError(
            int(empty[0]),
            "it has no counted tokens and a per-row advantage, where Twinkle 0.1 raises (`empty_rows` 'refuse'); "
            "pass per-token advantages, or `empty_rows` 'count'",
        )


def scanned(scan_rows: Callable[[Callable, object], list], config) -> object:
    """The context of ``config.loss``: its scans run in turn over the whole input.
    ``scan_rows(partial, state)`` gives, in row order, ``partial(tokens, advantages,
    first_row, state)`` of every batch of rows (``partial``: a :class:`ScanPartial`)."""
    state = None
    for k, scan in enumerate(LOSSES[config.loss].scans):
        state = scan.finish(scan_rows(ScanPartial(config, k), state), state, config)
    return state


@dataclass(frozen=True)
class ScanPartial:
    """Scan ``k`` of ``config.loss`` on a batch of rows: ``(tokens, advantages, first_row,
    state) -> partial`` (a class, so that it pickles to the engine's workers)."""

    config: Any
    k: int

    def __call__(self, tokens: Tokens, advantages: np.ndarray | None, first_row: int, state: object) -> object:
        scan = LOSSES[self.config.loss].scans[self.k]
        with np.errstate(over="ignore", invalid="ignore"):
            return scan.partial(block(tokens, advantages, self.config, first_row, state, figures=False).inputs, state, self.config)


ROW_SUMS = {
    "objective_sum": "objective sum",
    "surrogate_sum": "surrogate sum",
    "kl_ref_sum": "KL sum against the reference",
    "kl_old_sum": "KL sum against the old policy",
    "ratio_sum": "ratio sum",
    "is_weight_sum": "importance weight sum",
}


def check_row_sums(terms: dict[str, np.ndarray]) -> None:
    """Each row's sums must be float64 numbers (an advantage near 1.8e308 times a ratio, or many
    ratios near e^709, are not): the first row with one that is not is refused."""
    found = [
        (int(np.flatnonzero(~finite)[0]), k, label)
        for k, (key, label) in enumerate(ROW_SUMS.items())
        if key in terms and not (finite := np.isfinite(terms[key])).all()
    ]
    if found:
        row, _, label = min(found)
        raise RowError(row, f"its {label} is beyond float64; rescale the advantages, or lower `logratio_clamp`")


@dataclass
class Block:
    """What every term of a block of rows is computed from: the loss's ``inputs`` (after the
    rollout correction's rejection), the importance ``weights`` (``None``: none), the
    ``mismatch`` figures, where the ratio's clamp bit, and each row's sum of k3 against the
    old policy (``None`` without figures)."""

    inputs: LossInputs
    weights: np.ndarray | None
    mismatch: dict[str, np.ndarray]
    clamped: np.ndarray | None
    kl_old_sum: np.ndarray | None


def block(tokens: Tokens, advantages: np.ndarray | None, config, first_row: int = 0, context: object = None, figures: bool = True) -> Block:
    """The :class:`Block` of a few rows. With the rollout sampler's log-probs: their
    mismatch figures (on the mask as given; with ``figures``), then the rollout correction
    (importance weights ``w``, rejected tokens out of the mask). k3 against the old policy
    (http://joschu.net/blog/kl-approx.html) is summed here (with ``figures``), so that
    ``new - old`` and ``rho - 1`` are freed before the loss's arrays are made."""
    mismatch: dict[str, np.ndarray] = {}
    weights = None
    if tokens.rollout is not None:
        d, lr = log_ratios(tokens, config.logratio_clamp)
        if figures:
            mismatch = mismatch_terms(tokens, d, lr)
        tokens, weights, correction = corrected(tokens, lr, config)
        mismatch.update(correction)
    new_minus_old = np.subtract(tokens.new, tokens.old, dtype=np.float64)
    logratio, clamped = RATIO_LEVELS[config.ratio_level](new_minus_old, tokens, config.logratio_clamp)
    ratio_minus_one = np.expm1(logratio)
    ratio = ratio_minus_one + 1.0
    kl_old_sum = None
    if figures:
        if config.ratio_level == "token":
            kl_old_sum = row_sum(k3_with_ratio(logratio, ratio_minus_one, ratio), tokens)
        else:
            kl_old_sum = row_sum(k3(np.clip(new_minus_old, -config.logratio_clamp, config.logratio_clamp)), tokens)
    return Block(LossInputs(ratio, logratio, tokens, advantages, first_row, context), weights, mismatch, clamped, kl_old_sum)


def block_terms(tokens: Tokens, advantages: np.ndarray | None, config, context: object = None, first_row: int = 0) -> dict[str, np.ndarray]:
    """Per-row sums and extremes of every token quantity of a few rows (see :func:`block`).

    The per-token objective is ``w_it L_it - beta * KL_it`` (``L_it`` times TRL's
    off-policy sequence mask and its high-entropy token mask, if given); ``objective_sum`` is its row
    sum. One ``expm1`` gives both the ratio and, at token level, k3 against the old policy.
    Every KL estimator takes its log-ratio clamped to ``[-c, c]`` (``config.logratio_clamp``)
    as the ratio does, so a token's KL is a float64 number however far the policies are.
    The penalty's KL is clamped to ``[-kl_clamp, kl_clamp]`` if given (verl's low_var_kl:
    10), and times the ratio with ``kl_weight`` ratio (TRL's ``use_bias_correction_kl``):
    ``penalty_sum`` is its row sum, aggregated on its own with ``kl_agg``.
    """
    out, tokens, ratio = policy_terms(tokens, advantages, config, context, first_row)
    if tokens.ref is not None:  # after the policy's token arrays are freed: a thread holds one set or the other
        out.update(reference_terms(tokens, ratio, out["surrogate_sum"], config))
    for extreme in ("ratio_max", "ratio_min"):
        out[extreme][out["n_tokens"] == 0] = np.nan
    if AGGREGATIONS[config.agg].padded:
        out.update(padding_terms(tokens, advantages, config))
    return out


def policy_terms(
    tokens: Tokens, advantages: np.ndarray | None, config, context: object = None, first_row: int = 0
) -> tuple[dict[str, np.ndarray], Tokens, np.ndarray]:
    """:func:`block_terms` but the KL against the reference: the per-row terms, the rows after
    the rollout correction's rejection, and the ratio."""
    b = block(tokens, advantages, config, first_row, context)
    tokens, ratio = b.inputs.tokens, b.inputs.ratio
    loss = LOSSES[config.loss]
    f = loss.factors(b.inputs, config)
    if config.empty_rows != "count":
        f = replace(f, empty=None)  # rows without tokens are left out of the mean
    if config.off_policy_mask is not None:
        f = f.weighted(off_policy_kept(tokens, b.inputs.advantage, config.off_policy_mask))
    if config.top_entropy_quantile < 1:
        f = f.weighted(entropy_kept(tokens, config.entropy_threshold))
    if b.weights is not None:
        f = f.weighted(b.weights)
    out = surrogate(loss, f, advantages, tokens)
    out.update(b.mismatch)
    out.update(
        n_tokens=tokens.n_counted,
        ratio_sum=row_sum(ratio, tokens),
        ratio_max=row_reduce(tokens.counted(ratio, -np.inf), tokens, np.maximum, np.nan),
        ratio_min=row_reduce(tokens.counted(ratio, np.inf), tokens, np.minimum, np.nan),
        kl_old_sum=present(b.kl_old_sum, "the block's figures"),
        clamped=np.zeros(tokens.rows, dtype=np.int64) if b.clamped is None else row_count(b.clamped, tokens),
        objective_sum=out["surrogate_sum"],
    )
    return out, tokens, ratio


def reference_terms(tokens: Tokens, ratio: np.ndarray, surrogate_sum: np.ndarray, config) -> dict[str, np.ndarray]:
    """The KL against the reference of each row (see :func:`block_terms`): ``kl_ref_sum``,
    ``penalty_sum``, and the ``objective_sum`` the penalty lowers."""
    new_minus_ref = np.subtract(tokens.new, present(tokens.ref, "the reference's log-probs"), dtype=np.float64)
    kl = KL_ESTIMATORS[config.kl](np.clip(new_minus_ref, -config.logratio_clamp, config.logratio_clamp))
    if config.kl_clamp is not None:
        kl = np.clip(kl, -config.kl_clamp, config.kl_clamp)
    kl_ref_sum = row_sum(kl, tokens)
    penalty_sum = kl_ref_sum if config.kl_weight == "none" else row_sum(kl * ratio, tokens)
    return {"kl_ref_sum": kl_ref_sum, "penalty_sum": penalty_sum, "objective_sum": surrogate_sum - config.beta * penalty_sum}


def padding_terms(tokens: Tokens, advantages: np.ndarray | None, config) -> dict[str, np.ndarray]:
    """What ``luspo-padded`` needs of each row (:mod:`~grpo_cli.objective.aggregation`): its
    length, and ``n_i A_i`` and ``n_i^2 A_i``, from which its positions without a counted
    token (each ``A_i`` at ratio 1; 0 under the high-entropy mask) are summed once ``T`` is known."""
    a = present(advantages, "one advantage per row") * float(config.top_entropy_quantile == 1)
    n = tokens.n_counted.astype(np.float64)
    return {"row_length": tokens.lengths.astype(np.int64), "padding_n_a": n * a, "padding_n2_a": n * n * a}


def surrogate(loss: Loss, f: SignedFactors, advantages: np.ndarray | None, tokens: Tokens) -> dict[str, np.ndarray]:
    """Row sums of the loss's terms ``L_t = A_t f_t + extra_t`` (``surrogate_sum``), the count of each
    declared flag on tokens whose advantage has the flag's sign (``flag_<name>``), which
    rows have no nonzero advantage (``zero_advantage``) and, for a loss whose row without
    tokens has a mean term (``f.empty``), that term (``empty_row_mean``, 0 on other rows).

    One advantage per row factors out: ``sum_t L_it = A_i sum_t f_it``, so only the two
    factor sums are needed; per-token advantages (``tokens.advantage``) multiply each token.
    """
    if advantages is None:
        a = present(tokens.advantage, "the per-token advantages")
        positive, negative = a > 0, a < 0
        surrogate_sum = row_sum(np.where(positive, a * f.positive, np.where(negative, a * f.negative, 0.0)), tokens)
        zero_advantage = row_count(positive | negative, tokens) == 0

        def count(flag: np.ndarray, on: np.ndarray) -> np.ndarray:
            return row_count(flag & on, tokens)
    else:
        positive, negative = advantages > 0, advantages < 0
        factor_sum = np.where(positive, row_sum(f.positive, tokens), row_sum(f.negative, tokens))
        surrogate_sum = np.where(positive | negative, advantages * factor_sum, 0.0)
        zero_advantage = advantages == 0

        def count(flag: np.ndarray, on: np.ndarray) -> np.ndarray:
            return np.where(on, row_count(flag, tokens), 0)

    if f.extra is not None:
        surrogate_sum = surrogate_sum + row_sum(f.extra, tokens)
    out = {"surrogate_sum": surrogate_sum, "zero_advantage": zero_advantage}
    if f.empty is not None and advantages is not None:  # a row without tokens has no token's advantage
        out["empty_row_mean"] = np.where(tokens.n_counted == 0, f.empty * advantages, 0.0)
    for flag in loss.flags:
        set_on = f.flags[flag.name]
        on = positive if flag.sign > 0 else negative if flag.sign < 0 else positive | negative
        out[f"flag_{flag.name}"] = np.zeros(tokens.rows, dtype=np.int64) if set_on is None else count(set_on, on)
    return out
