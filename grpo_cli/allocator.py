"""The allocator setting the `grpo` command runs with (the library leaves its host's alone).

numpy takes every array from glibc's malloc. By default glibc hands arrays of more than
about 128 KiB to the kernel on free and maps fresh pages for the next one, so a stream
that allocates per batch spends much of its time in page faults (measured: a third of the
wall time of a summary-only `grpo objective` on this project's benchmark). Keeping freed
memory in the heap lets the next batch reuse it; the peak resident memory is the same,
since the stream's working set does not grow.
"""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
KEEP_BYTES = (1 << 31) - 1  # the largest value mallopt takes (a C int)


def keep_freed_memory() -> bool:
    """Ask glibc to serve allocations from its heap and not return freed memory to the
    kernel; True if it agreed (False on other C libraries, where nothing changes)."""
    try:
        libc = ctypes.CDLL(None)  # this process's own symbols, glibc's among them
        return bool(libc.mallopt(M_MMAP_THRESHOLD, KEEP_BYTES) and libc.mallopt(M_TRIM_THRESHOLD, KEEP_BYTES))
    except (OSError, AttributeError):
        return False
