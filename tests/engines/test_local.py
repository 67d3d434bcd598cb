"""The local engine: its primitives (every batch in row order, whatever the threads and the
batch size; a write pass), windows of whole groups on threads, one streaming pass when the
input has advantages, errors from worker threads named by row, progress, and polars left
unimported."""

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_cli import AdvantageConfig, advantages, advantages_file, objective_file
from grpo_cli.engines import Engine, LocalEngine, kernels
from grpo_cli.errors import InputError
from grpo_cli.io import open_source
from grpo_cli.passes.ahead import WINDOW_ROWS
from grpo_cli.plan import Output

from ..conftest import write_jsonl_rows


def scaled(batch: pa.RecordBatch, first_row: int, factor: float) -> tuple[int, np.ndarray]:
    """A kernel: where the batch starts, and its rewards times ``factor``."""
    return first_row, batch.column("reward").to_numpy() * factor


@pytest.mark.parametrize(("threads", "batch_rows"), [(1, 7), (3, 7), (4, 1000)])
def test_map_batches_gives_every_batch_in_row_order(sample_parquet, threads, batch_rows):
    engine = LocalEngine(threads=threads, batch_rows=batch_rows)
    with open_source(str(sample_parquet)) as source:
        mapped = list(engine.map_batches(source, scaled, 2.0, columns=["reward"]))
        whole = engine.read_columns(source, ["reward"]).column("reward").to_numpy()
    sizes = [m.batch.num_rows for m in mapped]
    assert max(sizes) <= batch_rows and [m.first_row for m in mapped] == np.cumsum([0, *sizes[:-1]]).tolist()
    assert all(m.result[0] == m.first_row and m.part == 0 for m in mapped)
    assert np.concatenate([m.result[1] for m in mapped]).tobytes() == (whole * 2.0).tobytes()


