"""The Ray engine: the local engine's primitives, with the per-batch kernels run in Ray tasks.

Work is split by input file: every pass runs one streaming task per file, which reads the
file's batches, runs the kernel on each and yields the results in order. Pass 1's results
(the runs of the ids and the float64 rewards, at most 16 bytes a row) are gathered so that
the group statistics are computed exactly as the local engine computes them, in row order.
The driver merges the partial summaries in row order. One output file (``-o``) is written by the driver,
batch by batch in input order; with one output per input file, each file's task writes it to
a temporary file and the driver stages them all with the run's other outputs, committed
together at the end (or removed, if one task failed). The same writer sees the same batches: files and summaries are byte-identical to the
local engine's. A
file is not split further: its batches stream from one task, since splitting it by row group
would change the row groups written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np
import pyarrow as pa

from ..errors import GrpoError, UsageError
from ..io import Layout, Sink, Source
from .base import Mapped, row_labeller
from .local import LocalEngine, _annotated_schema, output_batch, run_kernel

if TYPE_CHECKING:
    from ..plan import Output

INSTALL = "pip install 'grpo-cli[ray]'"


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
    fmt: str,
    schema: pa.Schema,
    layout: Layout,
) -> tuple[Sink, list, int]:
    """Part ``k``'s output, written by this task to a temporary file beside ``target`` (the
    driver stages it with the run's other outputs); its partial summaries and rows."""
    sink = Sink(target, fmt, schema, layout)
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
    return sink, partials, sink.rows


class RayEngine(LocalEngine):
    """Runs each input file's batches in a Ray task; connects to the cluster at ``address``
    (default: ``RAY_ADDRESS`` if set, else a local Ray started here)."""

    def __init__(self, *, address: str | None = None, **options):
        super().__init__(**options)
        self.ray = _ray()
        if not self.ray.is_initialized():
            self.ray.init(address=address, logging_level="WARNING", log_to_driver=False, include_dashboard=False)
        self._stream = self.ray.remote(num_returns="streaming")(_part_results)
        self._read = self.ray.remote(lambda source, k, columns: source.read_part_columns(k, columns))
        self._write_task = self.ray.remote(_write_part)

    def _get(self, ref):
        """A task's result; a task's failure raises the error it raised (one line, no Ray traceback)."""
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, GrpoError):
                raise exc.cause from None
            raise

    def _per_part(self, source: Source, args: tuple) -> tuple[object, object, list[int], int]:
        """What every per-file task takes: the source and the kernel's arguments in the object
        store (put once), each file's first row, and the batch size."""
        starts = np.cumsum(source.row_counts) - source.row_counts
        return self.ray.put(source), self.ray.put(args), starts.tolist(), self.batch_rows or source.batch_rows

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
        source_ref, args_ref, starts, batch_rows = self._per_part(source, args)
        streams = [
            self._stream.remote(source_ref, k, first_row, prompt, kernel, args_ref, columns, carry, batch_rows) for k, first_row in enumerate(starts)
        ]

        def results() -> Iterator[tuple[int, pa.RecordBatch, Any]]:
            for k, stream in enumerate(streams):
                for ref in stream:
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
        """With one output per input file, each file's task writes it; the driver stages them
        all in :attr:`outputs` once every task has finished (if one failed, the run fails and
        leaving :attr:`outputs` removes them)."""
        if not output.per_input:
            return super().write_pass(source, output, new_fields, kernel, *args, columns=columns, prompt=prompt, held=held)
        source_ref, args_ref, starts, batch_rows = self._per_part(source, args)
        tasks = [
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
                output.format,
                _annotated_schema(schema, new_fields),
                output.layout,
            )
            for k, schema in enumerate(source.stored_schemas)
        ]
        partials, failure, done = [], None, 0
        for k, task in enumerate(tasks):
            try:
                sink, part_partials, rows = self._get(task)
            except Exception as exc:  # the first failure is reported, once every task has finished
                failure = failure or exc
                continue
            self.outputs.add(sink)
            partials += part_partials
            done += rows
            if self.progress is not None:
                self.progress(done, int(source.row_counts.sum()), f"files {k + 1}/{len(tasks)}")
        if failure is not None:
            raise failure
        return partials

    def read_columns(self, source: Source, columns: list[str]) -> pa.Table:
        """Each part's columns read by a task of its own, joined in row order."""
        source_ref = self.ray.put(source)
        return pa.concat_tables([self._get(self._read.remote(source_ref, k, columns)) for k in range(len(source.parts))])
