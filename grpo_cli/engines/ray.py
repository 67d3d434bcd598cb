"""The Ray engine: the local engine's primitives, with the per-batch kernels run in Ray tasks.

Work is split by input file: every pass runs one streaming task per file, which reads the
file's batches, runs the kernel on each and yields the results in order. Pass 1's results
(the runs of the ids and the float64 rewards, at most 16 bytes a row) are gathered so that
the group statistics are computed exactly as the local engine computes them, in row order.
The driver merges the partial summaries in row order. One output file (``-o``) is written by the driver,
batch by batch in input order; with one output per input file, the driver stages each (its
temporary file made beside its target, with the run's other outputs) and the file's task
writes into it; all are committed together at the end, or removed if the run fails or is
stopped (its tasks cancelled first). The same writer sees the same batches: files and summaries are byte-identical to the
local engine's. A
file is not split further: its batches stream from one task, since splitting it by row group
would change the row groups written.

Signals: Ray's code may swallow the exception that SIGINT's or SIGTERM's handler raises, or
turn it into another (:func:`_signals_kept` raises it again). Starting and stopping Ray are
never cut short by a signal (:func:`_signals_held`: held, then raised again), which would
leave Ray's processes running; the SIGTERM handler that ``ray.init`` sets for itself is undone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np
import pyarrow as pa

from ..errors import RECEIVED, GrpoError, UsageError
from ..io import Layout, Sink, Source, Staged
from ..io.formats import first_line
from .base import Mapped, row_labeller
from .local import LocalEngine, _annotated_schema, output_batch, run_kernel

if TYPE_CHECKING:
    from ..plan import Output

INSTALL = "pip install 'grpo-cli[ray]'"
CONNECT_SECONDS = 10  # how long a cluster's address may take to answer


def _ray():
    """The ``ray`` module, or a usage error that says how to install it."""
    try:
        import ray
    except ImportError:
        raise UsageError(f"`engine` 'ray' needs Ray, which is not installed: {INSTALL}") from None
    return ray


def _part_results(
    source: Source, k: int, first_row: int, prompt: str | None, kernel: Callable, args: tuple, columns: list[str], carry: bool, batch_rows: int
) -> Iterator[tuple[pa.RecordBatch, Any]]:
    """Part ``k``'s batches and the kernel's result on each (when the columns are not carried,
    only the batch's row count travels: :func:`_rows_only`)."""
    label = row_labeller(source, prompt)
    read = source.read_schema(columns)
    for _, batch in source.iter_batches(batch_rows, None if carry else columns, only=k):
        yield batch if carry else batch.num_rows, run_kernel(source, label, kernel, args, read, k, first_row, batch)
        first_row += batch.num_rows


def _rows_only(rows: int) -> pa.RecordBatch:
    """A batch of ``rows`` rows and no columns (a pickled one arrives with none: pyarrow keeps
    the row count of a batch without columns only in memory)."""
    return pa.record_batch([pa.nulls(rows)], names=["rows"]).select([])


def _write_part(
    source: Source,
    k: int,
    first_row: int,
    prompt: str | None,
    kernel: Callable,
    args: tuple,
    columns: list[str],
    batch_rows: int,
    target: str,
    into: Path,
    fmt: str,
    schema: pa.Schema,
    layout: Layout,
) -> tuple[list, int]:
    """Part ``k``'s output, written by this task into ``into``, the temporary file that the
    driver staged for ``target``; its partial summaries and rows."""
    sink = Sink(target, fmt, schema, layout, into=into)
    label = row_labeller(source, prompt)
    try:
        partials = []
        for batch, written in _part_results(source, k, first_row, prompt, kernel, args, columns, True, batch_rows):
            partials.append(written.partial)
            sink.write(output_batch(source, label, k, first_row, batch, written, schema))
            first_row += batch.num_rows
        sink.close()
    except BaseException:
        sink.discard()
        raise
    return partials, sink.rows


@contextlib.contextmanager
def _signals_kept() -> Iterator[None]:
    """Around Ray's calls: Ray's code may swallow the exception that a signal's handler raised,
    or turn it into another (a SystemError); either way the signal's interrupt is raised."""
    try:
        yield
    except Exception:
        if RECEIVED:
            raise RECEIVED[0] from None
        raise
    if RECEIVED:  # swallowed
        raise RECEIVED[0]


@contextlib.contextmanager
def _signals_held(hold: bool = True) -> Iterator[None]:
    """SIGINT and SIGTERM while the body runs are held, then raised again once it has run to
    its end; without ``hold`` they act at once. Either way the handlers the body sets
    (``ray.init`` sets one for SIGTERM) are undone. On the main thread; elsewhere no handler
    can be set."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {
        sig: signal.signal(sig, lambda signum, frame: held.append(signum)) if hold else signal.getsignal(sig)
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        if held:
            signal.raise_signal(held[0])


def _processes() -> dict[int, tuple[int, str, str]]:
    """Each running process's parent, name and start time, by id (Linux's /proc; elsewhere
    none). One that has ended and waits to be reaped is not running."""
    found = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                head, _, tail = f.read().rpartition(")")
        except OSError:
            continue
        fields = tail.split()  # after the name: state, parent, ..., start time (the 20th)
        if fields[0] != "Z":
            found[int(entry)] = (int(fields[1]), head.partition("(")[2], fields[19])
    return found


def _children() -> set[int]:
    """This process's children."""
    return {pid for pid, (parent, _, _) in _processes().items() if parent == os.getpid()}


