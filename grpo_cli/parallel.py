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


def default_threads() -> int:
    """Worker threads when none are asked for: the cores this process may use, at most 8."""
    return max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


def ordered_map(fn: Callable[[T], R], items: Iterable[T], threads: int) -> Iterator[R]:
    """``map(fn, items)`` with up to ``threads`` calls in flight; results keep the order of
    ``items``, and an exception surfaces at its item's turn. At most ``threads + 1`` items are
    held at once, so memory stays bounded by the batch size.

    >>> list(ordered_map(lambda x: x * x, range(5), threads=2))
    [0, 1, 4, 9, 16]
    """
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
