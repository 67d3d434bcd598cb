"""How the `grpo` command tunes its own process: every tweak here, behind one switch.

The library leaves its host alone; only the console script (:func:`grpo_cli.cli.main`) calls
:func:`tune`, before numpy and pyarrow are imported. ``GRPO_TUNING=0`` in the environment turns
every tweak off: results are the same, only the run is slower. What each one buys:

- one malloc heap that keeps freed memory (:func:`keep_freed_memory`): a stream that allocates
  per batch reuses pages instead of faulting in fresh ones, on every thread;
- pyarrow's buffers from that heap (``ARROW_DEFAULT_MEMORY_POOL=system``): decoded columns and
  numpy's arrays reuse the same pages;
- numpy's arrays on 4 KiB pages (``NUMPY_MADVISE_HUGEPAGE=0``): no whole huge page cleared, or
  handed back cold by a VM's balloon, on first touch;
- one BLAS thread (``OPENBLAS_NUM_THREADS=1``): no command multiplies matrices, so its threads
  would only spin;
- no cyclic garbage collection while start-up imports, then start-up's objects frozen out of
  the collector's walks (:func:`start_up_done`): collections of objects that live for the run;
- pandas hidden from the run (:class:`WithoutPandas`): pyarrow imports it on its first numpy
  conversion only to recognise pandas objects, and no command uses pandas;
- a quick exit (:func:`quick_exit`): exit handlers run and output is flushed, but the
  interpreter does not unload numpy and pyarrow, which frees nothing the kernel would not.

Each variable a user sets stands: the tweak only fills in what is unset.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import errno
import gc
import io
import os
import sys

SWITCH = "GRPO_TUNING"  # "0": no tweak at all
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8
KEEP_BYTES = (1 << 31) - 1  # the largest value mallopt takes (a C int)


def enabled() -> bool:
    """Whether the tweaks are on (``GRPO_TUNING`` unset, or anything but ``0``)."""
    return os.environ.get(SWITCH, "1") != "0"


def keep_freed_memory() -> bool:
    """Ask glibc to serve allocations from one heap for every thread (unless
    ``MALLOC_ARENA_MAX`` is set) and to keep freed memory, and pyarrow (imported after this) to
    allocate from that heap (unless ``ARROW_DEFAULT_MEMORY_POOL`` is set); True if glibc
    agreed (False on other C libraries, where nothing changes)."""
    try:
        libc = ctypes.CDLL(None)  # this process's own symbols, glibc's among them
        settings = [(M_MMAP_THRESHOLD, KEEP_BYTES), (M_TRIM_THRESHOLD, KEEP_BYTES)]
        if "MALLOC_ARENA_MAX" not in os.environ:
            settings.append((M_ARENA_MAX, 1))
        kept = all(libc.mallopt(option, value) for option, value in settings)
    except (OSError, AttributeError):
        return False
    if kept:
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    return kept


class WithoutPandas:
    """An import hook under which pandas is not installed (for the command's own process)."""

    @staticmethod
    def find_spec(name: str, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("the grpo command does not use pandas", name=name)
        return None


_paused = False  # the collector, by tune(), until start_up_done()


def tune() -> None:
    """Apply every tweak (see the module's docstring), unless ``GRPO_TUNING=0``."""
    global _paused
    if not enabled():
        return
    gc.disable()
    _paused = True
    keep_freed_memory()
    os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, WithoutPandas)


def start_up_done() -> None:
    """Collect cyclic garbage as usual from here on, start-up's objects frozen out of the walks,
    if :func:`tune` paused the collector (a host that runs the app itself keeps its own)."""
    global _paused
    if _paused:
        gc.freeze()
        gc.enable()
        _paused = False


class ClosedStdout(io.TextIOBase):
    """Stdout when the process started without descriptor 1 (``>&-``): writing to it is an
    error (``presets``, ``--version``, ``--help`` print there), never a silent no-op."""

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "stdout is closed")


def drop_stdout() -> None:
    """Point stdout at /dev/null: whatever is still buffered for it is discarded at exit."""
    if sys.stdout is None or isinstance(sys.stdout, ClosedStdout):  # closed when we started: descriptor 1 is not ours
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


_exit_code: int | None = None  # set by quick_exit(); the handler below leaves with it


def quick_exit(code: int) -> None:
    """Leave with ``code``: exit handlers registered after this module was imported run as usual
    (Ray's shutdown, say), then buffered output is flushed and the process ends without the
    interpreter's teardown (with ``GRPO_TUNING=0``, with it). A reader that closed stdout
    before the last of it was flushed ends the run quietly, 141."""
    global _exit_code
    _exit_code = code
    sys.exit(code)


@atexit.register  # registered when this module is first imported, so it runs last
def _leave() -> None:
    if _exit_code is None:  # not leaving through quick_exit()
        return
    code = _exit_code
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        drop_stdout()
        code = code or 141
    except (AttributeError, ValueError):  # no stdout, or closed
        pass
    if enabled() or code != _exit_code:
        with contextlib.suppress(AttributeError, ValueError, OSError):
            sys.stderr.flush()
        os._exit(code)
