"""verl's covariance losses (Cui et al. 2025, "The Entropy Mechanism of RL for Reasoning LMs"):
``kl_cov`` and ``clip_cov`` treat the few tokens of largest covariance between advantage and
log-prob apart.

The covariance of a token, ``cov_t = (A_t - mean A)(log pi_t - mean log pi)``, takes its
means over every counted token. verl computes them, and chooses the tokens, per micro-batch;
here the whole input is one micro-batch, so both are statistics of every row. They come from
scans run before the objective's pass (:class:`~grpo_cli.objective.losses.Scan`): the first
sums per row (joined in row order, then summed once: the same for any batch size or thread
count), the second counts or ranks the tokens; the loss's ``context`` is what they found.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..numerics import LOGRATIO_CLAMP_MAX
from ..tokens import row_count, row_sum
from .losses import Flag, LossInputs, Scan, SignedFactors, loss


@dataclass(frozen=True)
class Means:
    """The counted tokens ``n`` of the whole input and their mean advantage and new log-prob."""

    n: int
    advantage: float
    logp: float


def row_sums(inputs: LossInputs, state: object, config) -> np.ndarray:
    """Per row: counted tokens, sum of A, sum of log pi (three columns)."""
    tokens = inputs.tokens
    return np.column_stack([tokens.n_counted.astype(np.float64), row_sum(inputs.advantage, tokens), row_sum(inputs.logp, tokens)])


def means(eps: float):
    """The first scan: the means over every counted token, ``sum / (n + eps)`` (verl's
    ``masked_mean`` adds 1e-8 in clip_cov; kl_cov's plain mean has none)."""

    def finish(parts: list, state: object, config) -> Means:
        n, sum_a, sum_logp = np.concatenate(parts).sum(axis=0) if parts else np.zeros(3)
        denominator = n + eps if n + eps > 0 else 1.0
        return Means(int(n), float(sum_a / denominator), float(sum_logp / denominator))

    return Scan(row_sums, finish)


def covariance(inputs: LossInputs, m: Means) -> np.ndarray:
    """``cov_t = (A_t - mean A)(log pi_t - mean log pi)`` of every token of the block."""
    return (inputs.advantage - m.advantage) * (inputs.logp - m.logp)


def positions(inputs: LossInputs) -> np.ndarray:
    """Each token's index in its row."""
    tokens = inputs.tokens
    return np.arange(len(tokens.new)) - np.repeat(tokens.starts, tokens.lengths)


def rows_in_block(rows: np.ndarray, inputs: LossInputs) -> slice:
    """The entries of the sorted global ``rows`` that fall in the block's rows."""
    lo, hi = np.searchsorted(rows, [inputs.first_row, inputs.first_row + inputs.tokens.rows])
    return slice(int(lo), int(hi))


def selection_count(ratio: float, n: int) -> int:
    """``max(int(ratio * n), 1)`` tokens, as verl counts them (Python's float product, truncated)."""
    return max(int(ratio * n), 1)


# kl_cov: the tokens of largest covariance pay ppo_kl_coef * |d|


@dataclass(frozen=True)
class Largest:
    """kl_cov's context: the means, and the ``row`` (global) and ``position`` of each chosen
    token, sorted by row then position."""

    means: Means
    row: np.ndarray
    position: np.ndarray


def largest_partial(inputs: LossInputs, m: Means, config) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The block's ``k`` counted tokens of largest covariance (or all, if fewer): their
    covariance, global row and position; ``k`` is the whole input's count."""
    tokens = inputs.tokens
    counted = np.arange(len(tokens.new)) if tokens.mask is None else np.flatnonzero(tokens.mask)
    cov, rows, pos = (
        covariance(inputs, m)[counted],
        np.repeat(np.arange(tokens.rows) + inputs.first_row, tokens.lengths)[counted],
        positions(inputs)[counted],
    )
    return top(cov, rows, pos, selection_count(config.kl_cov_ratio, m.n))


def top(cov: np.ndarray, rows: np.ndarray, pos: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``k`` entries of largest ``cov``; of equal ones, the earliest (row, then position)."""
    order = np.lexsort((pos, rows, -cov))[:k]
    return cov[order], rows[order], pos[order]


def largest_finish(parts: list, m: Means, config) -> Largest:
    """The whole input's top ``max(int(kl_cov_ratio * n), 1)`` of the blocks' tops (none without counted tokens)."""
    cov, rows, pos = (np.concatenate(column) for column in zip(*parts)) if parts else (np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64))
    _, rows, pos = top(cov, rows, pos, selection_count(config.kl_cov_ratio, m.n) if m.n else 0)
    order = np.lexsort((pos, rows))
    return Largest(m, rows[order], pos[order])


@loss(
    "kl_cov",
    params=("kl_cov_ratio", "ppo_kl_coef"),
    flags=(Flag("penalised", 0),),
    scans=(means(0.0), Scan(largest_partial, largest_finish)),
    logratio_clamp=LOGRATIO_CLAMP_MAX,
)
def kl_cov(inputs: LossInputs, config) -> SignedFactors:
    """rho A, minus ppo_kl_coef |log rho| on the tokens of largest covariance (no clip).

    .. math:: L_t = \\rho_t A - [t \\in \\text{top}_k(\\mathrm{cov})] \\, c \\, |\\log \\rho_t|

    verl 0.9.1, trainer/ppo/core_algos.py:1848 (``compute_policy_loss_kl_cov``): the
    ``k = max(int(kl_cov_ratio * n), 1)`` counted tokens of largest covariance (means over
    the n counted tokens) pay the penalty, c = ``ppo_kl_coef`` (0.1 in verl's config); of
    equal covariances the earliest token is taken (verl's ``topk`` leaves the order open).
    rho is not clamped in verl: the loss is defined with ``logratio_clamp`` 709 (none in
    effect) unless one is given. Flag ``penalised``: the chosen tokens.
    Gradient: -A rho grad(log pi) + c sign(log rho) grad(log pi) on the chosen tokens.
    """
    context: Largest = inputs.context
    chosen = np.zeros(len(inputs.ratio), dtype=bool)
    block = rows_in_block(context.row, inputs)
    chosen[inputs.tokens.starts[context.row[block] - inputs.first_row] + context.position[block]] = True
    extra = np.where(chosen, -config.ppo_kl_coef * np.abs(inputs.log_ratio), 0.0)
    return SignedFactors(inputs.ratio, inputs.ratio, flags={"penalised": chosen}, extra=extra)


# clip_cov: a random draw of the unclipped tokens whose covariance is in (lb, ub) get no term


@dataclass(frozen=True)
class Drawn:
    """clip_cov's context: the means, and the ``row`` (global) and ``rank`` (among the row's
    candidates) of each drawn token, sorted by row then rank."""

    means: Means
    row: np.ndarray
    rank: np.ndarray


def binds(inputs: LossInputs, config) -> np.ndarray:
    """Where PPO's clip binds (verl's ``clip_by_origin``): rho > 1 + eps_high where A > 0,
    rho < 1 - eps_low where A < 0."""
    ratio, a = inputs.ratio, inputs.advantage
    return ((a > 0) & (ratio > 1.0 + config.epsilon_high)) | ((a < 0) & (ratio < 1.0 - config.epsilon_low))


def candidates(inputs: LossInputs, m: Means, config) -> np.ndarray:
    """The counted tokens whose clip does not bind and ``clip_cov_lb < cov < clip_cov_ub``."""
    cov = covariance(inputs, m)
    return inputs.tokens.counted(~binds(inputs, config) & (cov > config.clip_cov_lb) & (cov < config.clip_cov_ub), False)


def candidate_counts(inputs: LossInputs, m: Means, config) -> np.ndarray:
    """The second scan: candidates per row."""
    return row_count(candidates(inputs, m, config), inputs.tokens)


def draw(candidates: int, count: int, seed: int) -> np.ndarray:
    """``min(count, candidates)`` of ``candidates`` ordinals, drawn without replacement by
    numpy's PCG64 from ``seed``, sorted. verl draws with ``torch.randperm`` on torch's global
    generator, per micro-batch: the same distribution, not the same draw."""
    return np.sort(np.random.default_rng(seed).choice(candidates, size=min(count, candidates), replace=False))


def drawn_finish(parts: list, m: Means, config) -> Drawn:
    """``max(int(clip_cov_ratio * n), 1)`` candidates of the whole input drawn (:func:`draw`),
    as (row, rank among the row's candidates)."""
    counts = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    ordinal = draw(int(counts.sum()), selection_count(config.clip_cov_ratio, m.n), config.seed)
    ends = np.cumsum(counts)
    row = np.searchsorted(ends, ordinal, side="right")
    return Drawn(m, row, ordinal - (ends - counts)[row])


@loss(
    "clip_cov",
    params=("epsilon", "epsilon_low", "epsilon_high", "clip_cov_ratio", "clip_cov_lb", "clip_cov_ub", "seed"),
    flags=(Flag("low", -1), Flag("high", +1), Flag("drawn", 0)),
    scans=(means(1e-8), Scan(candidate_counts, drawn_finish)),
    logratio_clamp=LOGRATIO_CLAMP_MAX,
)
def clip_cov(inputs: LossInputs, config) -> SignedFactors:
    """PPO's clip (no dual clip); a random draw of unclipped tokens of covariance in (lb, ub) get 0.

    .. math:: L_t = [t \\notin S] \\min(\\rho_t A, \\mathrm{clip}(\\rho_t, 1 - \\epsilon_{low}, 1 + \\epsilon_{high}) A)

    verl 0.9.1, trainer/ppo/core_algos.py:1743 (``compute_policy_loss_clip_cov``): the
    candidates are the counted tokens whose clip does not bind and whose covariance (means
    ``sum / (n + 1e-8)`` over the n counted tokens) is in ``(clip_cov_lb, clip_cov_ub)``;
    S is ``max(int(clip_cov_ratio * n), 1)`` of them drawn at random with ``seed``
    (:func:`draw`: not torch's generator, so not verl's draw). A drawn token's term is 0 and
    it stays counted. rho is not clamped in verl: the loss is defined with
    ``logratio_clamp`` 709 (none in effect) unless one is given. Flags: ``low`` / ``high``
    as PPO's, ``drawn``: the tokens of S.
    Gradient: PPO's, 0 on the drawn tokens.
    """
    context: Drawn = inputs.context
    tokens = inputs.tokens
    is_candidate = candidates(inputs, context.means, config)
    where = np.flatnonzero(is_candidate)
    before = np.concatenate([[0], np.cumsum(row_count(is_candidate, tokens))])  # candidates before each row of the block
    block = rows_in_block(context.row, inputs)
    kept = np.ones(len(inputs.ratio))
    kept[where[before[context.row[block] - inputs.first_row] + context.rank[block]]] = 0.0
    ratio = inputs.ratio
    high, low = 1.0 + config.epsilon_high, 1.0 - config.epsilon_low
    return SignedFactors(
        np.minimum(ratio, high) * kept,
        np.maximum(ratio, low) * kept,
        flags={"low": ratio < low, "high": ratio > high, "drawn": kept == 0.0},
    )
