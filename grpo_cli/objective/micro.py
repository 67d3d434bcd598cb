"""Micro-batches: the input, one mini-batch, split into micro-batches of ``micro_batch_size``
consecutive rows (micro-batch ``k`` holds rows ``[k m, (k + 1) m)``, the last one shorter if
the rows do not divide), each with totals of its own, and the mini-batch's loss made from
them as a framework does (``micro_batch_rule``), with ``agg_j`` the aggregation on
micro-batch ``j`` alone (its own rows ``B_j`` and tokens) and ``G`` micro-batches:

- ``global`` (verl 0.9.1, workers/utils/losses.py:65-68): every micro-batch divides by the
  mini-batch's tokens and rows, and their losses add up, so the value is the input's; only
  the constant ``L`` of the ``*-norm`` aggregations, when ``max_length`` is not given (verl's
  ``loss_scale_factor`` null), is each micro-batch's padded width, its longest row
  (``loss_mask.shape[-1]`` after ``to_padded_tensor``, core_algos.py:1190-1193):
  ``sum_j S_j / (B L_j)``.
- ``row-weighted`` (verl 0.7.0's dp_actor, workers/actor/dp_actor.py:444-543): ``agg_loss`` on
  each micro-batch with its own denominators, times ``loss_scale_factor`` = its rows over the
  mini-batch's: ``sum_j (B_j / B) agg_j``; ``1 / gradient_accumulation`` each when the rows
  divide, which verl asserts for a fixed micro-batch size (fsdp_workers.py:256), the dynamic
  batch size's ``rows_j / ppo_mini_batch_size`` otherwise.
- ``mean`` (Twinkle 0.5.1 and 0.1, model/transformers/transformers.py:685-707): an RL loss
  reports no token count, so each micro-batch's loss counts 1, a last shorter one too:
  ``(1 / G) sum_j agg_j``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .aggregation import AGGREGATIONS, Totals

RULES = {  # what the summary says of each
    "global": "the mini-batch's denominators in each",
    "row-weighted": "each aggregated alone, weighted by its rows",
    "mean": "each aggregated alone, the mean of their values",
}
MAXIMA = ("longest",)  # totals that are a maximum over the rows, not a sum


def _totals(key: str, values: np.ndarray, ids: np.ndarray, count: int) -> np.ndarray:
    """The total of each of ``count`` micro-batches (row ``i`` in micro-batch ``ids[i]``,
    ``ids`` ascending from 0): a sum in row order (``np.bincount``, so a micro-batch's sum is
    the same whichever rows it was met with), or a maximum."""
    if key in MAXIMA:
        return np.maximum.reduceat(values, np.searchsorted(ids, np.arange(count))).astype(np.float64)
    return np.bincount(ids, weights=values, minlength=count)


@dataclass(frozen=True)
class MicroSums:
    """Per-micro-batch totals of named per-row arrays over the rows ``[start, stop)``.

    ``totals[key][j]`` is micro-batch ``start // size + j``'s total over these rows. A
    micro-batch cut by an edge of the range (or shorter than ``size``) keeps its rows in
    ``edges`` until :meth:`merge` meets the rest, so that its total depends on its rows
    alone, never on how they were split.
    """

    size: int
    start: int
    stop: int
    totals: dict[str, np.ndarray]
    edges: dict[int, dict[str, np.ndarray]]

    @classmethod
    def of(cls, values: dict[str, np.ndarray], size: int, start: int = 0) -> MicroSums:
        """The totals of ``values`` (one per row each), whose first row is ``start``."""
        rows = len(next(iter(values.values())))
        stop = start + rows
        if not rows:
            return cls(size, start, stop, {key: np.empty(0) for key in values}, {})
        ids = np.arange(start, stop) // size - start // size
        count = int(ids[-1]) + 1
        totals = {key: _totals(key, v, ids, count) for key, v in values.items()}
        edges = {}
        for k in {start // size, (stop - 1) // size}:
            lo, hi = max(k * size, start), min((k + 1) * size, stop)
            if hi - lo < size:
                edges[k] = {key: v[lo - start : hi - start].copy() for key, v in values.items()}
        return cls(size, start, stop, totals, edges)

    def merge(self, later: MicroSums) -> MicroSums:
        """These rows and ``later``'s, which start where these stop."""
        if self.stop != later.start:
            raise ValueError(f"micro-batch totals of rows [{later.start}, {later.stop}) do not follow rows [{self.start}, {self.stop})")
        if self.start == self.stop or later.start == later.stop:
            return later if self.start == self.stop else self
        shared = self.stop // self.size if self.stop % self.size else None  # the micro-batch cut between them
        edges = {k: rows for k, rows in (*self.edges.items(), *later.edges.items()) if k != shared}
        if shared is None:
            totals = {key: np.concatenate([t, later.totals[key]]) for key, t in self.totals.items()}
        else:
            rows = {key: np.concatenate([v, later.edges[shared][key]]) for key, v in self.edges[shared].items()}
            joined = {key: _totals(key, v, np.zeros(len(v), dtype=np.int64), 1) for key, v in rows.items()}
            totals = {key: np.concatenate([t[:-1], joined[key], later.totals[key][1:]]) for key, t in self.totals.items()}
            if len(next(iter(rows.values()))) < self.size:
                edges[shared] = rows
        return MicroSums(self.size, self.start, later.stop, totals, edges)

    @property
    def count(self) -> int:
        """``G``, the micro-batches met."""
        return len(next(iter(self.totals.values()), ()))


def combine(rule: str, agg: str, micro: MicroSums, key: str, whole: Totals, empty_rows: str) -> float:
    """The mini-batch's aggregation ``agg`` of ``key`` from its micro-batches' totals
    (``micro``: ``key``, ``key/n``, ``rows``, ``counted_rows``, ``tokens``, ``longest``), as
    ``rule`` says (see the module docstring); ``whole``: the input's totals (``global``'s
    denominators, and its value where ``L`` is a constant)."""
    a = AGGREGATIONS[agg]
    t = micro.totals
    if rule == "global":
        if not a.needs_max_length or whole.max_length is not None:
            return a.fn(whole, whole.batch_rows(empty_rows))
        b = whole.batch_rows(empty_rows)
        return sum(
            a.fn(Totals(s, 0.0, whole.rows, whole.counted_rows, whole.tokens, int(longest)), b)
            for s, longest in zip(t[key], t["longest"])
            if longest  # a micro-batch of rows without tokens adds 0
        )
    parts = [
        Totals(s, p, int(rows), int(counted), int(tokens), whole.max_length)
        for s, p, rows, counted, tokens in zip(t[key], t[f"{key}/n"], t["rows"], t["counted_rows"], t["tokens"])
    ]
    values = [a.fn(part, part.batch_rows(empty_rows)) for part in parts]
    if rule == "row-weighted":
        return sum(part.rows / whole.rows * v for part, v in zip(parts, values))
    return sum(values) / len(values) if values else 0.0
