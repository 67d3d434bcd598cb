"""The local engine: record batches streamed in this process, kernels on a few threads.

:meth:`LocalEngine.map_batches` reads batch after batch on this thread while up to
``threads`` kernels run on worker threads (numpy and pyarrow release the GIL), the results
yielded in row order; :meth:`LocalEngine.write_pass` writes each batch on a thread of its own,
a batch behind, while the next ones are read and computed. Memory is bounded by the batches
in flight, not by the input.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa

from . import kernels
from .base import Engine, Mapped, labelled, row_labeller
from ..io import Sink, Source, conform
from ..parallel import ordered_map

if TYPE_CHECKING:
    from ..plan import Output

WRITES_QUEUED = 1  # batches waiting for the writer thread besides the one it writes


class LocalEngine(Engine):
    """Streams record batches in this process; ``threads`` workers (default: one per core).
    Given ``threads`` also bounds Arrow's pool, which decodes the input, while the run lasts."""

    _arrow_threads: int | None = None  # Arrow's pool size before the run, while it is bounded

    def __enter__(self) -> LocalEngine:
        if self.threads is not None and self.threads < pa.cpu_count():
            self._arrow_threads = pa.cpu_count()
            pa.set_cpu_count(self.threads)
        return self

    def __exit__(self, kind, exc, traceback) -> None:
        if self._arrow_threads is not None:
            pa.set_cpu_count(self._arrow_threads)
            self._arrow_threads = None

    def read_columns(self, source: Source, columns: list[str]) -> pa.Table:
        return source.read_columns(columns)

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
        label = row_labeller(source, prompt)
        read = source.read_schema(columns)

        batch_rows = self.batch_rows or source.batch_rows(self.workers, written=carry)

        def numbered() -> Iterator[tuple[int, int, pa.RecordBatch]]:
            first_row = 0
            for part, batch in source.iter_batches(batch_rows, None if carry else columns, held=held, threads=self.workers):
                yield first_row, part, batch
                first_row += batch.num_rows

        def work(item: tuple[int, int, pa.RecordBatch]) -> tuple[int, pa.RecordBatch, Any]:
            first_row, part, batch = item
            return part, batch, run_kernel(source, label, kernel, args, read, part, first_row, batch)

        return self._reported(source, ordered_map(work, numbered(), self.workers))

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
        partials = []

        def written() -> Iterator[Mapped]:
            for mapped in self.map_batches(source, kernel, *args, columns=columns, prompt=prompt, carry=True, held=held):
                partials.append(mapped.result.partial)
                yield mapped

        self._write(source, output, new_fields, row_labeller(source, prompt), written())
        return partials

    def _write(self, source: Source, output: Output, new_fields: list[pa.Field], label: Callable[[int], str], batches: Iterable) -> None:
        """Write ``(part, first row, batch, kernel result)`` to the output's targets: the rows
        of each batch that the result keeps, with its columns set (:func:`output_batch`), to
        one file with every input column (in its unified type; null where a file lacks it), or
        per input file with that file's own columns.

        A column of the input with the same name as a new one is replaced in place; the others
        are appended in order. Every output is written to a temporary file staged in
        :attr:`outputs`, which the caller commits (see :class:`~grpo_cli.io.Outputs`). The
        writing runs on a thread of its own, a batch behind the reading; the sinks encode
        small row groups on the worker threads too (:class:`~grpo_cli.io.parquet_writer.RowGroupWriter`).
        """
        inputs = source.stored_schemas if output.per_input else [source.output_schema]
        schemas = [_annotated_schema(s, new_fields) for s in inputs]
        targets = output.targets
        sinks: list[Sink] = []

        def sink(index: int) -> Sink:
            while len(sinks) <= index:
                if sinks:
                    sinks[-1].close()
                sinks.append(Sink(targets[len(sinks)], output.format, schemas[len(sinks)], output.layout, self.outputs, self.workers))
            return sinks[index]

        def write(part: int, first_row: int, batch: pa.RecordBatch, result: kernels.Written) -> None:
            k = part if output.per_input else 0
            sink(k).write(output_batch(source, label, part, first_row, batch, result, schemas[k]))

        with ThreadPoolExecutor(1) as writer:  # in order, on a thread of its own, while this one reads the next batches
            pending: deque = deque()
            for item in batches:
                pending.append(writer.submit(write, *item))
                while len(pending) > WRITES_QUEUED:
                    pending.popleft().result()
            pending.append(writer.submit(lambda: sink(len(targets) - 1).close()))
            for written in pending:
                written.result()


def run_kernel(
    source: Source, label: Callable[[int], str], kernel: Callable, args: tuple, read: pa.Schema, part: int, first_row: int, batch: pa.RecordBatch
):
    """``kernel`` on one batch of part ``part`` whose first row is ``first_row``: its ``read``
    columns in their unified types; a bad row named by ``label``."""
    return labelled(lambda row: label(first_row + row), lambda: kernel(conform(batch, read, source.parts[part].name), first_row, *args))


def output_batch(
    source: Source, label: Callable[[int], str], part: int, first_row: int, batch: pa.RecordBatch, result: kernels.Written, schema: pa.Schema
) -> pa.RecordBatch:
    """The rows of ``batch`` (of part ``part``, its first row the dataset's ``first_row``) that
    the kernel's ``result`` keeps, with its columns set, in the output ``schema``; a value that
    the schema cannot hold is named by ``label`` at its row."""
    kept, columns = result.applied(batch)

    def input_row(row: int) -> int:  # the kept row's row in the input, worked out only for an error
        return first_row + (row if result.keep is None else int(np.flatnonzero(result.keep)[row]))

    return labelled(lambda row: label(input_row(row)), conform, _set_columns(kept, columns), schema, source.parts[part].name)


def _annotated_schema(base: pa.Schema, new_fields: list[pa.Field]) -> pa.Schema:
    out = base
    for f in new_fields:
        i = out.get_field_index(f.name)
        out = out.set(i, f) if i >= 0 else out.append(f)
    return out


def _set_columns(batch: pa.RecordBatch, columns: dict[str, pa.Array]) -> pa.RecordBatch:
    for name, values in columns.items():
        i = batch.schema.get_field_index(name)
        batch = batch.set_column(i, name, values) if i >= 0 else batch.append_column(name, values)
    return batch
