"""Summaries of a run, built from partial summaries that merge exactly.

A partial summary covers a range of rows (a batch, a window of groups, a file, a worker's
share) and merges with the partial of the rows that follow it. Counts add; minima and
maxima take the extreme; float totals are summed in fixed blocks of :data:`BLOCK_ROWS` rows
counted from the first row of the input (:class:`BlockSums`), so every figure depends on
the rows alone, never on how they were split. Figures that need a total first (a std needs
the mean, a histogram its range) are a second partial summary taken with that total.

The library computes every figure, the headline objective included; :mod:`grpo_cli.report`
only formats them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import reduce
from typing import Any, Callable

import numpy as np

from .estimators import BatchWhitening, Groups, Whitening, pooled
from .numerics import unit

BLOCK_ROWS = 1 << 16
CHUNK_ROWS = 16 * BLOCK_ROWS  # :func:`described`'s unit of work: whole blocks, so partials merge without copies
HIST_BINS = 10


class BlockSums:
    """Float64 totals of named per-row arrays over the rows ``[start, stop)``, in bounded memory.

    Rows are summed in fixed blocks of ``block`` rows (row ``i`` is in block ``i // block``);
    a block seen whole is one sum, a block cut by the edge of the range keeps its values until
    the partial with the rest of it is merged. :meth:`total` adds the block sums, so a total
    depends on the rows alone, never on how they were split into partials. A row may hold a
    vector (an array of rows x k): its sums are vectors, column by column.

    >>> sums = BlockSums(block=2)
    >>> sums.add({"x": np.array([1.0, 2.0, 3.0])}); sums.add({"x": np.array([4.0])})
    >>> sums.total("x")
    10.0
    """

    def __init__(self, start: int = 0, block: int = BLOCK_ROWS):
        self.start = self.stop = start
        self.block = block
        self._blocks: dict[str, dict[int, float | np.ndarray | _Rows]] = {}

    @classmethod
    def of(cls, arrays: dict[str, np.ndarray], start: int = 0, block: int = BLOCK_ROWS) -> "BlockSums":
        """The partial sums of ``arrays`` (one value per row each), whose first row is ``start``."""
        sums = cls(start, block)
        for key, values in arrays.items():
            sums.stop = start + len(values)
            cuts = np.arange((start // block + 1) * block, sums.stop, block) - start  # block boundaries inside
            bounds = [0, *cuts.tolist(), len(values)]
            blocks = sums._blocks[key] = {}
            for k, (lo, hi) in enumerate(zip(bounds, bounds[1:]), start=start // block):
                if hi > lo:
                    blocks[k] = sums._finished(values[lo:hi])
        return sums

    def _finished(self, values: np.ndarray) -> float | np.ndarray | _Rows:
        """A whole block's sum, or a copy of the rows of a block not yet whole (a copy: a
        partial never holds on to, or sees changes of, the array it was taken from)."""
        return self._summed(values) if len(values) == self.block else _Rows(values.copy())

    @staticmethod
    def _summed(values: np.ndarray) -> float | np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):  # a sum beyond float64: its figure is null
            return np.add.reduceat(values, [0])[0]

    def merge(self, later: "BlockSums") -> "BlockSums":
        """These rows and ``later``'s, which start where these stop."""
        if self.stop != later.start:
            raise ValueError(f"partial sums of rows [{later.start}, {later.stop}) do not follow rows [{self.start}, {self.stop})")
        merged = BlockSums(self.start, self.block)
        merged.stop = later.stop
        for key in self._blocks.keys() | later._blocks.keys():
            mine, theirs = self._blocks.get(key, {}), later._blocks.get(key, {})
            blocks = merged._blocks[key] = {**mine, **theirs}
            for k in mine.keys() & theirs.keys():  # the block cut between the two: its rows joined once it is whole
                cut_mine, cut_theirs = mine[k], theirs[k]
                assert isinstance(cut_mine, _Rows) and isinstance(cut_theirs, _Rows)
                rows = cut_mine.then(cut_theirs)
                blocks[k] = self._summed(rows.values) if rows.n == self.block else rows
        return merged

    def add(self, arrays: dict[str, np.ndarray]) -> None:
        """Append the rows that follow (in place)."""
        merged = self.merge(BlockSums.of(arrays, self.stop, self.block))
        self.stop, self._blocks = merged.stop, merged._blocks

    def total(self, key: str) -> Any:
        """The sum (a float, or an array for an array's key) over every row of the input (the partial must start at row 0): a pairwise sum
        of the block sums, the last block's included (0.0 when it is empty)."""
        blocks = self._blocks.get(key, {})
        *whole, last = [blocks[k] for k in sorted(blocks)] or [_Rows(np.empty(0))]
        if self.start != 0 or any(isinstance(s, _Rows) for s in whole):
            raise ValueError(f"rows [{self.start}, {self.stop}) are not the input from its first row")
        with np.errstate(over="ignore", invalid="ignore"):  # a total beyond float64: its figure is null
            if isinstance(last, _Rows):
                tail = last.values.sum(axis=0)
            else:
                whole.append(last)
                tail = np.zeros_like(last)
            total = np.array([*whole, tail]).sum(axis=0) if whole else tail
        return float(total) if np.ndim(total) == 0 else total


