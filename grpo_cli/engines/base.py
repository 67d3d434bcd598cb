"""The engine interface: the primitives every engine (:mod:`.local`, :mod:`.ray`) offers, and
how errors name rows.

A command is built from three primitives (:mod:`grpo_cli.passes` and the commands'
modules): :meth:`Engine.read_columns` (the few columns of every row a first pass needs),
:meth:`Engine.map_batches` (a kernel over every record batch) and :meth:`Engine.write_pass`
(a kernel over every batch, each batch written with its new columns). An engine decides
where batches are read, computed and written; results always come back in row order, so the
numbers never depend on the threads, the workers or the batch size.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, TYPE_CHECKING, Any, Callable, Iterator, NamedTuple

import numpy as np
import pyarrow as pa

from ..errors import InputError, RowError, UsageError, shortened
from ..io import Outputs, Source
from ..parallel import default_threads

if TYPE_CHECKING:
    from ..plan import Output

Progress = Callable[[int, int, str], None]


class Mapped(NamedTuple):
    """A kernel's result on one record batch: the batch's ``part`` (input file), its
    ``first_row`` in the dataset, the ``batch`` read, and the kernel's ``result``."""

    part: int
    first_row: int
    batch: pa.RecordBatch
    result: Any


class Engine(ABC):
    """Runs kernels over the record batches of a :class:`~grpo_cli.io.Source`.

    A kernel is a module-level function ``kernel(batch, first_row, *args)`` (it pickles, so
    an engine may run it elsewhere): ``batch`` holds the columns it reads, in their unified
    types, ``first_row`` is the batch's first row in the dataset; it raises
    :class:`~grpo_cli.errors.RowError` with a row of its batch, which the engine names
    (:func:`row_labeller`). ``threads`` workers (default: one per core this process may use) and
    ``batch_rows`` rows a batch (default: :meth:`Source.batch_rows` for its threads);
    ``progress(rows done, rows in all, pieces)`` is called as batches finish, ``pieces`` saying
    how many stored pieces are done (``row groups 3/12``). Written outputs are staged in ``outputs``
    (temporary files), for the caller to commit with its own (the summary JSON) or to leave,
    which removes them. A run uses the engine as a context manager (inside ``outputs``):
    leaving it stops what the engine started for the run.
    """

    fork_safe: ClassVar[bool] = True  # whether a run may fork helper processes from this one (a Ray driver's gRPC threads: no)

    def __init__(self, *, threads: int | None = None, batch_rows: int | None = None, progress: Progress | None = None):
        for name, value in (("threads", threads), ("batch_rows", batch_rows)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise UsageError(f"`{name}` must be an integer >= 1 (found {value!r})")
        self.threads = threads
        self.batch_rows = batch_rows
        self.progress = progress
        self.outputs = Outputs()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, kind, exc, traceback) -> None:  # noqa: B027  (a hook: the local engine starts nothing)
        """Stop what the engine started for the run."""

    @property
    def workers(self) -> int:
        """Threads of this process for work on arrays already in memory (and the local batches)."""
        return self.threads or default_threads()

    @abstractmethod
    def read_columns(self, source: Source, columns: list[str]) -> pa.Table:
        """The named columns of every row, in their unified types and in row order."""

    @abstractmethod
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
        """``kernel(batch, first_row, *args)`` on every record batch, as :class:`Mapped`, in
        row order (several batches may be in flight meanwhile). The kernel gets the
        ``columns`` it reads; :attr:`Mapped.batch` holds them as stored, and with ``carry``
        every other column of its file too (to be written). ``prompt``: the id column that
        names a bad row; ``held``: columns of every row already in memory, not read again
        (see :meth:`Source.iter_batches`). Progress is reported as batches are yielded."""

    @abstractmethod
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
        """Run ``kernel`` (which returns a :class:`~.kernels.Written`) on every batch as
        :meth:`map_batches` does, write the rows each result keeps with its columns set
        (``new_fields``: their types; a column of the input with the same name is replaced in
        place, the others appended) to ``output``'s targets, staged in :attr:`outputs`, and
        return the results' partial summaries in row order."""

    def _reported(self, source: Source, results: Iterator[tuple[int, pa.RecordBatch, Any]]) -> Iterator[Mapped]:
        """``(part, batch, result)`` in row order as :class:`Mapped`, each batch's first row
        counted, progress reported as each is yielded (for :meth:`map_batches`)."""
        done, total = 0, int(source.row_counts.sum())
        kind, ends = source.pieces
        for part, batch, result in results:
            yield Mapped(part, done, batch, result)
            done += batch.num_rows
            if self.progress is not None:
                self.progress(done, total, f"{kind} {int(np.searchsorted(ends, done, side='right'))}/{len(ends)}")


def row_labeller(source: Source, prompt: str | None) -> Callable[[int], str]:
    """How errors name a row: ``file: row 12 (prompt id 'p3')`` (0-based in its file). The
    id is read again when an error needs it, so no per-row key is held while streaming."""

    return lambda row: row_names(source, prompt, [row])[0]


def row_names(source: Source, prompt: str | None, rows: list[int]) -> list[str]:
    """How a report names rows: ``file: row 12 (prompt id 'p3')``, the ids read once (``file:
    row 12`` where the ids cannot be read: the error is in them)."""
    try:
        keys = source.read_columns([prompt]).column(prompt).take(rows).to_pylist() if prompt is not None and rows else [None] * len(rows)
    except RowError:
        keys = [None] * len(rows)
    return [source.locate(row) if key is None else f"{source.locate(row)} (prompt id {shortened(key)!r})" for row, key in zip(rows, keys)]


def labelled(label: Callable[[int], str], fn: Callable, *args: Any) -> Any:
    """``fn(*args)``, with a :class:`RowError` turned into an error that says where its row is."""
    try:
        return fn(*args)
    except RowError as exc:
        raise InputError(f"{label(exc.row)}: {exc.detail}") from None
