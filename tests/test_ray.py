"""The Ray engine gives the local engine's files and summaries, byte for byte: several files
whose groups span files, scattered ids, per-input outputs, and an error in the third file."""

import json
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_cli import ObjectiveConfig, advantages_file, compare_file, filter_file, inspect_file, mismatch_file, objective_file
from grpo_cli.filters import FilterConfig
from grpo_cli.engines import make_engine
from grpo_cli.errors import InputError, UsageError

from .conftest import SAMPLE

ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'grpo-cli[ray]'")
pytestmark = pytest.mark.slow  # a Ray cluster


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield
    ray.shutdown()


@pytest.fixture
def parts(tmp_path):
    """The sample split into four files of 80 rows, ids shuffled across files (groups span
    files, scattered), small row groups."""
    table = pq.read_table(SAMPLE / "rollouts_vllm.parquet")
    order = np.random.default_rng(0).permutation(table.num_rows)
    table = table.take(order)
    folder = tmp_path / "in"
    folder.mkdir()
    for k in range(4):
        pq.write_table(table.slice(80 * k, 80), folder / f"part-{k}.parquet", row_group_size=30)
    return folder


def same(run, tmp_path, **options):
    """Run ``run`` with both engines; the written files and the figures must be identical."""
    results = {}
    for engine in ("local", "ray"):
        out = tmp_path / engine
        out.mkdir(parents=True)
        figures = run(out, engine, **options)
        results[engine] = (figures, {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()} if out.exists() else {})
    assert json.dumps(results["ray"][0], sort_keys=True) == json.dumps(results["local"][0], sort_keys=True)
    assert results["ray"][1] == results["local"][1]
    return results["ray"]


def test_advantages_and_objective_one_file_and_per_input(parts, tmp_path):
    for single in (True, False):

        def advantages(out, engine, single=single):
            target = {"output": str(out / "a.parquet")} if single else {"output_dir": str(out)}
            return advantages_file(str(parts), engine=engine, batch_rows=25, **target)

        def objective(out, engine, single=single):
            target = {"output": str(out / "o.parquet")} if single else {"output_dir": str(out)}
            return objective_file(str(parts), engine=engine, batch_rows=25, config=ObjectiveConfig(loss="sapo", is_level="token"), **target)

        figures, files = same(advantages, tmp_path / f"a{single}")
        assert len(files) == (1 if single else 4) and figures["rows"] == 320
        figures, _ = same(objective, tmp_path / f"o{single}")
        assert figures["rollout"]["is"] is not None


def test_the_other_commands(parts, tmp_path):
    same(lambda out, engine: mismatch_file(str(parts), str(out / "m.parquet"), engine=engine, batch_rows=25), tmp_path / "m")
    same(
        lambda out, engine: filter_file(str(parts), str(out / "f.parquet"), engine=engine, config=FilterConfig(drop_zero_variance=True)),
        tmp_path / "f",
    )
    same(lambda out, engine: compare_file(str(parts), str(out / "c.parquet"), engine=engine, estimators="grpo,rloo"), tmp_path / "c")
    same(lambda out, engine: inspect_file(str(parts), engine=engine, batch_rows=25), tmp_path / "i")


def test_an_error_in_the_third_file_is_the_local_one_line_and_leaves_nothing(parts, tmp_path):
    bad = pq.read_table(parts / "part-2.parquet")
    logprobs = bad["logprobs"].to_pylist()
    logprobs[5][0] = 0.5  # a positive log-prob
    pq.write_table(
        bad.set_column(bad.schema.get_field_index("logprobs"), "logprobs", pa.array(logprobs, bad.schema.field("logprobs").type)),
        parts / "part-2.parquet",
    )
    messages = {}
    for engine in ("local", "ray"):
        out = tmp_path / engine / "out"
        with pytest.raises(InputError) as raised:
            objective_file(str(parts), output_dir=str(out), engine=engine)
        messages[engine] = str(raised.value)
        assert not out.exists() or not any(out.rglob("*"))
    assert messages["ray"] == messages["local"] and "part-2.parquet: row 5" in messages["ray"] and "\n" not in messages["ray"]


def test_without_ray_the_engine_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(UsageError, match=r"pip install 'grpo-cli\[ray\]'"):
        make_engine("ray")
    with pytest.raises(UsageError, match="applies to `engine` 'ray'"):
        make_engine("local", "ray://host:10001")