def _below(roots: set[int]) -> set[tuple[int, str]]:
    """``roots`` and every process below them, as (id, start time)."""
    processes = _processes()
    found, below = set(), [pid for pid in roots if pid in processes]
    while below:
        pid = below.pop()
        found.add((pid, processes[pid][2]))
        below += [child for child, (parent, _, _) in processes.items() if parent == pid]
    return found


def _kill(started: set[tuple[int, str]]) -> None:
    """Kill those of ``started`` still running: Ray gives its raylet one second to stop its
    agents, and an agent left behind waits minutes for the GCS server, which is gone; a
    ``ray.init`` cut short leaves what it started."""
    running = _processes()
    for pid, start in started:
        if pid in running and running[pid][2] == start:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _check_reachable(address: str, given: str) -> None:
    """Refuse in one line a ``host:port`` (or ``ray://host:port``) ``address`` that does not
    answer within :data:`CONNECT_SECONDS` (Ray would wait for minutes); ``given`` names where
    it came from. Other forms (``auto``, ``local``) are Ray's to check."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or "/" in host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS).close()
    except OSError as exc:
        raise GrpoError(f"{given} {address!r}: cannot connect ({exc.strerror or exc})") from None


class RayEngine(LocalEngine):
    """Runs each input file's batches in a Ray task, on the cluster at ``address`` (default:
    ``RAY_ADDRESS`` if set, else a local Ray started for the run), connected to when the run
    first needs it: an address that does not answer, or that Ray refuses, is one line. Ray's
    own log lines are not shown. Leaving the engine (the run's end, a failure, an interrupt)
    cancels the tasks still running if the run did not finish, and stops the local Ray it
    started, whose processes are gone when it returns."""

    fork_safe = False

    def __init__(self, *, address: str | None = None, **options):
        super().__init__(**options)
        self.ray = _ray()
        self.address = address
        self.connected = False  # whether this engine called ray.init (and so calls ray.shutdown)
        self.local = False  # whether that started a local Ray (whose stop ends its tasks)
        self.children: set[int] = set()  # this process's children before ray.init: not Ray's
        self.tasks: list = []  # every task started, cancelled if the run stops
        self._stream = self.ray.remote(num_returns="streaming")(_part_results)
        self._read = self.ray.remote(lambda source, k, columns: source.read_part_columns(k, columns))
        self._write_task = self.ray.remote(_write_part)

    def _connect(self) -> None:
        """Connect to the cluster (see the class), unless this process already is."""
        if self.connected or self.ray.is_initialized():
            return
        address = self.address or os.environ.get("RAY_ADDRESS") or None
        given = "`ray_address`" if self.address else "RAY_ADDRESS"
        if address is not None:
            _check_reachable(address, given)
        self.connected, self.local = True, address is None
        self.children = _children()  # this process's own, before Ray starts its processes
        try:
            with _signals_kept(), _signals_held(hold=address is None):  # a local Ray's start cut short leaves what it started
                self.ray.init(address=self.address, logging_level=logging.CRITICAL, log_to_driver=False, include_dashboard=False)
        except SystemExit:  # SIGTERM reached the handler ray.init sets for itself: it goes to the run's
            signal.raise_signal(signal.SIGTERM)
            raise
        except (ValueError, ConnectionError, RuntimeError) as exc:
            where = f"{given} {address!r}" if address is not None else "a local Ray"
            raise (UsageError if isinstance(exc, ValueError) else GrpoError)(f"{where}: {first_line(exc)}") from None

    def __exit__(self, kind, exc, traceback) -> None:
        """Cancel the tasks still running if the run did not finish, and stop the local Ray
        that this engine started (``ray.shutdown`` only disconnects from a cluster it did not
        start), every process it started ended (:func:`_kill`); a signal meanwhile is raised
        after. Arrow's pool gets its size back, as after a local run."""
        tasks, self.tasks = self.tasks, []
        try:
            with _signals_held():
                # a cluster it did not start keeps its tasks unless cancelled; a local Ray's stop ends
                # them (cancelling them there too raced with the stop: Ray's task manager aborted the run)
                for task in self._unfinished(tasks) if exc is not None and not (self.connected and self.local) else []:
                    with contextlib.suppress(Exception):
                        self.ray.cancel(task)
                if self.connected:
                    self.connected = False
                    started = _below(_children() - self.children)
                    self.ray.shutdown()
                    _kill(started)
        finally:
            super().__exit__(kind, exc, traceback)

    def _unfinished(self, tasks: list) -> list:
        """Those of ``tasks`` not finished yet: cancelling a task that has just finished races
        with Ray's own record of its end, and Ray aborts the process (a streaming task has
        finished when its ``completed()`` ref is ready)."""
        if not tasks:  # (ray.wait would start a local Ray)
            return []
        ends = [task.completed() if isinstance(task, self.ray.ObjectRefGenerator) else task for task in tasks]
        try:
            ready, _ = self.ray.wait(ends, num_returns=len(ends), timeout=0, fetch_local=False)
        except Exception:  # noqa: BLE001  (a cluster gone: nothing to cancel either way)
            return tasks
        finished = set(ready)
        return [task for task, end in zip(tasks, ends) if end not in finished]

    def _started(self, refs: list) -> list:
        """``refs``, the tasks just started, kept to cancel if the run stops."""
        self.tasks += refs
        return refs

    def _get(self, ref):
        """A task's result; a task's failure raises the error it raised (one line, no Ray traceback)."""
        try:
            with _signals_kept():
                return self.ray.get(ref)
        except self.ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, GrpoError):
                raise exc.cause from None
            raise

    def _per_part(self, source: Source, args: tuple, *, written: bool) -> tuple[object, object, list[int], int]:
        """What every per-file task takes: the source and the kernel's arguments in the object
        store (put once), each file's first row, and the batch size (for rows ``written`` or not)."""
        self._connect()
        starts = np.cumsum(source.row_counts) - source.row_counts
        with _signals_kept():
            return self.ray.put(source), self.ray.put(args), starts.tolist(), self.batch_rows or source.batch_rows(written=written)

    def map_batches(
        self,
        source: Source,
        kernel: Callable,
        *args: Any,
        columns: list[str],
        prompt: str | None = None,
        carry: bool = False,
        held: pa.Table | None = None,
    ) -> Iterator[Mapped]:
        """Each part's batches from its own task, which reads every column it needs (``held``,
        the driver's copy of some, would cost more to ship than to read)."""
        source_ref, args_ref, starts, batch_rows = self._per_part(source, args, written=carry)
        streams = self._started(
            [
                self._stream.remote(source_ref, k, first_row, prompt, kernel, args_ref, columns, carry, batch_rows)
                for k, first_row in enumerate(starts)
            ]
        )

        def results() -> Iterator[tuple[int, pa.RecordBatch, Any]]:
            for k, stream in enumerate(streams):
                while (ref := _next(stream)) is not None:
                    batch, result = self._get(ref)
                    yield k, batch if carry else _rows_only(batch), result

        return self._reported(source, results())

    def write_pass(
        self,
        source: Source,
        output: Output,
        new_fields: list[pa.Field],
        kernel: Callable,
        *args: Any,
        columns: list[str],
        prompt: str | None = None,
        held: pa.Table | None = None,
    ) -> list:
        """With one output per input file, the driver stages each in :attr:`outputs` and the
        file's task writes into it (if one failed, the run fails once every task has finished,
        and leaving :attr:`outputs` removes them all)."""
        if not output.per_input:
            return super().write_pass(source, output, new_fields, kernel, *args, columns=columns, prompt=prompt, held=held)
        source_ref, args_ref, starts, batch_rows = self._per_part(source, args, written=True)
        staged = [Staged(target, self.outputs) for target in output.targets]
        tasks = self._started(
            [
                self._write_task.remote(
                    source_ref,
                    k,
                    starts[k],
                    prompt,
                    kernel,
                    args_ref,
                    columns,
                    batch_rows,
                    output.targets[k],
                    staged[k].temporary,
                    output.format,
                    _annotated_schema(schema, new_fields),
                    output.layout,
                )
                for k, schema in enumerate(source.stored_schemas)
            ]
        )
        partials, failure, done = [], None, 0
        for k, task in enumerate(tasks):
            try:
                part_partials, rows = self._get(task)
            except Exception as exc:  # the first failure is reported, once every task has finished
                failure = failure or exc
                continue
            partials += part_partials
            done += rows
            if self.progress is not None:
                self.progress(done, int(source.row_counts.sum()), f"files {k + 1}/{len(tasks)}")
        if failure is not None:
            raise failure
        return partials

    def read_columns(self, source: Source, columns: list[str]) -> pa.Table:
        """Each part's columns read by a task of its own, joined in row order."""
        self._connect()
        with _signals_kept():
            source_ref = self.ray.put(source)
        tasks = self._started([self._read.remote(source_ref, k, columns) for k in range(len(source.parts))])
        return pa.concat_tables([self._get(task) for task in tasks])


def _next(stream) -> Any:
    """The next result of a streaming task, or None at its end."""
    with _signals_kept():
        return next(stream, None)
