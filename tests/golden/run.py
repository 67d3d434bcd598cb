"""Run one golden case in-process, as ``grpo`` would, and describe what it left.

The record holds nothing that a CPU's math library moves: numpy's ``exp`` and ``log`` differ
in their last bit between instruction sets (AVX-512 or AVX2), so the summary's floats are
compared within :data:`TOLERANCE` (``test_golden.py``), and an output is described by its
layout and its values' digests (:func:`output_digest`), not by its bytes."""

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from grpo_cli.cli import app

TOLERANCE = {"rel_tol": 1e-9, "abs_tol": 1e-12}  # a last bit moves a float by 1e-16 of itself; a formula's change, far more


def run_case(args: list[str], folder: Path) -> dict:
    """Exit code, first line of stderr on failure, the summary JSON and each output's digest.

    ``folder`` holds (or links) ``sample_data``; ``OUT`` in ``args`` names the output there."""
    out = next((a.replace("OUT", "out") for a in args if a.startswith("OUT")), None)
    argv = [a.replace("OUT", "out") for a in args]
    summary = folder / "summary.json"
    if argv[0] != "presets":
        argv += ["--summary-json", str(summary), "-q"]
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(app, argv, env={"COLUMNS": "100"})
    finally:
        os.chdir(cwd)
    record: dict = {"exit": result.exit_code}
    if result.exit_code != 0:
        record["error"] = (result.stderr or result.output).strip().splitlines()[:1]
    elif argv[0] == "presets":
        record["stdout_sha256"] = hashlib.sha256(result.stdout.encode()).hexdigest()
    if summary.exists():
        record["summary"] = json.loads(summary.read_text())
        summary.unlink()
    if out is not None and (folder / out).exists():
        record["output"] = output_digest(folder / out)
        (folder / out).unlink()
    return record


def output_digest(path: Path) -> dict:
    """A parquet file's layout (the key-value metadata, each row group's rows, each column
    chunk's path, encodings and codec) or a JSON Lines file's keys, and each column's
    :func:`column_digest`."""
    if path.suffix == ".parquet":
        meta = pq.read_metadata(path)
        groups = [meta.row_group(g) for g in range(meta.num_row_groups)]
        layout = {
            "metadata": {k.decode(): hashlib.sha256(v).hexdigest() for k, v in (meta.metadata or {}).items()},
            "row_groups": [
                {
                    "rows": g.num_rows,
                    "columns": [f"{c.path_in_schema}: {' '.join(c.encodings)}, {c.compression}" for c in map(g.column, range(g.num_columns))],
                }
                for g in groups
            ],
        }
        table = pq.read_table(path)
    else:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        layout = {"keys": [list(keys) for keys in sorted({tuple(row) for row in rows})]}
        table = pa.Table.from_pylist(rows)
    return {
        "layout": layout,
        "schema": str(table.schema).splitlines(),
        "columns": {n: column_digest(table.column(n)) for n in table.column_names},
    }


def column_digest(column: pa.ChunkedArray) -> dict:
    """A column's values: floats (in lists or not) as a sha256 of their shape (the lists'
    lengths, the count, nulls, NaNs and infinities), the sum of their magnitudes and of their
    squares, their sum over the former (which no cancellation to near zero leaves sensitive
    to a last bit) and their min and max, each of which a last bit moves within
    :data:`TOLERANCE`; other values exactly (a sha256 of the lengths and values)."""
    values, lengths = column.combine_chunks(), []
    while pa.types.is_list(values.type) or pa.types.is_large_list(values.type):
        lengths.append(values.value_lengths().to_pylist())
        values = values.flatten()
    if not pa.types.is_floating(values.type):
        return {"values": _sha256([lengths, values.to_pylist()])}
    x = values.to_numpy(zero_copy_only=False).astype(np.float64)
    finite = x[np.isfinite(x)]
    magnitude = float(np.abs(finite).sum())
    return {
        "shape": _sha256([lengths, len(x), values.null_count, int(np.isnan(x).sum()), int(np.isinf(x).sum())]),
        "sum_abs": magnitude,
        "sum_sq": float(np.square(finite).sum()),
        "sum_over_sum_abs": float(finite.sum()) / magnitude if magnitude else 0.0,
        "min": float(finite.min()) if finite.size else None,
        "max": float(finite.max()) if finite.size else None,
    }


def _sha256(value) -> str:
    return hashlib.sha256(json.dumps(value, default=str).encode()).hexdigest()
