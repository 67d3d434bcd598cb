"""The Ray engine gives the local engine's files and summaries, byte for byte: several files
whose groups span files, scattered ids, per-input outputs, and an error in the third file."""

import json
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_cli import ObjectiveConfig, advantages_file, compare_file, filter_file, inspect_file, mismatch_file, objective_file, report_file
from grpo_cli.filters import FilterConfig
from grpo_cli.engines import make_engine
from grpo_cli.errors import InputError, UsageError

from .conftest import SAMPLE, grpo_executable, run_grpo_process

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


def test_the_report_draws_its_figures_in_the_driver(parts, tmp_path, monkeypatch):
    """Under Ray the page's figures are drawn in the driver, no process forked from it (its
    gRPC threads); the page and the figures are the local engine's, drawn in forked processes."""
    pytest.importorskip("matplotlib", reason="grpo report draws with matplotlib: pip install 'grpo-cli[report]'")
    from grpo_cli import html_report

    pools, real = [], html_report.ProcessPoolExecutor
    monkeypatch.setattr(html_report, "ProcessPoolExecutor", lambda *args, **kwargs: pools.append(args) or real(*args, **kwargs))
    same(lambda out, engine: {**report_file(str(parts), str(out / "r.html"), engine=engine, threads=2), "page": "r.html"}, tmp_path / "r")
    assert len(pools) == (1 if sys.platform == "linux" else 0)  # the local run's


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


def test_a_ray_run_gives_arrows_pool_its_size_back(parts, tmp_path):
    """The Ray engine is a local one too: given threads bound Arrow's pool in the driver while
    the run lasts, and its own ending (Ray's stop) gave the size back no more."""
    before = pa.cpu_count()
    advantages_file(str(parts), str(tmp_path / "out.parquet"), engine="ray", threads=1)
    assert pa.cpu_count() == before


def test_without_ray_the_engine_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(UsageError, match=r"pip install 'grpo-cli\[ray\]'"):
        make_engine("ray")
    with pytest.raises(UsageError, match="applies to `engine` 'ray'"):
        make_engine("local", "ray://host:10001")


def _run_until(ready, signum: int, *args: str) -> tuple[subprocess.CompletedProcess, set]:
    """`grpo advantages --engine ray -q ARGS` in its own process, sent ``signum`` once
    ``ready(pid)`` (polled); its result, and the processes it had started by then."""
    from grpo_cli.engines.ray import _below

    proc = subprocess.Popen([grpo_executable(), "advantages", *args, "--engine", "ray", "-q"], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not ready(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        started = {(pid, start) for pid, start in _below({proc.pid}) if pid != proc.pid}
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, b"", err), started


def _left(started: set, grace: float = 5.0) -> set:
    """Those of ``started`` still running after up to ``grace`` seconds: a process sent SIGKILL
    ends once the kernel schedules it, which a loaded machine can put off for a moment."""
    from grpo_cli.engines.ray import _processes

    deadline = time.monotonic() + grace
    while True:
        running = _processes()
        left = {(pid, start) for pid, start in started if pid in running and running[pid][2] == start}
        if not left or time.monotonic() > deadline:
            return {(pid, running[pid][1]) for pid, _ in left}  # (id, name)
        time.sleep(0.05)


def test_ctrl_c_leaves_no_file_no_traceback_and_no_ray_process(tmp_path):
    """Issue 43, class 11: under Ctrl-C the Ray engine exited 0 (during start-up), left a
    hidden ``.part-N.parquet.*.tmp`` (during an ``--output-dir`` pass), printed a traceback
    (during shutdown), and its ``ray::`` processes outlived the run by minutes. A signal
    during start-up or a pass: exit 130 or 143, one line, nothing written, the local Ray
    stopped with every process it started. A run to its end under ``-q`` prints nothing
    (Ray's own log lines are not shown)."""
    from grpo_cli.engines.ray import _below, _processes

    rng = np.random.default_rng(0)
    folder = tmp_path / "in"
    folder.mkdir()
    for k in range(4):
        lengths = rng.integers(1, 64, 50_000)
        logprobs = pa.ListArray.from_arrays(
            pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)), pa.array(-rng.random(lengths.sum()))
        )
        pq.write_table(
            pa.table({"prompt_id": np.arange(50_000) // 8 + 10_000 * k, "reward": rng.random(50_000), "logprobs": logprobs}), folder / f"p{k}.parquet"
        )
    out = tmp_path / "out"

    done = run_grpo_process("advantages", str(folder), "--engine", "ray", "--output-dir", str(out), "-q")
    assert done.stderr == b"" and sorted(p.name for p in out.iterdir()) == [f"p{k}.parquet" for k in range(4)]

    def starting(pid: int) -> bool:  # the raylet is up, ray.init is still waiting for it
        processes = _processes()
        return any(processes[child][1] == "raylet" for child, _ in _below({pid}) if child in processes)

    def writing(pid: int) -> bool:  # the outputs are staged, the tasks write them
        return any(p.name.endswith(".tmp") for p in (tmp_path / "fresh").glob(".*"))

    for ready, signum, target in ((starting, signal.SIGTERM, "late"), (writing, signal.SIGINT, "fresh")):
        proc, started = _run_until(ready, signum, str(folder), "--output-dir", str(tmp_path / target))
        assert proc.returncode == 128 + signum and proc.stderr.decode() == f"Error: interrupted by {signum.name}; no output written\n", (
            proc.returncode,
            proc.stderr.decode()[-6000:],
        )
        assert not (tmp_path / target).exists()
        assert started and not (left := _left(started)), f"still running: {sorted(left)}"


@pytest.mark.parametrize(
    "address, env, message",
    [
        ("127.0.0.1:{port}", None, "--ray-address '127.0.0.1:{port}': cannot connect (Connection refused)"),
        ("ray://127.0.0.1:{port}", None, "--ray-address 'ray://127.0.0.1:{port}': cannot connect (Connection refused)"),
        (None, "127.0.0.1:{port}", "RAY_ADDRESS '127.0.0.1:{port}': cannot connect (Connection refused)"),
        (None, "bogus", "RAY_ADDRESS 'bogus': Invalid address format: bogus"),
    ],
)
def test_an_address_that_does_not_answer_is_one_line_at_once(sample_parquet, address, env, message):
    """Issue 43, classes 11 and 13: an unreachable `--ray-address` or `RAY_ADDRESS` waited for
    minutes; a bogus one, or a `ray://` one, was an internal error. One line, in seconds."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once this block ends: nothing answers there
    given = ["--ray-address", address.format(port=port)] if address else []
    start = time.monotonic()
    proc = run_grpo_process(
        "advantages", str(sample_parquet), "--engine", "ray", *given, env={"RAY_ADDRESS": env and env.format(port=port)}, check=False
    )
    assert time.monotonic() - start < 30
    assert proc.returncode == (2 if env == "bogus" else 1) and proc.stderr.decode() == f"Error: {message.format(port=port)}\n"
