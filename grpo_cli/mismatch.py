"""`grpo mismatch`: how far the rollout sampler's log-probs are from the trainer's old ones.

Per token, with ``lr = old - rollout`` (clamped to ``[-c, c]`` where it is exponentiated):
``|old - rollout|``, KL(rollout || old) as ``k1 = rollout - old`` and ``k3 = exp(lr) - lr - 1``,
the importance weight ``w = exp(lr)``; per row, the sequence weight ``w_i = exp(sum_t lr)``
and the perplexities ``exp(-mean_t log p)`` of both policies (verl's ``rollout_corr/``
metrics). Figures merge exactly: totals over rows in fixed blocks (:class:`BlockSums`),
counts, and fixed-edge histograms.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from .config import OUTPUT, ROLLOUT, Options, check_range, option, value_range, weight_bounds
from .errors import UsageError
from .numerics import LOGRATIO_CLAMP_MAX
from .objective.rollout import log_ratios, mismatch_terms
from .tokens import Tokens, joined, row_count, row_sum
from .summaries import BlockSums, finite_or_null

BUCKETS = 24  # powers of two: positions and lengths 1, 2-3, 4-7, ..., the last open-ended
STATS = ("rows", "tokens", "abs_diff", "k1", "k3")  # per bucket: rows in it, its tokens, three sums
ABS_DIFF_EDGES = (0.0, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0, np.inf)
LOG_WEIGHT_EDGES = (-np.inf, -5.0, -2.0, -1.0, -0.5, -0.1, -0.01, 0.01, 0.1, 0.5, 1.0, 2.0, 5.0, np.inf)
ROW_SUMS = ("abs_diff_sum", "k1_sum", "k3_sum", "w_sum", "w2_sum", "seq_w", "seq_w2", "train_ppl", "rollout_ppl", "ppl_ratio")


@dataclass(frozen=True, kw_only=True)
class MismatchConfig(Options):
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

    PANEL: ClassVar[str] = ROLLOUT

    is_cap: float = option(
        2.0, "Report the tokens and rows whose weight pi_old / pi_rollout a cap C would truncate (verl's default threshold).", metavar="C"
    )
    is_mask: tuple = option(None, "Report the tokens and rows whose weight a mask [LO, HI] would zero.", parse=value_range, metavar="LO,HI")
    logratio_clamp: float = option(20.0, "Clamp old - rollout to [-c, c] before exp.")
    worst: int = option(10, "List this many rows, by their mean k3 of KL(rollout || old).", panel=OUTPUT, metavar="N")

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
        return {
            "is_cap": self.is_cap,
            "is_mask": None if self.is_mask is None else list(self.is_mask),
            "logratio_clamp": self.logratio_clamp,
            "worst": self.worst,
        }


def bucket(x: np.ndarray) -> np.ndarray:
    """The power-of-two bucket of each ``x >= 1``: 0 for 1, 1 for 2-3, 2 for 4-7, ... (the last
    is open-ended).

    >>> bucket(np.array([1, 2, 3, 4, 7, 8])).tolist()
    [0, 1, 1, 2, 2, 3]
    """
    return np.minimum(np.frexp(x.astype(np.float64))[1] - 1, BUCKETS - 1)


def _per_bucket(key: np.ndarray, rows: int, columns: dict[str, np.ndarray]) -> np.ndarray:
    """Rows x (:data:`STATS` x buckets): whether each row has tokens in each bucket, and its
    sums of ``columns`` (``tokens`` first) over the entries in it (``key = row * BUCKETS +
    bucket``), in the entries' order."""
    sums = [np.bincount(key, weights=values, minlength=rows * BUCKETS).reshape(rows, BUCKETS) for values in columns.values()]
    return np.hstack([(sums[0] > 0).astype(np.float64), *sums])


def batch_terms(tokens: Tokens, config) -> dict[str, np.ndarray]:
    """Per row of a batch: the mismatch terms of :func:`~grpo_cli.objective.rollout.mismatch_terms`,
    weight sums, perplexities, and the counts a cap or mask would touch; ``by_position`` and
    ``by_length`` (rows x (stats x buckets)); ``abs_diff_counts`` (histogram counts). Computed
    on blocks of whole rows (:meth:`Tokens.row_blocks`), so each pass stays in cache; a row's
    numbers do not depend on the blocking."""
    parts = [block_terms(tokens.rows_slice(a, b), config) for a, b in tokens.row_blocks()]
    counts = np.sum([part.pop("abs_diff_counts") for part in parts], axis=0)  # a histogram of the batch, not per row
    return {**joined(parts), "abs_diff_counts": counts}