class _Rows:
    """The rows of a block not yet seen whole (:class:`BlockSums`): a chain of the parts they
    came in (each link holds its part and the rows before it), joined when the block is whole
    or totalled, so merging partials one by one copies each row once, not once per merge."""

    __slots__ = ("part", "before", "n")

    def __init__(self, part: np.ndarray, before: _Rows | None = None):
        self.part, self.before = part, before
        self.n: int = len(part) + (before.n if before is not None else 0)

    def then(self, later: _Rows) -> _Rows:
        """These rows and ``later``'s, which follow them."""
        rows = self
        for part in later.parts():
            rows = _Rows(part, rows)
        return rows

    def parts(self) -> list[np.ndarray]:
        parts: list[np.ndarray] = []
        link: _Rows | None = self
        while link is not None:
            parts.append(link.part)
            link = link.before
        return parts[::-1]

    @property
    def values(self) -> np.ndarray:
        return self.part if self.before is None else np.concatenate(self.parts())


@dataclass
class Moments:
    """First-stage figures of a float column: count, block sums of ``x / unit``, min, max.

    ``unit`` is a power of two that keeps sums and squares of huge or tiny values finite
    (see :mod:`grpo_cli.numerics`); partials merge only with partials of the same unit.
    """

    n: int
    sums: BlockSums
    min: float
    max: float
    unit: float = 1.0

    @classmethod
    def of(cls, x: np.ndarray, start: int = 0, unit: float = 1.0) -> "Moments":
        if not len(x):
            return cls(0, BlockSums(start), np.inf, -np.inf, unit)
        return cls(len(x), BlockSums.of({"x": x / unit if unit != 1.0 else x}, start), float(np.min(x)), float(np.max(x)), unit)

    def merge(self, later: "Moments") -> "Moments":
        if self.unit != later.unit:
            raise ValueError(f"partials in units {self.unit} and {later.unit} do not merge")
        return Moments(self.n + later.n, self.sums.merge(later.sums), min(self.min, later.min), max(self.max, later.max), self.unit)

    @property
    def range(self) -> tuple[float, float]:
        """(min, max) of ``x / unit``."""
        return self.min / self.unit, self.max / self.unit

    @property
    def mean(self) -> float:
        """The mean of ``x / unit``."""
        return self.sums.total("x") / self.n


@dataclass
class Spread:
    """Second-stage figures of a float column, taken with its :class:`Moments`: block sums of
    ``(x - mean)^2`` and, if asked for, counts in :data:`HIST_BINS` equal bins over ``[min, max]``."""

    squares: BlockSums
    counts: np.ndarray | None = None

    @classmethod
    def of(cls, x: np.ndarray, moments: Moments, start: int = 0, histogram: bool = False) -> "Spread":
        scaled = x / moments.unit if moments.unit != 1.0 else x
        counts = bin_counts(scaled, moments.range) if histogram else None
        squares = scaled - moments.mean
        np.multiply(squares, squares, out=squares)
        return cls(BlockSums.of({"x": squares}, start), counts)

    def merge(self, later: "Spread") -> "Spread":
        counts = None if self.counts is None else self.counts + later.counts
        return Spread(self.squares.merge(later.squares), counts)


