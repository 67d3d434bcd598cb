"""DataFrames in, DataFrames out: the commands on data already in memory, made to chain.

``annotate_advantages`` and ``annotate_objective`` take a frame and return one of the same
kind with the command's new columns, so they chain with ``pipe``::

    out = df.pipe(annotate_advantages, config=AdvantageConfig(std="sample")).pipe(
        annotate_objective, config=ObjectiveConfig(loss="gspo")
    )

``figures=True`` returns ``(frame, figures)`` instead: the summary the command prints, from
the same run. A pyarrow ``Table`` or ``RecordBatch`` is read where it is, in memory; a
``pyarrow.dataset.Dataset`` is scanned on each pass; a ``RecordBatchReader`` (read once, and a
run reads twice) is spooled to a temporary parquet file, as stdin is. Polars and pandas
frames go in as their Arrow tables. The command's own code runs on them: the numbers are the
CLI's. A ``datasets.Dataset`` goes in as its Arrow table, ``dataset.data.table``.
"""

from __future__ import annotations

import inspect
import json
import os
import tempfile
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, TypeVar, cast

import pyarrow as pa
import pyarrow.parquet as pq

from .commands import advantages, objective
from .engines import LocalEngine
from .errors import UsageError
from .files import check_options, run
from .io import open_arrow
from .io.memory import is_dataset

if TYPE_CHECKING:
    from .commands.base import Command

Frame = TypeVar("Frame")  # what comes back is what went in
WRITES = {"source", "output", "output_dir", "output_format", "compression"}  # the frame is the source, and no file is written


def arrow_of(frame: Any) -> tuple[Any, Callable[[pa.Table], Any]]:
    """``frame`` as Arrow data that :func:`~grpo_cli.io.open_arrow` reads, and how to turn an
    annotated table back into its kind (a LazyFrame comes back lazy; a pandas DataFrame keeps
    its index; a reader or dataset comes back as one over the annotated rows, in memory)."""
    if isinstance(frame, pa.Table):
        return frame, lambda table: table
    if isinstance(frame, pa.RecordBatch):
        return frame, lambda table: table.combine_chunks().to_batches()[0]
    if isinstance(frame, pa.RecordBatchReader):
        return frame, lambda table: pa.RecordBatchReader.from_batches(table.schema, table.to_batches())
    if is_dataset(frame):
        import pyarrow.dataset as ds

        return frame, ds.dataset
    kind, library = type(frame).__name__, type(frame).__module__.split(".")[0]
    if library == "polars" and kind in ("DataFrame", "LazyFrame"):
        import polars as pl

        if kind == "LazyFrame":
            return frame.collect().to_arrow(), lambda table: cast(pl.DataFrame, pl.from_arrow(table)).lazy()  # a table gives a frame
        return frame.to_arrow(), pl.from_arrow
    if library == "pandas" and kind == "DataFrame":
        given = pa.Table.from_pandas(frame, preserve_index=False)

        def back(table: pa.Table):
            # pandas' metadata would give a column the command wrote (a string `advantage` replaced
            # by float64) its old dtype back: its entry goes, the others stay (Int64, categories...)
            written = {f.name for f in table.schema if f.name not in given.column_names or not f.type.equals(given.schema.field(f.name).type)}
            meta = table.schema.pandas_metadata
            if meta and written:
                meta["columns"] = [c for c in meta["columns"] if c["name"] not in written]
                table = table.replace_schema_metadata({**table.schema.metadata, b"pandas": json.dumps(meta).encode()})
            out = table.to_pandas()
            out.index = frame.index
            return out

        return given, back
    raise UsageError(
        f"`frame` is a pyarrow Table, RecordBatch, RecordBatchReader or Dataset, a polars DataFrame or LazyFrame, "
        f"or a pandas DataFrame (found {type(frame).__name__}); for a datasets.Dataset pass dataset.data.table"
    )


def frame_function(command: Command, doc: str) -> Callable[..., Any]:
    """``annotate_<name>``: ``command`` on a frame (see this module's docstring). Its keywords
    are the options of the command's plan (its config objects among them) but where the rows
    go, plus ``threads``, ``batch_rows`` and ``figures``."""
    name = command.__name__.rsplit(".", 1)[-1]

    def annotate(frame: Any, *, threads: int | None = None, batch_rows: int | None = None, figures: bool = False, **options: Any) -> Any:
        check_options(options, [p.name for p in keywords], f"annotate_{name}()", command.plan)
        data, back = arrow_of(frame)
        engine = LocalEngine(threads=threads, batch_rows=batch_rows)
        with tempfile.TemporaryDirectory(prefix="grpo-frame-") as folder:
            out = os.path.join(folder, "annotated.parquet")
            summary = run(name, command.plan, partial(open_arrow, data), out, engine, options)
            annotated = back(pq.read_table(out))
        return (annotated, summary) if figures else annotated

    plan = inspect.signature(command.plan).parameters
    own = inspect.signature(annotate).parameters
    keywords = [p for n, p in plan.items() if n not in WRITES]
    annotate.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [own["frame"], *keywords, *(p for n, p in own.items() if p.kind is p.KEYWORD_ONLY)], return_annotation="Frame | tuple[Frame, dict]"
    )
    annotate.__name__ = annotate.__qualname__ = f"annotate_{name}"
    annotate.__doc__ = doc
    return annotate


annotate_advantages = frame_function(
    cast("Command", advantages),
    """`grpo advantages` on a frame: ``frame`` with ``advantage`` (or the token-level columns),
of the same kind; with ``figures=True``, ``(frame, figures)``, the summary figures too. The
options: ``config``, an :class:`~grpo_cli.AdvantageConfig`, and the column options of
:func:`grpo_cli.plan.plan_advantages`; ``threads`` and ``batch_rows``.

>>> table = annotate_advantages(pa.table({"prompt_id": [0, 0, 1, 1], "reward": [1.0, 0.0, 1.0, 1.0]}))
>>> table["advantage"].to_pylist()
[1.0, -1.0, 0.0, 0.0]
>>> from grpo_cli import AdvantageConfig
>>> _, summary = annotate_advantages(table.drop_columns("advantage"), figures=True, config=AdvantageConfig(std="sample"))
>>> summary["zero_variance_groups"]["count"]
1
""",
)
annotate_objective = frame_function(
    cast("Command", objective),
    """`grpo objective` on a frame: ``frame`` with the per-row objective columns, of the same
kind; with ``figures=True``, ``(frame, figures)``, the summary figures too. The options:
``config``, an :class:`~grpo_cli.ObjectiveConfig`; ``advantage_config``, an
:class:`~grpo_cli.AdvantageConfig` when the advantages come from the rewards; the column
options of :func:`grpo_cli.commands.objective.plan_objective`; ``threads`` and ``batch_rows``.
""",
)