def block_terms(tokens: Tokens, config) -> dict[str, np.ndarray]:
    """:func:`batch_terms` of a few rows."""
    d, lr = log_ratios(tokens, config.logratio_clamp)
    terms = mismatch_terms(tokens, d, lr)
    n = terms["mismatch_tokens"]
    has = n > 0
    safe_n = np.where(has, n, 1)
    w = np.exp(lr)
    seq_log_w = np.clip(-terms["k1_sum"], -config.logratio_clamp, config.logratio_clamp)
    seq_w = np.where(has, np.exp(seq_log_w), 0.0)
    with np.errstate(over="ignore"):  # inf perplexities are reported as null
        train_ppl, rollout_ppl = (np.where(has, np.exp(-terms[k] / safe_n), 0.0) for k in ("old_sum", "rollout_sum"))
        ppl_ratio = np.where(has, np.exp((terms["rollout_sum"] - terms["old_sum"]) / safe_n), 0.0)
    with np.errstate(over="ignore"):  # squares of weights near e^709 are inf: their figures are null
        terms.update(
            w_sum=row_sum(w, tokens),
            w2_sum=row_sum(w * w, tokens),
            seq_w=seq_w,
            seq_w2=seq_w * seq_w,
            train_ppl=train_ppl,
            rollout_ppl=rollout_ppl,
            ppl_ratio=ppl_ratio,
            seq_log_weight=seq_log_w,
        )
    for name, bounds in (("cap", (0.0, config.is_cap)), ("mask", config.is_mask)):
        if bounds is not None:
            lo, hi = bounds
            outside = (w < lo) | (w > hi)
            terms[f"{name}_tokens"] = row_count(outside, tokens)
            terms[f"{name}_seq"] = has & ((seq_w < lo) | (seq_w > hi))
    counted = tokens.counted(np.ones(len(w), dtype=bool), False)
    row = np.repeat(np.arange(tokens.rows), tokens.lengths)
    position = np.arange(len(w)) - np.repeat(tokens.starts, tokens.lengths)
    values = {
        "tokens": counted.astype(np.float64),
        "abs_diff": np.where(counted, np.abs(d), 0.0),
        "k1": np.where(counted, -d, 0.0),
        "k3": np.where(counted, np.expm1(lr) - lr, 0.0),
    }
    terms["by_position"] = _per_bucket(row * BUCKETS + bucket(position + 1), tokens.rows, values)
    row_values = {"tokens": n.astype(np.float64), "abs_diff": terms["abs_diff_sum"], "k1": terms["k1_sum"], "k3": terms["k3_sum"]}
    terms["by_length"] = _per_bucket(np.arange(tokens.rows) * BUCKETS + bucket(np.maximum(n, 1)), tokens.rows, row_values)
    diff = np.abs(d[counted])
    terms["abs_diff_counts"] = np.bincount(np.searchsorted(ABS_DIFF_EDGES, diff, side="right") - 1, minlength=len(ABS_DIFF_EDGES) - 1)
    return terms


