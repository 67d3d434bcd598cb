"""The summary of `grpo objective`: partial summaries of consecutive rows' terms that merge
exactly (see :mod:`grpo_cli.summaries`), and the figures, the objective aggregated as the
config says.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..summaries import BlockSums, finite_or_null
from . import AGGREGATIONS, LOSSES, Totals, aggregate
from .micro import MicroSums, combine

SUMMED_TERMS = ("objective_sum", "surrogate_sum", "kl_ref_sum", "penalty_sum")
EMPTY_TERMS = ("objective_sum", "surrogate_sum")  # where a loss's term for a row without tokens goes
TOKEN_SUMS = ("kl_old_sum", "ratio_sum", "abs_diff_sum", "k1_sum", "k3_sum", "is_weight_sum")  # token totals, when present
COUNTED = ("clamped", "mismatch_tokens", "rejected_tokens", "is_masked", "is_truncated")


def _padded_sums(terms: dict[str, np.ndarray], summed: list[str]) -> dict[str, np.ndarray]:
    """``n_i S_i`` of each summed term and the padding's terms, with ``luspo-padded`` (none without)."""
    if "row_length" not in terms:
        return {}
    return {
        **{f"{key}*n": terms[key] * terms["n_tokens"] for key in summed},
        "padding_n_a": terms["padding_n_a"],
        "padding_n2_a": terms["padding_n2_a"],
    }


