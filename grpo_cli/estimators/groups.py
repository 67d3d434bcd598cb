"""Rows in groups, and each group's sufficient statistics of its rewards.

Each row gets a dense group number (:class:`GroupIndex`). When every group's rows are
contiguous (the common layout, checked cheaply on runs of equal keys), the groups are the
runs, no per-row group number is built, and the advantages can be computed a window of
whole groups at a time; otherwise polars' hash group-by numbers the rows. Sums over
a group are added in row order from 0.0: ``np.bincount``, or, when the groups are contiguous
and all of one size k (the usual layout: k generations per prompt), k vector additions over
the groups' j-th rewards (:attr:`Groups.positions`): the same bits, faster. polars' own float sums are not used because they can differ by an
ulp from run to run (their summation order depends on memory alignment and hashing), and
results here must depend on the values alone.

A group's rewards are summarised by sufficient statistics, computed once and shared by the
estimators, the scales and the summary: count n, sum S, M2 = sum (r - S/n)^2, min and max.
The finishing steps (mean, std with a ddof, "has signal") are properties. Statistics of
disjoint sets of groups (windows, or files whose groups do not span files) concatenate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa

from ..schema import arrow_array
from ..errors import present


@dataclass(frozen=True)
class GroupIndex:
    """Rows grouped by key: ``first[k]`` is the row where group k (numbered in order of
    first appearance) starts, and ``codes[i]`` is row i's group. ``scattered_codes`` holds
    the codes when a group's rows are not contiguous; when they are (``None``), the codes
    follow from ``first`` and are built only if asked for."""

    first: np.ndarray
    rows: int
    scattered_codes: np.ndarray | None = None

    @classmethod
    def whole(cls, rows: int) -> "GroupIndex":
        """All ``rows`` rows as one group."""
        return cls(np.zeros(1, dtype=np.int64), rows)

    @classmethod
    def blocks(cls, rows: int, size: int) -> "GroupIndex":
        """Consecutive blocks of ``size`` rows."""
        return cls(np.arange(0, rows, size, dtype=np.int64), rows)

    @property
    def contiguous(self) -> bool:
        """Each group's rows are consecutive."""
        return self.scattered_codes is None

    @property
    def count(self) -> int:
        """Number of groups."""
        return len(self.first)

    @cached_property
    def codes(self) -> np.ndarray:
        """Each row's group number."""
        if self.contiguous:
            return np.repeat(np.arange(self.count, dtype=np.int64), self.sizes)
        return present(self.scattered_codes, "the codes of scattered groups")

    @cached_property
    def sizes(self) -> np.ndarray:
        """Rows in each group."""
        if self.contiguous:
            return np.diff(self.first, append=self.rows)
        return np.bincount(self.codes, minlength=self.count)

    @cached_property
    def size(self) -> int | None:
        """k, when the groups are contiguous, all of k rows, and at least k of them (so the k
        vector operations of :attr:`Groups.positions` each span at least k groups); else None.

        >>> GroupIndex.blocks(8, 2).size, GroupIndex.blocks(8, 4).size, GroupIndex.whole(8).size
        (2, None, None)
        """
        if not self.contiguous or not self.count or self.rows % self.count:
            return None
        k = self.rows // self.count
        return k if k <= self.count and (self.sizes == k).all() else None

    def window(self, lo: int, hi: int) -> tuple[slice, "GroupIndex"]:
        """Groups ``lo`` to ``hi - 1`` of a contiguous index: the rows they span, and their
        own index (numbered from 0)."""
        start, stop = int(self.first[lo]), int(self.first[hi]) if hi < self.count else self.rows
        return slice(start, stop), GroupIndex(self.first[lo:hi] - start, stop - start)

    def subset(self, keep: np.ndarray | slice) -> "GroupIndex":
        """The index of the rows ``keep`` (a bool per row, or the rows, ascending); groups left empty vanish.

        >>> GroupIndex.blocks(6, 2).subset(np.array([1, 1, 0, 0, 0, 1], bool)).codes.tolist()
        [0, 0, 1]
        """
        codes = self.codes[keep]
        rows = len(codes)
        if self.contiguous:
            return GroupIndex(np.flatnonzero(np.diff(codes, prepend=-1) != 0), rows)
        _, first, renumbered = np.unique(codes, return_index=True, return_inverse=True)
        return GroupIndex(first.astype(np.int64), rows, renumbered.astype(np.int64))

    def windows(self, rows: int) -> list[tuple[int, int]]:
        """Consecutive ranges of whole groups ``(lo, hi)`` of about ``rows`` rows each
        (more if one group is larger); contiguous indexes only."""
        cuts = np.searchsorted(self.first, np.arange(0, self.rows, rows), side="left")  # ascending; repeats give empty ranges
        bounds = [*cuts.tolist(), self.count]
        return [(lo, hi) for lo, hi in zip(bounds, bounds[1:]) if lo < hi]


