"""Run a function over a stream on a few threads, results in stream order.

numpy and pyarrow release the GIL in their kernels, so threads are enough to keep both
cores busy: the caller's thread reads and writes while workers compute.
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")
R = TypeVar("R")


IN_FLIGHT_PER_CORE = 2  # calls in flight per core: more only wait, holding their items


def cores() -> int:
    """The cores this process may use."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def default_threads() -> int:
    """Worker threads when none are asked for: every core this process may use."""
    return cores()


def max_in_flight() -> int:
    """The most calls :func:`ordered_map` runs at once, whatever ``threads`` asks for."""
    return IN_FLIGHT_PER_CORE * cores()


def at_once(threads: int, nbytes: int, per_thread: int, in_all: int) -> int:
    """How many items of ``nbytes`` bytes to hold at once: at most ``threads``, within
    ``per_thread`` bytes per thread and ``in_all`` bytes in all (at least one).

    >>> at_once(16, 60 << 20, 32 << 20, 256 << 20), at_once(2, 60 << 20, 32 << 20, 256 << 20)
    (4, 1)
    """
    return max(1, min(threads, min(threads * per_thread, in_all) // max(1, nbytes)))


def runs(sizes: list[int], parts: int) -> list[list[int]]:
    """Items whose sizes are ``sizes`` cut, in order, into runs of about ``1/parts`` of the
    total: a run ends where the next item would take it past that (a larger item is a run of
    its own). A row group's columns by their bytes, a file's row groups by their rows.

    >>> runs([8, 8, 100, 100, 100, 8, 8], 2)
    [[0, 1, 2], [3], [4, 5, 6]]
    """
    share = sum(sizes) / max(1, parts)
    cut: list[list[int]] = [[]]
    held = 0
    for k, size in enumerate(sizes):
        if cut[-1] and held + size > share:
            cut.append([])
            held = 0
        cut[-1].append(k)
        held += size
    return cut


def ordered_map(fn: Callable[[T], R], items: Iterable[T], threads: int) -> Iterator[R]:
    """``map(fn, items)`` with up to ``threads`` calls in flight (at most :func:`max_in_flight`);
    results keep the order of ``items``, and an exception surfaces at its item's turn. At most
    one more item than calls in flight is held at once, so memory stays bounded by the batch
    size, not by the thread count.

    >>> list(ordered_map(lambda x: x * x, range(5), threads=2))
    [0, 1, 4, 9, 16]
    """
    threads = min(threads, max_in_flight())
    if threads <= 1:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(threads) as pool:
        pending: deque = deque()
        try:
            for item in items:
                pending.append(pool.submit(fn, item))
                if len(pending) > threads:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()