def bin_counts(x: np.ndarray, span: tuple[float, float]) -> np.ndarray:
    """``np.histogram(x, HIST_BINS, span)[0]`` for ``x`` within ``span``: bin k counts
    ``edges[k] <= x < edges[k + 1]`` (the last bin also ``x == edges[-1]``), found as the
    count below each inner edge, one vectorised comparison each (faster than np.histogram).

    >>> bin_counts(np.array([0.0, 0.1, 0.95, 1.0]), (0.0, 1.0)).tolist()
    [1, 1, 0, 0, 0, 0, 0, 0, 0, 2]
    """
    edges = bin_edges(span)
    return np.diff([0, *(np.count_nonzero(x < e) for e in edges[1:-1]), len(x)])


def bin_edges(span: tuple[float, float]) -> np.ndarray:
    """The :data:`HIST_BINS` + 1 equal-width edges over ``span`` (finite), as
    ``np.histogram_bin_edges`` makes them: ``linspace(lo, hi)``, the span widened by 0.5 each way
    if ``lo == hi``. A span narrower than :data:`HIST_BINS` float64 steps (``[1e12, 1e12 + one
    ulp]``), which numpy refuses, keeps its repeated edges: those bins are empty.

    >>> bin_edges((1e12, np.nextafter(1e12, np.inf)))[[0, 5, 10]].tolist()
    [1000000000000.0, 1000000000000.0, 1000000000000.0001]
    """
    lo, hi = span
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return np.linspace(lo, hi, HIST_BINS + 1)


def finite_or_null(figure: float | None) -> float | None:
    """A figure as reported: null where it is not a float64 number (a total beyond float64)."""
    return figure if figure is None or np.isfinite(figure) else None


def describe(moments: Moments, spread: Spread) -> dict:
    """mean / std (population) / min / max."""
    return {
        "mean": moments.mean * moments.unit,
        "std": float(np.sqrt(spread.squares.total("x") / moments.n)) * moments.unit,
        "min": moments.min,
        "max": moments.max,
    }


def histogram(moments: Moments, spread: Spread) -> dict:
    """Equal-width bins over [min, max] (widened by 0.5 each way if they are equal):
    ``edges`` (bins + 1) and ``counts`` (bins)."""
    if spread.counts is None:
        raise ValueError("the spread was taken without its histogram")
    edges = bin_edges(moments.range) * moments.unit
    return {"edges": edges.tolist(), "counts": spread.counts.tolist()}


def described(x: np.ndarray, histogram: bool = False, map_chunks: Callable = map) -> tuple[Moments, Spread]:
    """Both stages over one array, the whole input: a chunk of :data:`CHUNK_ROWS` rows at a
    time through ``map_chunks`` (an engine passes one that runs on its threads), the partials
    merged, so the figures are those of the array in one piece.

    >>> moments, spread = described(np.array([1.0, 2.0, 3.0])); moments.mean, spread.squares.total("x")
    (2.0, 2.0)
    """
    starts = range(0, len(x), CHUNK_ROWS) or range(1)

    def moments_in(u: float) -> Moments:
        return reduce(Moments.merge, map_chunks(lambda start: Moments.of(x[start : start + CHUNK_ROWS], start, u), starts))

    moments = moments_in(1.0)
    u = unit(np.array([moments.min, moments.max])) if moments.n else 1.0  # unit(x), from the extremes already found
    if u != 1.0:  # values beyond 2^500 or within 2^-500: the sums again, in that unit
        moments = moments_in(u)
    spreads = map_chunks(lambda start: Spread.of(x[start : start + CHUNK_ROWS], moments, start, histogram), starts)
    return moments, reduce(Spread.merge, spreads)