@dataclass(frozen=True)
class Batches:
    """Rows in batches, as a trainer saw them (its steps): ``index`` numbers each row's batch
    (in order of first appearance), ``values`` names each batch (the batch column's value, or
    the input file), ``column`` is the batch column (``None``: a batch per input file).

    >>> b = Batches(group_index(pa.array([1, 1, 2, 1])), [1, 2], "step"); [r.tolist() for r in b.rows]
    [[0, 1, 3], [2]]
    """

    index: GroupIndex
    values: list
    column: str | None

    @cached_property
    def rows(self) -> Sequence[slice | np.ndarray]:
        """Each batch's rows, ascending: a slice each when every batch is contiguous (found
        once: the advantages, the whitening and the summary take them each)."""
        if self.index.contiguous:
            bounds = [*self.index.first.tolist(), self.index.rows]
            return [slice(lo, hi) for lo, hi in zip(bounds, bounds[1:])]
        return list(np.split(np.argsort(self.index.codes, kind="stable"), np.cumsum(self.index.sizes)[:-1]))

    def spanning(self, groups: GroupIndex) -> np.ndarray:
        """The rows whose batch differs from their group's first row's: the rows of groups
        that span two batches (none when every group lies in one)."""
        b = self.index.codes
        return np.flatnonzero(b != b[groups.first][groups.codes])


PREFIX_RUNS = 1 << 16


@dataclass(frozen=True)
class Runs:
    """Rows as runs of equal consecutive keys: run j starts at row ``starts[j]`` and has key
    ``keys[j]``, of ``rows`` rows in all. Keys pyarrow cannot compare (lists, structs) make a
    run of every row.

    >>> runs = Runs.of(pa.array(["a", "a", "b", "a"])); runs.starts.tolist(), runs.keys.to_pylist()
    ([0, 2, 3], ['a', 'b', 'a'])
    """

    starts: np.ndarray
    keys: np.ndarray | pa.ChunkedArray
    rows: int

    @classmethod
    def of(cls, keys: pa.Array | pa.ChunkedArray | np.ndarray) -> "Runs":
        """The runs of ``keys``. Integer keys without nulls are compared in numpy, faster than
        Arrow's kernel and without importing pyarrow.compute."""
        if isinstance(keys, np.ndarray) or pa.types.is_integer(keys.type) and not keys.null_count:
            k = keys if isinstance(keys, np.ndarray) else keys.to_numpy()
            starts = np.flatnonzero(np.concatenate([np.ones(min(len(k), 1), dtype=bool), k[1:] != k[:-1]]))  # row 0, then each change
            return cls(starts, k[starts], len(k))
        keys = keys if isinstance(keys, pa.ChunkedArray) else pa.chunked_array([keys])
        try:
            changed = arrow("not_equal", keys[1:], keys[:-1])  # row i + 1 starts a run
        except pa.ArrowNotImplementedError:
            return cls(np.arange(len(keys), dtype=np.int64), keys, len(keys))
        starts = np.concatenate([np.zeros(min(len(keys), 1), dtype=np.int64), arrow("indices_nonzero", changed).to_numpy().astype(np.int64) + 1])
        return cls(starts, pa.chunked_array([*keys[:1].chunks, *arrow("filter", keys[1:], changed).chunks], type=keys.type), len(keys))

    @classmethod
    def joined(cls, parts: list["Runs"]) -> "Runs":
        """The runs of consecutive parts' rows, numbered from the first part's first row: a
        part's first run continues the run before it when their keys are equal, so a run that
        a part's edge cut is one run again. Only the edges are compared (within a part, the
        next run's key always differs)."""
        if not parts:
            return cls(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 0)
        offsets = np.cumsum([0, *(part.rows for part in parts)])
        starts = np.concatenate([part.starts + offset for part, offset in zip(parts, offsets)])
        numeric = all(isinstance(part.keys, np.ndarray) for part in parts)
        keys = np.concatenate([part.keys for part in parts]) if numeric else pa.chunked_array([c for part in parts for c in part.keys.chunks])  # type: ignore[union-attr]
        counts = np.array([len(part.starts) for part in parts])
        edges = np.cumsum(counts)[:-1][counts[1:] > 0]  # each later part's first run, among all runs
        edges = edges[edges > 0]
        same = _equal(keys, edges, edges - 1)
        if not same.any():
            return cls(starts, keys, int(offsets[-1]))
        keep = np.ones(len(starts), dtype=bool)
        keep[edges[same]] = False
        return cls(starts[keep], keys[keep] if numeric else arrow("filter", keys, arrow_array(keep)), int(offsets[-1]))

    def key_at(self, row: int):
        """The key of row ``row``, as a Python value."""
        key = self.keys[int(np.searchsorted(self.starts, row, side="right")) - 1]
        return key.item() if isinstance(key, np.generic) else key.as_py()

    def index(self) -> GroupIndex:
        """The rows' :class:`GroupIndex`: the runs themselves when no key starts two runs (the
        common layout), else runs of a key joined by a hash group-by of the run keys."""
        if _each_key_one_run(self.keys):
            return GroupIndex(self.starts, self.rows)
        import polars as pl  # only for scattered groups: importing polars is slow

        frame = pl.DataFrame({"key": pl.Series(self.keys)}).with_row_index("run")
        first_run = frame.select(pl.col("run").first().over("key").cast(pl.Int64))["run"].to_numpy()
        is_first = first_run == np.arange(len(first_run))
        codes = (np.cumsum(is_first) - 1)[first_run]
        return GroupIndex(self.starts[is_first], self.rows, np.repeat(codes, np.diff(self.starts, append=self.rows)))


