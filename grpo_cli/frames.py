"""DataFrames in, DataFrames out: the commands on a table already in memory.

A pyarrow Table, a polars DataFrame or LazyFrame, or a pandas DataFrame is spooled to a
temporary parquet file (as stdin is), the command's file API runs on it, and the annotated
rows come back as the same type: the same numbers as the CLI, from the same code. A
``datasets.Dataset`` goes in as its Arrow table, ``dataset.data.table``.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import fields
from functools import partial
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from .config import AdvantageConfig
from .engines import LocalEngine
from .errors import UsageError
from .files import run
from .io import open_table
from .objective.config import ObjectiveConfig
from .plan import plan_advantages
from .plan.objective import objective_estimator, plan_objective

ADVANTAGE_OPTIONS = {f.name for f in fields(AdvantageConfig)}
OBJECTIVE_OPTIONS = {f.name for f in fields(ObjectiveConfig)}


def arrow_of(frame: Any) -> tuple[pa.Table, Callable[[pa.Table], Any]]:
    """``frame`` as an Arrow table, and how to turn an annotated table back into its type
    (a LazyFrame comes back lazy; a pandas DataFrame keeps its index)."""
    if isinstance(frame, pa.Table):
        return frame, lambda table: table
    kind, library = type(frame).__name__, type(frame).__module__.split(".")[0]
    if library == "polars" and kind in ("DataFrame", "LazyFrame"):
        import polars as pl

        if kind == "LazyFrame":
            return frame.collect().to_arrow(), lambda table: pl.from_arrow(table).lazy()
        return frame.to_arrow(), pl.from_arrow
    if library == "pandas" and kind == "DataFrame":
        def back(table: pa.Table):
            out = table.to_pandas()
            out.index = frame.index
            return out

        return pa.Table.from_pandas(frame, preserve_index=False), back
    raise UsageError(f"takes a pyarrow Table, a polars DataFrame or LazyFrame, or a pandas DataFrame (found {type(frame).__name__}); "
                     "for a datasets.Dataset pass dataset.data.table")


def annotate_advantages(frame: Any, **options: Any) -> tuple[Any, dict]:
    """`grpo advantages` on a table: ``frame`` with ``advantage`` (or the token-level
    columns), and the summary figures. Every option of the command is a keyword
    (``estimator``, ``std``, ``reward_col`` ...), plus ``threads`` and ``batch_rows``.

    >>> table, summary = annotate_advantages(pa.table({"prompt_id": [0, 0, 1, 1], "reward": [1.0, 0.0, 1.0, 1.0]}))
    >>> table["advantage"].to_pylist(), summary["zero_variance_groups"]["count"]
    ([1.0, -1.0, 0.0, 0.0], 1)
    """
    config = {k: options.pop(k) for k in list(options) if k in ADVANTAGE_OPTIONS}
    return _annotated(frame, "advantages", plan_advantages, {"config": AdvantageConfig(**config), **options})


def annotate_objective(frame: Any, **options: Any) -> tuple[Any, dict]:
    """`grpo objective` on a table: ``frame`` with the per-row objective columns, and the
    summary figures. Every option of the command is a keyword (``loss``, ``epsilon``,
    ``estimator``, ``is_level`` ...; ``kl`` is the objective's, and the estimator's too with
    ``kl_in_reward``, as on the command line), plus ``threads`` and ``batch_rows``.
    """
    config = {k: options.pop(k) for k in list(options) if k in OBJECTIVE_OPTIONS}
    estimator = {k: options.pop(k) for k in list(options) if k in ADVANTAGE_OPTIONS}
    if estimator.get("kl_in_reward") is not None and config.get("kl") is not None:
        estimator["kl"] = config["kl"]
    advantage_config = objective_estimator(estimator.pop("estimator", None), config.get("preset"), **estimator)
    return _annotated(frame, "objective", plan_objective, {"config": ObjectiveConfig(**config), "advantage_config": advantage_config, **options})


def _annotated(frame: Any, command: str, make_plan: Callable, options: dict[str, Any]) -> tuple[Any, dict]:
    table, back = arrow_of(frame)
    engine = LocalEngine(threads=options.pop("threads", None), batch_rows=options.pop("batch_rows", None))
    with tempfile.TemporaryDirectory(prefix="grpo-frame-") as folder:
        out = os.path.join(folder, "annotated.parquet")
        figures = run(command, make_plan, partial(open_table, table), out, engine, options)
        return back(pq.read_table(out)), figures
