"""TRL's high-entropy token mask (``top_entropy_quantile``; trainer/grpo_trainer.py
``get_high_entropy_mask``, TRL 1.16.0:1380-1417 applied at :3143-3144, the same in 1.9.0:1396-1433
applied at :3114-3115). The entropies are the policy's being trained (TRL computes them with
the new log-probs), read from the entropy column.

With ``rho = top_entropy_quantile < 1`` the threshold ``tau`` is the ``1 - rho`` quantile,
linear (torch.quantile's default), of the entropies of every counted token of the input (TRL:
of the micro-batch gathered across processes, the input here): with the ``N`` values sorted,
``x_(0) <= ... <= x_(N-1)`` and ``p = (1 - rho)(N - 1)``,

.. math:: \\tau = x_{(\\lfloor p \\rfloor)} + (p - \\lfloor p \\rfloor)(x_{(\\lceil p \\rceil)} - x_{(\\lfloor p \\rfloor)})

A counted token keeps its loss term where ``H_it >= tau`` and weighs 0 elsewhere, still
counted in every denominator; the KL penalty is not masked (TRL: the per-token loss times the
mask, then times the importance weight, then ``+ beta * KL``).

The quantile is exact and its memory bounded: passes before the objective's read the entropy
and mask columns and select the two order statistics by radix (:mod:`grpo_cli.selection`: two
passes on most inputs, at most five), equal to ``np.quantile``'s. TRL casts the entropies to
float32 first: a token within float32 rounding of ``tau`` may be kept on one side and not the other.
"""

from __future__ import annotations

import numpy as np

from ..errors import present
from ..selection import Scan, part, quantile
from ..tokens import Tokens


def counted_entropies(tokens: Tokens) -> np.ndarray:
    """The entropies of the counted tokens of a batch of rows, float64."""
    entropy = present(tokens.entropy, "the token entropies").astype(np.float64, copy=False)
    return entropy if tokens.mask is None else entropy[tokens.mask]


def entropy_threshold(scan: Scan, rho: float) -> float:
    """``tau``, the ``1 - rho`` quantile of the counted entropies that ``scan`` reads
    (:mod:`grpo_cli.selection`); ``inf`` without counted tokens (TRL keeps no token then).

    >>> entropy_threshold(scanned([np.array([0.5, 0.1]), np.array([0.9, 0.3])]), 0.5)  # p = 1.5: (0.3 + 0.5) / 2
    0.4
    """
    tau = quantile(scan, 1.0 - rho)
    return np.inf if tau is None else tau


def scanned(parts: list[np.ndarray]) -> Scan:
    """The scan of entropies held in memory (``parts``, from :func:`counted_entropies`)."""
    return lambda wanted: ([part(x, d) for d in wanted] for x in parts)


def entropy_kept(tokens: Tokens, tau: float) -> np.ndarray:
    """1.0 on the tokens whose entropy is at least ``tau``, else 0.0 (their weight)."""
    return (present(tokens.entropy, "the token entropies") >= tau).astype(np.float64)