def group_index(keys: pa.Array | pa.ChunkedArray) -> GroupIndex:
    """The :class:`GroupIndex` of ``keys`` (any comparable, hashable type; rows of a group
    need not be contiguous).

    >>> g = group_index(pa.array(["a", "b", "a"])); g.codes.tolist(), g.first.tolist()
    ([0, 1, 0], [0, 1])
    """
    return Runs.of(keys).index()


def _each_key_one_run(run_keys: np.ndarray | pa.ChunkedArray) -> bool:
    """No key starts two runs: cheap when the run keys ascend (sorted ids), else hash counts,
    first on a prefix (scattered groups repeat a key early and stop there)."""
    if len(run_keys) < 2 or _ascending(run_keys):
        return True
    import polars as pl

    return all(pl.Series(part).n_unique() == len(part) for part in (run_keys[:PREFIX_RUNS], run_keys))


def arrow(function: str, *args):
    """An Arrow compute function by name, called through ``pyarrow._compute``: importing
    ``pyarrow.compute``, which wraps every function in Python, would add to every run's
    start-up what the few kernels here do not need.

    >>> arrow("not_equal", pa.array(["a", "a"]), pa.array(["a", "b"])).to_pylist()
    [False, True]
    """
    from pyarrow._compute import call_function

    return call_function(function, list(args))