def test_write_pass_writes_every_row_with_its_new_column(sample_parquet, tmp_path):
    engine, out = LocalEngine(threads=3, batch_rows=50), tmp_path / "o.parquet"
    with engine.outputs as outputs, open_source(str(sample_parquet)) as source:
        rows = int(source.row_counts.sum())
        partials = engine.write_pass(
            source,
            Output((str(out),), "parquet"),
            [pa.field("x", pa.float64())],
            kernels.row_columns,
            {"x": np.arange(rows, dtype=np.float64)},
            columns=[],
        )
        outputs.commit()
    written, read = pq.read_table(out), pq.read_table(sample_parquet)
    assert written.column_names == [*read.column_names, "x"] and written["x"].to_pylist() == list(range(rows))
    assert written.select(read.column_names).equals(read) and partials == [None] * -(-rows // 50)


@pytest.mark.parametrize("window", [1 << 12, WINDOW_ROWS])
def test_windowed_file_advantages_equal_the_one_piece_computation(tmp_path, monkeypatch, window):
    """Contiguous groups are computed a window at a time on threads; the numbers must be the
    bits of the whole-array computation, whatever the thread count and window size."""
    monkeypatch.setattr("grpo_cli.passes.WINDOW_ROWS", window)
    rng = np.random.default_rng(1)
    sizes = rng.integers(1, 40, size=(1 << 12) // 4 * 5)  # variable groups, several windows of the smaller size
    ids = np.repeat(np.arange(len(sizes)), sizes)
    rewards = rng.normal(size=len(ids)) * 1e3 + rng.integers(0, 2, size=len(ids))
    path = tmp_path / "r.parquet"
    pq.write_table(pa.table({"prompt_id": ids, "reward": rewards}), path)
    assert len(ids) > 3 * (1 << 12)
    for config in (AdvantageConfig(), AdvantageConfig(estimator="rloo", std="sample"), AdvantageConfig(scale="none")):
        expected = advantages(rewards, ids, config)
        for threads in (1, 2, 3):
            out = tmp_path / f"out{threads}.parquet"
            advantages_file(str(path), str(out), config=config, threads=threads)
            assert pq.read_table(out)["advantage"].to_numpy().tobytes() == expected.tobytes()


def test_contiguous_groups_from_parquet_never_import_polars(sample_parquet, tmp_path):
    """polars costs ~0.15 s to import; the common layout (parquet in, contiguous ids) skips it."""
    script = (
        "import atexit, sys; from grpo_cli.cli import main; sys.argv = ['grpo', *sys.argv[1:]]\n"
        "atexit.register(lambda: print('polars' in sys.modules))\n"  # main() ends the process, after the exit handlers
        "main()"
    )
    run = subprocess.run(
        [sys.executable, "-c", script, "advantages", str(sample_parquet), "-o", str(tmp_path / "o.parquet"), "-q"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert run.stdout.strip() == "False"


def test_advantage_column_is_read_in_the_one_streaming_pass(sample_parquet, tmp_path, monkeypatch):
    annotated = tmp_path / "adv.parquet"
    advantages_file(str(sample_parquet), str(annotated))
    expected = objective_file(str(annotated), batch_rows=7)

    def no_first_pass(self, columns):
        raise AssertionError(f"a first pass read {columns}")

    monkeypatch.setattr("grpo_cli.io.Source.read_columns", no_first_pass)
    assert objective_file(str(annotated), batch_rows=64) == expected
    assert objective_file(str(annotated), str(tmp_path / "o.parquet"), batch_rows=5, threads=2) == expected


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_bad_advantage_in_a_late_batch_names_its_row(tmp_path, fmt):
    rows = [{"prompt_id": f"p{i // 2}", "advantage": 0.5, "logprobs": [-0.1], "old_logprobs": [-0.2]} for i in range(9)]
    rows[7]["advantage"] = None
    path = tmp_path / f"r.{fmt}"
    if fmt == "parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        write_jsonl_rows(path, rows)
    with pytest.raises(InputError, match=r"row 7 \(prompt id 'p3'\): column 'advantage' is null or NaN"):
        objective_file(str(path), batch_rows=3)


def test_progress_reports_rows_and_row_groups_or_files(sample_parquet, sample_jsonl, tmp_path):
    grouped = tmp_path / "grouped.parquet"
    pq.write_table(pq.read_table(sample_parquet), grouped, row_group_size=100)  # 320 rows: 4 row groups
    calls = []
    advantages_file(str(grouped), str(tmp_path / "o.parquet"), batch_rows=64, threads=1, progress=lambda *a: calls.append(a))
    assert calls[0] == (64, 320, "row groups 0/4") and calls[1] == (128, 320, "row groups 1/4")
    assert calls[-1] == (320, 320, "row groups 4/4")
    calls.clear()  # row groups read several at once: a batch ends with its row group
    advantages_file(str(grouped), str(tmp_path / "o.parquet"), batch_rows=64, threads=4, progress=lambda *a: calls.append(a))
    assert calls == [(r, 320, f"row groups {g}/4") for r, g in [(64, 0), (100, 1), (164, 1), (200, 2), (264, 2), (300, 3), (320, 4)]]
    calls.clear()
    objective_file([str(sample_jsonl), str(sample_jsonl)], progress=lambda *a: calls.append(a))
    assert calls[-1] == (640, 640, "files 2/2")


def arrow_threads(batch: pa.RecordBatch, first_row: int) -> int:
    """A kernel: the size of Arrow's pool while it runs."""
    return pa.cpu_count()


@pytest.mark.parametrize("threads", [1, None, 1000])
def test_given_threads_bound_arrows_pool_while_the_run_lasts(sample_parquet, threads):
    """`--threads 2` on a 16-core machine decoded the input on 16 of Arrow's threads: a given
    thread count bounds Arrow's pool too (never above its size), and the size is restored."""
    before = pa.cpu_count()
    with LocalEngine(threads=threads, batch_rows=7) as engine, open_source(str(sample_parquet)) as source:
        seen = {m.result for m in engine.map_batches(source, arrow_threads, columns=["reward"])}
    assert seen == {min(threads or before, before)} and pa.cpu_count() == before


def test_a_file_run_bounds_arrows_pool_by_its_threads(sample_parquet, tmp_path, monkeypatch):
    sizes: list[int] = []
    monkeypatch.setattr(pa, "set_cpu_count", lambda n: sizes.append(n))
    advantages_file(str(sample_parquet), str(tmp_path / "o.parquet"), threads=1)
    assert sizes == ([1, pa.cpu_count()] if pa.cpu_count() > 1 else [])


def test_the_local_engine_is_an_engine():
    assert issubclass(LocalEngine, Engine) and LocalEngine(threads=1).workers == 1


def test_per_token_advantage_column(tmp_path, sample_parquet):
    """A list column of advantages is read per token; with every token at its row's advantage it
    gives the per-row numbers (up to the order the products are summed in)."""
    per_row = tmp_path / "adv.parquet"
    advantages_file(str(sample_parquet), str(per_row))
    table = pq.read_table(per_row)
    lengths = pa.compute.list_value_length(table["logprobs"]).to_numpy()
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    tokens = pa.ListArray.from_arrays(offsets, pa.array(np.repeat(table["advantage"].to_numpy(), lengths)))
    per_token = tmp_path / "tok.parquet"
    pq.write_table(table.drop(["advantage"]).append_column("token_advantage", tokens), per_token)
    expected = objective_file(str(per_row))
    out = tmp_path / "out.parquet"
    got = objective_file(str(per_token), str(out), advantage_col="token_advantage", batch_rows=7)
    assert got["objective"] == pytest.approx(expected["objective"], rel=1e-13)
    assert got["clip_frac"] == expected["clip_frac"] and got["zero_advantage_rows"] == expected["zero_advantage_rows"]
    written = pq.read_table(out)
    assert "advantage" not in written.column_names and written["token_advantage"].to_pylist() == tokens.to_pylist()
    with pytest.raises(InputError, match=r"row 2 \(prompt id 'gsm8k-0000'\): column 'token_advantage' has 1 tokens but \d+ in the log-probs"):
        bad = pq.read_table(per_token)
        short = bad["token_advantage"].to_pylist()
        short[2] = [0.0]
        pq.write_table(bad.set_column(bad.schema.get_field_index("token_advantage"), "token_advantage", pa.array(short)), per_token)
        objective_file(str(per_token), advantage_col="token_advantage")