@dataclass
class ObjectiveSummary:
    """The figures of `grpo objective`, from the per-row terms of
    :func:`grpo_cli.objective.row_terms` of consecutive rows.

    Token shares (clip fractions, ratio mean) are over counted (unmasked) tokens. A figure
    whose total over the rows is beyond float64 (each row's is a number) is null.
    """

    sums: BlockSums = field(default_factory=BlockSums)
    counts: Counter = field(default_factory=Counter)
    ratio_min: float = np.inf
    ratio_max: float = -np.inf
    has_kl_ref: bool = False
    abs_diff_max: float | None = None  # None: no rollout log-probs
    micro: MicroSums | None = None  # None: the input is one micro-batch
    width: int = 0  # the longest row, with luspo-padded's terms (0: without)

    @classmethod
    def of(cls, terms: dict[str, np.ndarray], start: int = 0, micro_batch_size: int | None = None) -> "ObjectiveSummary":
        """The partial summary of rows ``start, start + 1, ...`` with these terms; with
        ``micro_batch_size``, each micro-batch's totals too (its padded width from the
        rows' ``length``, masked tokens included, if the terms have it)."""
        n = terms["n_tokens"]
        counted = n > 0
        safe_n = np.where(counted, n, 1)
        summed = [key for key in SUMMED_TERMS if key in terms]
        empty = terms.get("empty_row_mean", 0.0)
        # S_i / n_i for seq-mean-token-mean (0 for rows without counted tokens, or the loss's term for them: TRL's GMPO)
        per_token = {f"{key}/n": np.where(counted, terms[key] / safe_n, empty if key in EMPTY_TERMS else 0.0) for key in summed}
        sums = BlockSums.of(
            {**{key: terms[key] for key in (*summed, *TOKEN_SUMS) if key in terms}, **per_token, **_padded_sums(terms, summed)}, start
        )
        micro = None
        if micro_batch_size is not None:
            rows = {
                "rows": np.ones(len(n)),
                "counted_rows": counted.astype(np.float64),
                "tokens": n.astype(np.float64),
                "longest": terms.get("length", n),
            }
            micro = MicroSums.of({**{key: terms[key] for key in summed}, **per_token, **rows}, micro_batch_size, start)
        counts = Counter({key: int(terms[key].sum()) for key in terms if key.startswith("flag_") or key in COUNTED})
        counts.update(rows=len(n), counted_rows=int(counted.sum()), tokens=int(n.sum()), zero_advantage_rows=int(terms["zero_advantage"].sum()))
        if "rejected_tokens" in terms:
            counts.update(rejected_rows=int((terms["rejected_tokens"] > 0).sum()))
        extremes = (float(terms["ratio_min"][counted].min()), float(terms["ratio_max"][counted].max())) if counted.any() else (np.inf, -np.inf)
        abs_diff_max = None
        if "abs_diff_max" in terms:
            found = terms["abs_diff_max"][terms["mismatch_tokens"] > 0]
            abs_diff_max = float(found.max()) if len(found) else -np.inf
        width = int(terms["row_length"].max(initial=0)) if "row_length" in terms else 0
        return cls(sums, counts, *extremes, "kl_ref_sum" in terms, abs_diff_max, micro, width)

    def merge(self, later: "ObjectiveSummary") -> "ObjectiveSummary":
        """These rows and ``later``'s, which follow them."""
        maxima = [m for m in (self.abs_diff_max, later.abs_diff_max) if m is not None]
        return ObjectiveSummary(
            self.sums.merge(later.sums),
            self.counts + later.counts,
            min(self.ratio_min, later.ratio_min),
            max(self.ratio_max, later.ratio_max),
            self.has_kl_ref or later.has_kl_ref,
            max(maxima) if maxima else None,
            later.micro if self.micro is None else self.micro if later.micro is None else self.micro.merge(later.micro),
            max(self.width, later.width),
        )

    def figures(self, config) -> dict:
        """The figures, the objective aggregated as ``config.agg`` and ``config.empty_rows``
        say (the KL penalty as ``config.kl_agg``, if given) (``config``: the :class:`~grpo_cli.objective.config.ObjectiveConfig`);
        ``empty_rows``: how many rows have no counted tokens."""
        c = self.counts
        tokens = c["tokens"]

        def share(total: float) -> float | None:
            return finite_or_null(float(total / tokens)) if tokens else 0.0

        def agg(key: str, how: str = config.agg) -> float | None:
            totals = Totals(
                self.sums.total(key), self.sums.total(f"{key}/n"), c["rows"], c["counted_rows"], tokens, config.max_length, *self._padded(key, how)
            )
            with np.errstate(invalid="ignore"):
                if self.micro is not None:  # the micro-batches' values, combined as the rule says
                    return finite_or_null(float(combine(config.micro_batch_rule, how, self.micro, key, totals, config.empty_rows)))
                return finite_or_null(float(aggregate(how, totals, config.empty_rows)))

        objective = agg("objective_sum")
        if self.has_kl_ref and config.kl_agg is not None:  # agg(L) - beta * kl_agg(KL)
            surrogate, penalty = agg("surrogate_sum"), agg("penalty_sum", config.kl_agg)
            objective = None if surrogate is None or penalty is None else finite_or_null(surrogate - config.beta * penalty)
        return {
            "objective": objective,
            "loss": None if objective is None else -objective,
            "surrogate": agg("surrogate_sum"),
            "kl_ref": agg("kl_ref_sum", config.kl_agg or config.agg) if self.has_kl_ref else None,
            "kl_old": share(self.sums.total("kl_old_sum")),
            "clip_frac": {flag.name: share(c[f"flag_{flag.name}"]) for flag in LOSSES[config.loss].flags},
            "ratio": {
                "mean": share(self.sums.total("ratio_sum")),
                "min": self.ratio_min if tokens else None,
                "max": self.ratio_max if tokens else None,
            },
            "tokens": tokens,
            "rows": c["rows"],
            "empty_rows": c["rows"] - c["counted_rows"],
            "zero_advantage_rows": c["zero_advantage_rows"],
            "clamped_tokens": c["clamped"],
            "rollout": self._rollout_figures(config, share),
            **({"micro_batches": self.micro.count} if self.micro is not None else {}),
            "config": config.figures,
        }

    def _padded(self, key: str, how: str) -> tuple[float, int]:
        """``luspo-padded``'s totals of ``key`` (``sum_padded``, ``width``; the positions
        without a counted token add their ``A_i`` to the loss's terms alone)."""
        if not AGGREGATIONS[how].padded:
            return 0.0, 0
        padding = self.width * self.sums.total("padding_n_a") - self.sums.total("padding_n2_a") if key in EMPTY_TERMS else 0.0
        return self.sums.total(f"{key}*n") + padding, self.width

    def _rollout_figures(self, config, share) -> dict | None:
        """Train/rollout mismatch over the counted tokens as given (``None``: no rollout
        log-probs), and what the correction did."""
        if self.abs_diff_max is None:
            return None
        c = self.counts
        n = c["mismatch_tokens"]

        def mean(key: str) -> float | None:
            return finite_or_null(self.sums.total(key) / n) if n else None

        figures: dict[str, Any] = {
            "tokens": n,
            "abs_diff_mean": mean("abs_diff_sum"),
            "abs_diff_max": self.abs_diff_max if n else None,
            "kl_k1": mean("k1_sum"),
            "kl_k3": mean("k3_sum"),
            "is": None,
            "rejected": None,
        }
        if config.is_level is not None:
            figures["is"] = {
                "weight_mean": share(self.sums.total("is_weight_sum")),
                "masked_tokens": c["is_masked"],
                "truncated_tokens": c["is_truncated"],
            }
        if config.reject is not None or config.reject_veto is not None:
            figures["rejected"] = {"tokens": c["rejected_tokens"], "rows": c["rejected_rows"], "token_share": c["rejected_tokens"] / n if n else 0.0}
        return figures