def _equal(keys: np.ndarray | pa.ChunkedArray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Whether ``keys[i] == keys[j]``, pair by pair; False for keys without an order (as
    :meth:`Runs.of` makes each of them a run)."""
    if isinstance(keys, np.ndarray):
        return keys[i] == keys[j]
    try:
        return arrow("equal", arrow("take", keys, arrow_array(i)), arrow("take", keys, arrow_array(j))).to_numpy(zero_copy_only=False)
    except pa.ArrowNotImplementedError:
        return np.zeros(len(i), dtype=bool)


def _ascending(values: np.ndarray | pa.ChunkedArray) -> bool:
    """Each value is less than the next."""
    if isinstance(values, np.ndarray):
        return bool(np.all(values[:-1] < values[1:]))
    try:
        return arrow("all", arrow("less", values[:-1], values[1:])).as_py()
    except pa.ArrowNotImplementedError:  # keys without an order (lists, structs)
        return False


def group_sum(values: np.ndarray, g: GroupIndex) -> np.ndarray:
    """Per group: the float64 sum of ``values`` over its rows, added in row order."""
    return np.bincount(g.codes, weights=values, minlength=g.count)


def _added(positions: np.ndarray) -> np.ndarray:
    """Per column of ``positions`` (:attr:`Groups.positions`): its values added in row order
    from 0.0, one vector addition per row (np.bincount's order, so the same bits; numpy's own
    reduction would add a single column pairwise)."""
    total = np.zeros(positions.shape[1])
    for row in positions:
        total += row
    return total


class Groups:
    """Rewards ``r`` of rows grouped by ``index``, with each group's sufficient statistics,
    computed when first asked for and then shared.

    >>> g = Groups(np.array([0.0, 1.0, 5.0, 5.0]), GroupIndex.blocks(4, 2))
    >>> g.mean.tolist(), g.m2.tolist(), g.informative.tolist()
    ([0.5, 5.0], [0.5, 0.0], [True, False])
    """

    def __init__(self, r: np.ndarray, index: GroupIndex, *, length: np.ndarray | None = None, baseline: np.ndarray | None = None):
        self.r = r
        self.index = index
        self.length = length  # each row's valid tokens (estimators that need it)
        self.baseline = baseline  # each row's baseline reward (estimators that need it)

    def with_rewards(self, r: np.ndarray) -> "Groups":
        """The same rows with rewards ``r``."""
        return Groups(r, self.index, length=self.length, baseline=self.baseline)

    def divided(self, unit: np.ndarray | float) -> "Groups":
        """The same rows with rewards (and baseline rewards) divided by ``unit``."""
        return Groups(self.r / unit, self.index, length=self.length, baseline=None if self.baseline is None else self.baseline / unit)

    def subset(self, keep: np.ndarray) -> "Groups":
        """The rows where ``keep`` (a bool per row), in their groups (groups left empty vanish)."""
        pick = lambda x: None if x is None else x[keep]  # noqa: E731
        return Groups(self.r[keep], self.index.subset(keep), length=pick(self.length), baseline=pick(self.baseline))

    def per_row(self, group_values: np.ndarray) -> np.ndarray:
        """Each row gets its group's value."""
        if self.index.contiguous:
            return np.repeat(group_values, self.count)
        return np.take(group_values, self.index.codes)

    def set_rows(self, a: np.ndarray, of: np.ndarray, value: float) -> None:
        """``a[i] = value`` (in place) for every row i of a group where ``of`` (a bool per group);
        ``a``: one value per row, C-contiguous (as a ufunc's result is), so that groups all of
        k rows are the rows of its groups x k view and no per-row mask is built."""
        k = self.index.size
        if k is None:
            a[self.per_row(of)] = value
        else:
            a.reshape(-1, k)[of] = value  # a view of a contiguous ``a``: the rows set are its own

    @cached_property
    def positions(self) -> np.ndarray | None:
        """Groups all of k rows (:attr:`GroupIndex.size`): the rewards as k rows of one value per
        group, row j holding each group's j-th reward, so that a per-group sum, minimum or
        maximum is k vector operations; else None.

        >>> Groups(np.arange(6.0), GroupIndex.blocks(6, 2)).positions.tolist()
        [[0.0, 2.0, 4.0], [1.0, 3.0, 5.0]]
        """
        k = self.index.size
        return None if k is None else np.ascontiguousarray(self.r.reshape(-1, k).T)

    @property
    def count(self) -> np.ndarray:
        """n: rows per group."""
        return self.index.sizes

    @cached_property
    def sum(self) -> np.ndarray:
        """S: sum of the group's rewards, added in row order."""
        return group_sum(self.r, self.index) if self.positions is None else _added(self.positions)

    @property
    def mean(self) -> np.ndarray:
        """S / n."""
        return self.sum / self.count

    @cached_property
    def centered(self) -> np.ndarray:
        """Per row: ``r - mean_g``."""
        return self.r - self.per_row(self.mean)

    @cached_property
    def m2(self) -> np.ndarray:
        """M2 = sum over the group of ``(r - mean_g)^2``."""
        if self.positions is None:
            c = self.centered
            return group_sum(c * c, self.index)
        c = self.positions - self.mean  # the same differences as ``centered``, by position
        return _added(np.multiply(c, c, out=c))

    def std(self, ddof: int) -> np.ndarray:
        """``sqrt(M2 / (n - ddof))``: ddof 0 is the population std, 1 the sample std."""
        return np.sqrt(self.m2 / (self.count - ddof))

    @cached_property
    def min(self) -> np.ndarray:
        return self.reduce(np.minimum, self.r) if self.positions is None else self.positions.min(axis=0)

    @cached_property
    def max(self) -> np.ndarray:
        return self.reduce(np.maximum, self.r) if self.positions is None else self.positions.max(axis=0)

    def reduce(self, ufunc: np.ufunc, values: np.ndarray) -> np.ndarray:
        """Per group: ``ufunc`` (np.minimum, np.maximum) over the group's ``values``."""
        if self.index.count == 0:
            return np.zeros(0, dtype=values.dtype)
        if self.index.contiguous:
            return ufunc.reduceat(values, self.index.first)
        out = values[self.index.first]  # a copy: fancy indexing
        ufunc.at(out, self.index.codes, values)
        return out

    @property
    def informative(self) -> np.ndarray:
        """Per group: at least two distinct rewards (exactly: min != max). A group of one row,
        or of equal rewards, carries no learning signal."""
        return self.min != self.max
