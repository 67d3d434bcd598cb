"""Exact order statistics of values read in batches, in bounded memory: radix selection.

Each float64 maps to a 64-bit key that orders as the value does (:func:`keys`). What is known
of the wanted key is its first ``bits`` bits and its rank among the keys that share them
(:class:`Digits`). A pass over the batches counts those keys by their next :data:`DIGIT_BITS`
bits (one histogram per batch, added up): the counts give the wanted key's next digit and its
rank under the longer prefix. Once at most :data:`GATHERED` keys share the prefix, a pass
gathers them and the rank is selected exactly (``np.partition``). So a statistic takes at most
``64 / DIGIT_BITS + 1`` passes and holds one histogram per batch in flight, or at most
:data:`GATHERED` keys, whatever the number of values.

A pass is a ``scan``: given the :class:`Digits` wanted, it yields each batch's
``[part(values, d) for d in wanted]`` (:func:`part`), where ``values`` are the batch's values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

DIGIT_BITS = 16
GATHERED = 1 << 20  # keys gathered at most (8 MiB)
SIGN = np.uint64(1 << 63)

Scan = Callable[[tuple["Digits", ...]], Iterable[list[np.ndarray]]]


def keys(x: np.ndarray) -> np.ndarray:
    """Unsigned keys that order as the float64 values ``x`` do (``-0.0`` just below ``0.0``).

    >>> x = np.array([2.5, -1.0, 0.0, -3.0, 1e-300])
    >>> np.argsort(keys(x)).tolist() == np.argsort(x).tolist()
    True
    """
    bits = np.ascontiguousarray(x, dtype=np.float64).view(np.uint64)
    return np.where(bits & SIGN, ~bits, bits | SIGN)


def values(k: np.ndarray) -> np.ndarray:
    """The float64 values of keys ``k`` (the inverse of :func:`keys`)."""
    k = np.asarray(k, dtype=np.uint64)
    return np.where(k & SIGN, k & ~SIGN, ~k).view(np.float64)


@dataclass(frozen=True)
class Digits:
    """What is known of a wanted key: its first ``bits`` bits (``prefix``), and its ``rank``
    among the ``count`` keys of the input that share them (``count`` None: not yet counted)."""

    rank: int
    prefix: int = 0
    bits: int = 0
    count: int | None = None

    @property
    def gathers(self) -> bool:
        """Whether the next pass gathers the keys under the prefix (few enough) rather than counting them."""
        return self.count is not None and self.count <= GATHERED

    def after(self, counts: np.ndarray) -> Digits:
        """What is known once ``counts`` (of the keys under the prefix, per next digit) are."""
        below = np.cumsum(counts)
        digit = int(np.searchsorted(below, self.rank, side="right"))
        before = int(below[digit - 1]) if digit else 0
        return Digits(self.rank - before, (self.prefix << DIGIT_BITS) | digit, self.bits + DIGIT_BITS, int(counts[digit]))


def part(x: np.ndarray, wanted: Digits) -> np.ndarray:
    """One batch's part of a pass for ``wanted``: its keys under the prefix, gathered, or their
    counts per next digit."""
    k = keys(x)
    if wanted.bits:
        k = k[(k >> np.uint64(64 - wanted.bits)) == np.uint64(wanted.prefix)]
    if wanted.gathers:
        return k
    digits = (k >> np.uint64(64 - wanted.bits - DIGIT_BITS)) & np.uint64((1 << DIGIT_BITS) - 1)
    return np.bincount(digits.astype(np.intp), minlength=1 << DIGIT_BITS)


def _passed(scan: Scan, wanted: tuple[Digits, ...]) -> list[np.ndarray]:
    """Each wanted's pass result over every batch: counts added up, or keys gathered."""
    counts: list = [None] * len(wanted)
    gathered: list[list[np.ndarray]] = [[] for _ in wanted]
    for parts in scan(wanted):
        for j, (d, p) in enumerate(zip(wanted, parts)):
            if d.gathers:
                gathered[j].append(p)
            else:
                counts[j] = p if counts[j] is None else counts[j] + p
    return [np.concatenate(g) if d.gathers else c for d, g, c in zip(wanted, gathered, counts)]


def order_statistics(scan: Scan, ranks: Callable[[int], tuple[int, ...]]) -> tuple[int, list[float]]:
    """The number ``n`` of values the scan reads, and the values at ``ranks(n)`` (0-based
    positions in sorted order, each below ``n``; none when ``n`` is 0)."""
    (counts,) = _passed(scan, (Digits(0),))
    n = int(counts.sum())
    wanted = ranks(n) if n else ()
    known = {r: Digits(r).after(counts) for r in wanted}
    found: dict[int, float] = {}
    while len(found) < len(known):
        for r, d in known.items():
            if r not in found and d.bits == 64:  # every bit known: the key itself
                found[r] = float(values(np.uint64(d.prefix)))
        open_ = sorted({d for r, d in known.items() if r not in found}, key=lambda d: (d.bits, d.prefix, d.rank))
        if not open_:
            break
        results = dict(zip(open_, _passed(scan, tuple(open_))))
        for r, d in known.items():
            if r in found:
                continue
            got = results[d]
            if d.gathers:
                found[r] = float(values(np.partition(got, d.rank)[d.rank]))
            else:
                known[r] = d.after(got)
    return n, [found[r] for r in wanted]


def quantile(scan: Scan, q: float) -> float | None:
    """The ``q`` quantile, linear (numpy's and torch.quantile's default): with ``p = q (n - 1)``,
    ``x_(floor p) + (p - floor p)(x_(floor p + 1) - x_(floor p))``, taken from the nearer
    order statistic as ``torch.lerp`` does; ``None`` without values.

    >>> quantile(lambda wanted: [[part(x, d) for d in wanted] for x in (np.array([0.4, 0.1, 0.3]), np.array([0.2, 0.5]))], 0.7)
    0.38
    """

    def ranks(n: int) -> tuple[int, ...]:
        lo = math.floor(q * (n - 1))
        return (lo, min(lo + 1, n - 1))

    n, found = order_statistics(scan, ranks)
    if not n:
        return None
    a, b = found
    t = q * (n - 1) - math.floor(q * (n - 1))
    return a + (b - a) * t if t < 0.5 else b - (b - a) * (1 - t)