@dataclass
class GroupSummary:
    """Group figures of disjoint sets of groups: how many, their sizes, how many carry no
    signal (one row, or equal rewards)."""

    groups: int = 0
    sizes: Counter = field(default_factory=Counter)
    zero_variance: int = 0

    @classmethod
    def of(cls, groups: Groups) -> "GroupSummary":
        index = groups.index
        if index.size is not None:  # all of k rows: nothing to count
            sizes = Counter({index.size: index.count})
        else:
            values, counts = np.unique(groups.count, return_counts=True)
            sizes = Counter(dict(zip(values.tolist(), counts.tolist())))
        return cls(index.count, sizes, int(index.count - groups.informative.sum()))

    def merge(self, other: "GroupSummary") -> "GroupSummary":
        return GroupSummary(self.groups + other.groups, self.sizes + other.sizes, self.zero_variance + other.zero_variance)


def advantage_figures(
    groups: GroupSummary, grouped_by: str, rewards: tuple[Moments, Spread], advantages: tuple[Moments, Spread], config, rows: int
) -> dict:
    """The figures of `grpo advantages` (``config``: the resolved :class:`AdvantageConfig`);
    ``rewards`` describes the scored rows of the ``rows``."""
    return {
        **reward_figures(groups, grouped_by, rewards, rows),
        "advantage": describe(*advantages),
        "advantage_histogram": histogram(*advantages),
        "config": config.figures,
    }


def token_advantage_figures(
    groups: GroupSummary, grouped_by: str, rewards: tuple[Moments, Spread], rows: int, moments: dict[str, np.ndarray], w, config
) -> dict:
    """The figures of `grpo advantages` with a token-level estimator: ``advantage`` describes
    the written ``w(A) = (A - mu) / s`` over every valid token (``tokens``), from each row's
    ``count``, ``mean``, ``m2`` (in its ``unit`` squared), ``min`` and ``max`` of its raw token
    advantages (:func:`whitened_figures`; with a whitening per batch, each batch's pooled);
    no histogram."""
    if isinstance(w, BatchWhitening):
        each = [whitened_figures({k: v[rows] for k, v in moments.items()}, wb) for wb, rows in zip(w.each, w.batches.rows)]
        n = sum(f["tokens"] for f in each)
        has = [f for f in each if f["tokens"]]
        c, m = np.array([f["tokens"] for f in has], dtype=float), np.array([f["mean"] for f in has])
        _, mean, m2, u = pooled(c, m, c * np.array([f["std"] for f in has]) ** 2)
        whole = (
            {"tokens": n, "mean": mean, "std": float(np.sqrt(m2 / n)) * u, "min": min(f["min"] for f in has), "max": max(f["max"] for f in has)}
            if n
            else each[0]
        )
    else:
        whole = whitened_figures(moments, w)
    return {
        **reward_figures(groups, grouped_by, rewards, rows),
        "tokens": whole.pop("tokens"),
        "advantage": whole,
        "advantage_histogram": None,
        "config": config.figures,
    }


def whitened_figures(moments: dict[str, np.ndarray], w: Whitening) -> dict:
    """``tokens`` and the mean / std / min / max of ``w(A)`` over the valid tokens of rows
    with token moments ``moments`` (:func:`token_advantage_figures`). The std is
    ``sqrt(M2 / N) / s``, both in their units (``U / w.u`` apart), so neither overflows."""
    n, mean, m2, u = pooled(moments["count"], moments["mean"], moments["m2"], moments["unit"])
    has = moments["count"] > 0
    if not n:
        return {"tokens": 0, "mean": None, "std": None, "min": None, "max": None}
    return {
        "tokens": int(n),
        "mean": w(mean),
        "std": float(np.sqrt(m2 / n)) * (u / w.u) / w.s,
        "min": w(float(moments["min"][has].min())),
        "max": w(float(moments["max"][has].max())),
    }


def reward_figures(groups: GroupSummary, grouped_by: str, rewards: tuple[Moments, Spread], rows: int) -> dict:
    """Rows, unscorable rows, groups and their sizes, the rewards of the scored rows, and the
    groups without signal."""
    return {
        "rows": rows,
        "unscorable_rows": rows - rewards[0].n,
        "groups": groups.groups,
        "grouped_by": grouped_by,
        "group_sizes": {str(s): c for s, c in sorted(groups.sizes.items())},
        "reward": describe(*rewards),
        "zero_variance_groups": {"count": groups.zero_variance, "share": groups.zero_variance / groups.groups if groups.groups else 0.0},
    }
