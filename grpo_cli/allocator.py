"""The allocator setting the `grpo` command runs with (the library leaves its host's alone).

numpy takes every array from glibc's malloc. By default glibc hands arrays of more than
about 128 KiB to the kernel on free and maps fresh pages for the next one, so a stream
that allocates per batch spends much of its time in page faults (measured: a third of the
wall time of a summary-only `grpo objective` on this project's benchmark). Keeping freed
memory in the heap lets the next batch reuse it; the peak resident memory is the same,
since the stream's working set does not grow. One heap (one arena) for every thread: glibc
gives each thread an arena of its own, so a block freed by one was not reused by another, and
an arena's heaps are 64 MiB at most, so larger blocks were mapped fresh on another thread.

pyarrow's buffers come from the same heap (its ``system`` pool): its default pool, mimalloc,
hands freed pages back to the kernel too, so the columns a run decodes, and numpy's arrays
after them, were each laid on fresh pages the kernel must zero first (measured: 0.55-0.89 s of
kernel time in a 10M-row `grpo advantages -o`, 0.29-0.36 s from one heap).

numpy marks its arrays of 4 MiB or more for transparent huge pages. A fresh huge page is
cleared whole when first touched, and on a VM that hands free memory back to its host
(virtio-balloon free page reporting, as this project's benchmark machine does) it comes back
cold: 160 MB of arrays filled in 0.24-0.37 s a few seconds after the last run, 0.02 s right
after it, and in a steady 0.06-0.08 s on 4 KiB pages (:func:`small_pages`).
"""

from __future__ import annotations

import ctypes
import os

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8
KEEP_BYTES = (1 << 31) - 1  # the largest value mallopt takes (a C int)


def keep_freed_memory() -> bool:
    """Ask glibc to serve allocations from one heap, for every thread (unless
    ``MALLOC_ARENA_MAX`` says otherwise), and not return freed memory to the kernel, and
    pyarrow (imported after this) to allocate from that heap unless ``ARROW_DEFAULT_MEMORY_POOL``
    says otherwise; True if glibc agreed (False on other C libraries, where nothing changes)."""
    try:
        libc = ctypes.CDLL(None)  # this process's own symbols, glibc's among them
        settings = [(M_MMAP_THRESHOLD, KEEP_BYTES), (M_TRIM_THRESHOLD, KEEP_BYTES)]
        if "MALLOC_ARENA_MAX" not in os.environ:  # a user's own arena count stands (many cores: less waiting on one lock)
            settings.append((M_ARENA_MAX, 1))
        kept = all(libc.mallopt(option, value) for option, value in settings)
    except (OSError, AttributeError):
        return False
    if kept:
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    return kept


def small_pages() -> None:
    """Ask numpy (imported after this) to leave its arrays on 4 KiB pages, unless
    ``NUMPY_MADVISE_HUGEPAGE`` says otherwise (1: numpy's default, huge pages)."""
    os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
