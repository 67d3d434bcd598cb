"""DataFrames in, DataFrames out: the commands on data already in memory, made to chain.

``annotate_advantages`` and ``annotate_objective`` take a frame and return one of the same
kind with the command's new columns, so they chain with ``pipe``::

    out = df.pipe(annotate_advantages, std="sample").pipe(annotate_objective, loss="gspo")

``figures=True`` returns ``(frame, figures)`` instead: the summary the command prints, from
the same run. A pyarrow ``Table`` or ``RecordBatch`` is read where it is, in memory; a
``pyarrow.dataset.Dataset`` is scanned on each pass; a ``RecordBatchReader`` (read once, and a
run reads twice) is spooled to a temporary parquet file, as stdin is. Polars and pandas
frames go in as their Arrow tables. The command's own code runs on them: the numbers are the
CLI's. A ``datasets.Dataset`` goes in as its Arrow table, ``dataset.data.table``.
"""

from __future__ import annotations

import inspect
import os
import tempfile
from dataclasses import fields
from functools import partial
from typing import Any, Callable, Literal, TypeVar, cast, overload

import pyarrow as pa
import pyarrow.parquet as pq

from .config import AdvantageConfig
from .engines import LocalEngine
from .errors import UsageError, check_keywords
from .files import run
from .io import open_arrow
from .io.memory import is_dataset
from .objective.config import ObjectiveConfig
from .plan import objective_estimator, plan_advantages

Frame = TypeVar("Frame")  # what comes back is what went in

ADVANTAGE_OPTIONS = [f.name for f in fields(AdvantageConfig)]
OBJECTIVE_OPTIONS = [f.name for f in fields(ObjectiveConfig)]
RUN_OPTIONS = ["threads", "batch_rows"]
# plan parameters that are no keyword here: the frame is the source, no file is written, and the
# configs are built from their fields (a `config` given whole would silently drop them)
NOT_KEYWORDS = {"source", "output", "output_dir", "output_format", "compression", "config", "advantage_config"}


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

        def back(table: pa.Table):
            out = table.to_pandas()
            out.index = frame.index
            return out

        return pa.Table.from_pandas(frame, preserve_index=False), back
    raise UsageError(
        f"`frame` is a pyarrow Table, RecordBatch, RecordBatchReader or Dataset, a polars DataFrame or LazyFrame, "
        f"or a pandas DataFrame (found {type(frame).__name__}); for a datasets.Dataset pass dataset.data.table"
    )


@overload
def annotate_advantages(frame: Frame, *, figures: Literal[False] = False, **options: Any) -> Frame: ...
@overload
def annotate_advantages(frame: Frame, *, figures: Literal[True], **options: Any) -> tuple[Frame, dict]: ...
def annotate_advantages(frame: Any, *, figures: bool = False, **options: Any) -> Any:
    """`grpo advantages` on a frame: ``frame`` with ``advantage`` (or the token-level columns),
    of the same kind; with ``figures=True``, ``(frame, figures)``, the summary figures too.
    Every option of the command is a keyword (``estimator``, ``std``, ``reward_col`` ...), plus
    ``threads`` and ``batch_rows``.

    >>> table = annotate_advantages(pa.table({"prompt_id": [0, 0, 1, 1], "reward": [1.0, 0.0, 1.0, 1.0]}))
    >>> table["advantage"].to_pylist()
    [1.0, -1.0, 0.0, 0.0]
    >>> _, summary = annotate_advantages(table.drop_columns("advantage"), figures=True)
    >>> summary["zero_variance_groups"]["count"]
    1
    """
    _check(options, ADVANTAGE_OPTIONS, plan_advantages, "annotate_advantages()")
    config = {k: options.pop(k) for k in list(options) if k in ADVANTAGE_OPTIONS}
    return _annotated(frame, "advantages", plan_advantages, {"config": AdvantageConfig(**config), **options}, figures)


@overload
def annotate_objective(frame: Frame, *, figures: Literal[False] = False, **options: Any) -> Frame: ...
@overload
def annotate_objective(frame: Frame, *, figures: Literal[True], **options: Any) -> tuple[Frame, dict]: ...
def annotate_objective(frame: Any, *, figures: bool = False, **options: Any) -> Any:
    """`grpo objective` on a frame: ``frame`` with the per-row objective columns, of the same
    kind; with ``figures=True``, ``(frame, figures)``, the summary figures too. Every option of
    the command is a keyword (``loss``, ``epsilon``, ``estimator``, ``is_level`` ...; ``kl`` is
    the objective's, and the estimator's too with ``kl_in_reward``, as on the command line),
    plus ``threads`` and ``batch_rows``.
    """
    from .commands.objective import plan_objective  # the objective's math, imported by a run that computes it

    _check(options, [*OBJECTIVE_OPTIONS, *ADVANTAGE_OPTIONS], plan_objective, "annotate_objective()")
    config = {k: options.pop(k) for k in list(options) if k in OBJECTIVE_OPTIONS}
    estimator = {k: options.pop(k) for k in list(options) if k in ADVANTAGE_OPTIONS}
    if estimator.get("kl_in_reward") is not None and config.get("kl") is not None:
        estimator["kl"] = config["kl"]
    advantage_config = objective_estimator(estimator.pop("estimator", None), config.get("preset"), **estimator)
    options = {"config": ObjectiveConfig(**config), "advantage_config": advantage_config, **options}
    return _annotated(frame, "objective", plan_objective, options, figures)


def _check(options: dict[str, Any], config: list[str], make_plan: Callable, where: str) -> None:
    """Refuse a keyword that is no option of the command (saying which one is meant)."""
    planned = [p for p in inspect.signature(make_plan).parameters if p not in NOT_KEYWORDS]
    check_keywords(options, list(dict.fromkeys([*config, *planned, *RUN_OPTIONS, "figures"])), where)


def _annotated(frame: Any, command: str, make_plan: Callable, options: dict[str, Any], figures: bool) -> Any:
    data, back = arrow_of(frame)
    engine = LocalEngine(threads=options.pop("threads", None), batch_rows=options.pop("batch_rows", None))
    with tempfile.TemporaryDirectory(prefix="grpo-frame-") as folder:
        out = os.path.join(folder, "annotated.parquet")
        summary = run(command, make_plan, partial(open_arrow, data), out, engine, options)
        annotated = back(pq.read_table(out))
    return (annotated, summary) if figures else annotated
