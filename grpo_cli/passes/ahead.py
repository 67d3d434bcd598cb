"""Advantages computed while pass 1 still reads.

Streamed pass 1 is bound by reading: its kernels leave the cores idle most of the time. When
each prompt id's rows are contiguous (the usual layout), the groups are the runs of equal ids,
and every run that ends before the newest batch's last run is a whole group. So the advantages
of those rows can be computed, a window of whole groups at a time on worker threads, before
the pass ends.

Whether the layout is contiguous is known only at the end (an id may come back), so this work
is speculative: it is kept only if the finished index is contiguous and starts its groups where
the windows assumed, and no window failed. Else
it is dropped and done again after the pass, where any error is raised in its usual place and
order. Both ways give the same bits: a group's advantages depend on its rows alone, its sums
added in row order whatever the window (:mod:`grpo_cli.estimators.groups`).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from functools import reduce

import numpy as np

from ..engines import kernels
from ..estimators import GroupIndex, Runs, row_inputs
from ..summaries import GroupSummary

WINDOW_ROWS = 1 << 18  # rows of whole groups computed at once: a window's arrays stay in cache


class WindowsAhead:
    """The advantages of pass 1's rows, window by window as the rows are read.

    ``rewards`` and ``baselines`` are pass 1's arrays of every row (as
    :func:`~grpo_cli.estimators.row_inputs` takes them), filled as the batches are read;
    :meth:`read` says which rows are filled, :meth:`finish` returns the advantages.
    """

    def __init__(self, rewards: np.ndarray, baselines: np.ndarray | None, names: list[str], config, threads: int):
        self.rewards, self.baselines, self.names, self.config = rewards, baselines, names, config
        self.out = np.empty(len(rewards))
        self.pool = ThreadPoolExecutor(threads)
        self.windows: list[Future] = []
        self.firsts: list[tuple[int, np.ndarray]] = []  # where the groups of each send start, as assumed: (cut, from the cut)
        self.cut = 0  # rows before it are sent to the workers
        self.parts: list[tuple[int, Runs]] = []  # the runs of the batches read since the cut's batch (first row, runs)

    def read(self, first_row: int, runs: Runs) -> None:
        """The batch at ``first_row``, with the ``runs`` of its ids, is filled in: send the rows
        up to its last run's start (an id change) when they are a window or more past the cut."""
        self.parts.append((first_row, runs))
        if len(runs.starts) < 2:  # no id change inside the batch (its first run may go on from the last batch)
            return
        edge = first_row + int(runs.starts[-1])
        if edge - self.cut >= WINDOW_ROWS:
            joined = Runs.joined([part for _, part in self.parts])
            starts = joined.starts + self.parts[0][0]
            self._send(GroupIndex(starts[(starts >= self.cut) & (starts < edge)] - self.cut, edge - self.cut))
            self.parts = self.parts[-1:]

    def finish(self, g: GroupIndex) -> tuple[np.ndarray, GroupSummary] | None:
        """Every row's advantage (before any whitening) and the group figures, once the pass
        has read all rows into index ``g``; None if the speculation did not hold (``g`` is not
        contiguous or starts other groups, or a window failed): the caller computes them again."""
        try:
            sent = sum(len(first) for _, first in self.firsts)
            if not self._assumed(g, sent):
                return None
            if self.cut < g.rows:
                self._send(g.window(sent, g.count)[1])
            summaries = [window.result() for window in self.windows]
        except Exception:  # a window that failed fails again, in its place, when computed after the pass
            return None
        finally:
            self.close()
        return self.out, reduce(GroupSummary.merge, summaries, GroupSummary())

    def _assumed(self, g: GroupIndex, sent: int) -> bool:
        """``g`` is contiguous, its first ``sent`` groups start where the windows sent assumed
        (compared send by send: no copy of every start), and the next one at the cut (or no
        row is left)."""
        if not g.contiguous:
            return False
        done = 0
        for cut, first in self.firsts:
            if not np.array_equal(g.first[done : done + len(first)] - cut, first):
                return False
            done += len(first)
        return self.cut == g.rows or sent < g.count and int(g.first[sent]) == self.cut

    def __enter__(self) -> "WindowsAhead":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop: the windows not started are dropped."""
        self.pool.shutdown(wait=True, cancel_futures=True)

    def _send(self, g: GroupIndex) -> None:
        """Send the rows from the cut on, whole groups in index ``g`` (numbered from the cut),
        to the workers a window at a time."""
        self.windows += [self.pool.submit(self._window, self.cut, g, window) for window in g.windows(WINDOW_ROWS)]
        self.firsts.append((self.cut, g.first))
        self.cut += g.rows

    def _window(self, start: int, g: GroupIndex, window: tuple[int, int]) -> GroupSummary:
        """Window ``(lo, hi)`` of index ``g`` (of the rows from ``start``): its advantages
        written out, its group figures returned."""
        rows, local = g.window(*window)
        rows = slice(start + rows.start, start + rows.stop)
        inputs = row_inputs(self.rewards[rows], self.names, self.config, baseline=None if self.baselines is None else self.baselines[rows])
        self.out[rows], summary = kernels.advantage_window(inputs, local, self.config)
        return summary