@dataclass
class MismatchSummary:
    """The figures of `grpo mismatch` of consecutive rows (see the module docstring)."""

    sums: BlockSums = field(default_factory=BlockSums)
    counts: Counter = field(default_factory=Counter)
    abs_diff_max: float = -np.inf
    abs_diff_counts: np.ndarray = field(default_factory=lambda: np.zeros(len(ABS_DIFF_EDGES) - 1, dtype=np.int64))
    log_weight_counts: np.ndarray = field(default_factory=lambda: np.zeros(len(LOG_WEIGHT_EDGES) - 1, dtype=np.int64))
    worst: list[tuple[float, int, dict]] = field(default_factory=list)  # (-k3 mean, row, figures), best first

    @classmethod
    def of(cls, terms: dict[str, np.ndarray], start: int, worst: int) -> "MismatchSummary":
        """The partial summary of rows ``start, start + 1, ...`` with these terms; ``worst``
        rows by mean k3 kept."""
        n = terms["mismatch_tokens"]
        has = n > 0
        sums = BlockSums.of({**{k: terms[k] for k in ROW_SUMS}, "by_position": terms["by_position"], "by_length": terms["by_length"]}, start)
        counts = Counter(rows=len(n), tokens=int(n.sum()), scored_rows=int(has.sum()))
        for name in ("cap", "mask"):
            if f"{name}_tokens" in terms:
                counts.update(
                    {
                        f"{name}_tokens": int(terms[f"{name}_tokens"].sum()),
                        f"{name}_rows": int((terms[f"{name}_tokens"] > 0).sum()),
                        f"{name}_seq_rows": int(terms[f"{name}_seq"].sum()),
                    }
                )
        log_w = terms["seq_log_weight"][has]
        log_weight_counts = np.bincount(np.searchsorted(LOG_WEIGHT_EDGES, log_w, side="right") - 1, minlength=len(LOG_WEIGHT_EDGES) - 1)
        k3_mean = np.where(has, terms["k3_sum"] / np.where(has, n, 1), -np.inf)
        top = np.argsort(-k3_mean, kind="stable")[:worst]
        picked = [
            (
                -float(k3_mean[i]),
                start + int(i),
                {
                    "tokens": int(n[i]),
                    "kl_k3": float(k3_mean[i]),
                    "abs_diff_mean": float(terms["abs_diff_sum"][i] / n[i]),
                    "log_weight": float(terms["seq_log_weight"][i]),
                },
            )
            for i in top
            if has[i]
        ]
        found = terms["abs_diff_max"][has]
        return cls(sums, counts, float(found.max()) if len(found) else -np.inf, terms["abs_diff_counts"].astype(np.int64), log_weight_counts, picked)

    def merge(self, later: "MismatchSummary", worst: int) -> "MismatchSummary":
        """These rows and ``later``'s, which follow them."""
        return MismatchSummary(
            self.sums.merge(later.sums),
            self.counts + later.counts,
            max(self.abs_diff_max, later.abs_diff_max),
            self.abs_diff_counts + later.abs_diff_counts,
            self.log_weight_counts + later.log_weight_counts,
            sorted(self.worst + later.worst, key=lambda x: x[:2])[:worst],
        )

    def figures(self, config) -> dict:
        """The report (``config``: the :class:`MismatchConfig`); a figure that
        is not finite (a perplexity beyond float64) is null."""
        c = self.counts
        n, rows = c["tokens"], c["scored_rows"]

        def mean(key: str, over: int) -> float | None:
            return finite_or_null(self.sums.total(key) / over) if over else None

        def ess(total: str, squares: str, over: int) -> dict:
            s, s2 = self.sums.total(total), self.sums.total(squares)
            with np.errstate(over="ignore"):
                count = finite_or_null(s * s / s2) if 0 < s2 < np.inf else None
            return {"count": count, "share": count / over if count is not None else None}

        def touched(name: str) -> dict:
            return {
                "tokens": c[f"{name}_tokens"],
                "token_share": c[f"{name}_tokens"] / n if n else 0.0,
                "rows": c[f"{name}_rows"],
                "row_share": c[f"{name}_rows"] / rows if rows else 0.0,
                "sequence_rows": c[f"{name}_seq_rows"],
                "sequence_row_share": c[f"{name}_seq_rows"] / rows if rows else 0.0,
            }

        chi2_token, chi2_seq = mean("w2_sum", n), mean("seq_w2", rows)
        return {
            "rows": c["rows"],
            "tokens": n,
            "abs_diff_mean": mean("abs_diff_sum", n),
            "abs_diff_max": self.abs_diff_max if n else None,
            "kl_k1": mean("k1_sum", n),
            "kl_k3": mean("k3_sum", n),
            "train_ppl": mean("train_ppl", rows),
            "rollout_ppl": mean("rollout_ppl", rows),
            "ppl_ratio": mean("ppl_ratio", rows),
            "chi2_token": None if chi2_token is None else chi2_token - 1.0,
            "chi2_seq": None if chi2_seq is None else chi2_seq - 1.0,
            "ess_token": ess("w_sum", "w2_sum", n),
            "ess_seq": ess("seq_w", "seq_w2", rows),
            "cap": {"value": config.is_cap, **touched("cap")} if config.is_cap is not None else None,
            "mask": {"value": list(config.is_mask), **touched("mask")} if config.is_mask is not None else None,
            "by_position": _buckets(self.sums.total("by_position") if n else None),
            "by_length": _buckets(self.sums.total("by_length") if n else None),
            "abs_diff_histogram": {"edges": _finite(ABS_DIFF_EDGES), "counts": self.abs_diff_counts.tolist()},
            "log_weight_histogram": {"edges": _finite(LOG_WEIGHT_EDGES), "counts": self.log_weight_counts.tolist()},
            "worst_rows": [{"row": row, **figures} for _, row, figures in self.worst],
            "config": config.figures,
        }


def _finite(edges) -> list[float | None]:
    """Histogram edges for JSON: an infinite edge is null."""
    return [float(e) if np.isfinite(e) else None for e in edges]


def _buckets(totals: np.ndarray | None) -> list[dict]:
    """The non-empty buckets of a ``by_position`` / ``by_length`` total: 1-based ``first`` and
    ``last`` (null: open-ended), its rows and tokens, means of |old - rollout|, k1, k3."""
    if totals is None:
        return []
    t = dict(zip(STATS, np.asarray(totals).reshape(len(STATS), BUCKETS)))
    out = []
    for b in np.flatnonzero(t["tokens"] > 0):
        tokens = t["tokens"][b]
        entry = {
            "first": 1 << int(b),
            "last": (2 << int(b)) - 1 if b < BUCKETS - 1 else None,
            "rows": int(t["rows"][b]),
            "tokens": int(tokens),
            **{f"{k}_mean" if k == "abs_diff" else f"kl_{k}": float(t[k][b] / tokens) for k in ("abs_diff", "k1", "k3")},
        }
        out.append(entry)
    return out
