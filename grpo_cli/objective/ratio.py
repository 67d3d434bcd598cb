"""The importance ratio rho = pi_new / pi_old, as a log-ratio per token, clamped before exp."""

from __future__ import annotations

import numpy as np

from ..tokens import Tokens, row_sum


def token_log_ratio(logratio: np.ndarray, tokens: Tokens, clamp: float) -> tuple[np.ndarray, np.ndarray | None]:
    """token (PPO): log rho_it = new_it - old_it.

    Clamped to [-clamp, clamp]; also returns where the clamp bit (None when it bit nowhere,
    checked with one min and one max)."""
    if logratio.size == 0 or (logratio.min() >= -clamp and logratio.max() <= clamp):
        return logratio, None
    return np.clip(logratio, -clamp, clamp), np.abs(logratio) > clamp


def sequence_log_ratio(logratio: np.ndarray, tokens: Tokens, clamp: float) -> tuple[np.ndarray, np.ndarray]:
    """sequence (GSPO): log rho_it = mean over row i's counted tokens of (new - old).

    The row mean is clamped at ``clamp`` from above only, as verl's GSPO (exp of a very
    negative mean is 0, not an overflow); also returns where the clamp bit."""
    counted = tokens.n_counted
    mean = np.divide(row_sum(logratio, tokens), counted, out=np.zeros(tokens.rows), where=counted > 0)
    return np.repeat(np.minimum(mean, clamp), tokens.lengths), np.repeat(mean > clamp, tokens.lengths)


def sequence_sum_log_ratio(logratio: np.ndarray, tokens: Tokens, clamp: float) -> tuple[np.ndarray, np.ndarray]:
    """sequence-sum (TRL's RLOOTrainer): log rho_it = sum over row i's counted tokens of (new - old).

    The ratio of the row's probabilities, ``exp(log pi(y_i) - log pi_old(y_i))`` (TRL 1.16
    rloo_trainer.py:1822-1824), clamped at ``clamp`` from above as ``sequence``; also
    returns where the clamp bit."""
    total = row_sum(logratio, tokens)
    return np.repeat(np.minimum(total, clamp), tokens.lengths), np.repeat(total > clamp, tokens.lengths)


RATIO_LEVELS = {"token": token_log_ratio, "sequence": sequence_log_ratio, "sequence-sum": sequence_sum_log_ratio}
