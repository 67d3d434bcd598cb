"""Benchmark `grpo` against the I/O floor, peer scripts and a naive per-sample loop, as whole processes.

    python benchmarks/bench.py --rows 1000000 --group-size 8 --mean-tokens 64 --runs 3
    python benchmarks/bench.py --rows 10000000 --mean-tokens 0 --rewards binary,continuous
    python benchmarks/bench.py --rows 10000000 --mean-tokens 0 --estimators grpo,remax,opo,gpg,passk
    python benchmarks/bench.py --rows 1000000 --losses ppo,gspo,sapo,cispo,gmpo,gpg --skip-naive
    python benchmarks/bench.py --rows 200000 --skip-naive --skip-peers --page-checksums with
    python benchmarks/bench.py --cores --runs 3 --skip-peers torch
    python benchmarks/bench.py --rows 100000 --mean-tokens 500 --report --skip-naive --runs 5

Generates synthetic rollouts (prompt_id, reward, logprobs, old_logprobs as ragged float32
lists; rewards binary 0/1 or continuous: normal, rounded to 3 decimals), then times each
command over --runs runs and prints a markdown table of median wall time, ratio to the floor,
the cores it kept busy (its median CPU time, user and system, over its median wall time), peak
resident memory (ru_maxrss of the process, via wait4) and the size of the file written.
The baselines are scripts in ``benchmarks/baselines/``:

- floor: pyarrow streams the same input and writes it back with the columns the command adds
  (1 for advantages, the 8 per-row figures for the objective) as distinct random doubles,
  dictionary-encoding string columns only: what any writer of real advantages must pay.
- pyarrow default writer: the same with pyarrow's default writer options (a dictionary tried
  on every column), for the output size.
- read floor: pyarrow streaming the columns the summary-only command reads, writing nothing.
- polars over(): a plain polars script, group mean and std ``over`` the prompt id.
- polars read + write: polars reads the file and writes it back (for the objective with 9
  more float64 columns), with its defaults; no math.
- DuckDB window query: ``COPY (SELECT *, ... OVER (PARTITION BY prompt_id)) TO ...``.
- polars objective script: the advantage ``over`` the prompt id, the lists exploded, the
  clipped term per token, summed per row, joined back.
- torch-style: pandas read, a Python loop over groups, padded micro-batches for the loss.
- naive loop: a plain Python dict of lists keyed by prompt id, float by float.
- ``--estimators``: `grpo advantages -o` once per estimator, on one file that holds what each
  needs (a ``reward_baseline`` column; without log-prob columns, a ``response_mask`` of 1-7
  tokens per row for the lengths), so their times compare side by side.
- ``--losses``: `grpo objective -o` once per loss, against the same 8-column floor.
- ``--page-checksums with`` (or ``without``): the data is written with a CRC32 checksum on
  every page (or none), and the read floor is timed verifying them too, as `grpo` reads.
- ``--against DIR``: each `grpo` command is also run with the code of the work tree ``DIR``,
  interleaved (both run alike, each tree's folder first on the path: :data:`LAUNCH`), and the
  table against the peers gives each ratio.
- ``--cores``: the many-core suite (issue 44), on data of its own: 10M rows of ids and rewards
  in row groups of 1M rows (the advantages), and 1.2e8 tokens in 200k rows of three log-prob
  lists (the objective; both times ``--scale``); every peer installed (polars and DuckDB rows
  are skipped where the package is absent), ``--threads 2`` beside the default, and a second
  table of grpo's ratio to each peer (the median of the rounds' ratios).
- ``--report``: after the rest, `grpo report -o` against `grpo mismatch` (the slowest command
  whose figures the page shows; issue 45) on a file of its own: the same rows and tokens, with
  the rollout sampler's log-probs as a third list. Skipped where matplotlib is not installed.
The peers' scripts run only where their package is installed.
The runs are interleaved: each round runs every command once, so a drift of the machine's speed
(a shared VM's is large) weighs on all of them alike rather than on whichever ran during it;
every other round runs them in the reverse order, so no command always runs on the memory the
same one freed just before it.
A command slower than :data:`SLOW_SECONDS` on its first run is not repeated. This is a
benchmark, not a test: nothing here asserts a time.

Each row printed is also appended to ``--results`` (default ``benchmarks/results.csv``, the
history the docs' Performance page shows), dated, with the commit and the machine (cores,
memory, CPU model); a ratio's reference is its row's ``floor`` (the floor, or the peer);
``cpu_seconds`` is the command's median CPU time.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import importlib.util
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
if importlib.util.find_spec("grpo_cli") is None:  # a checkout, not installed: its code, here and in the commands it runs
    sys.path.insert(0, str(ROOT))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))

from grpo_cli.estimators import lookup  # noqa: E402

CHUNK_ROWS = 65_536
SLOW_SECONDS = 20.0
BASELINES = ROOT / "benchmarks" / "baselines"
# As a user's shell runs them: Python's compiled-module cache on (some sandboxes turn it off,
# which makes every start-up compile every module again).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
RESULTS = Path(__file__).resolve().parent / "results.csv"
# A work tree's `grpo`: its folder first on sys.path, then grpo_cli run as `python -m` runs it.
# Not `python -m grpo_cli` itself, which puts the working folder first: run from a checkout's
# root, that checkout's code would run whatever tree was asked for.
LAUNCH = "import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); runpy.run_module('grpo_cli', run_name='__main__', alter_sys=True)"
POLARS_OVER, DUCKDB_WINDOW, POLARS_OBJECTIVE = "polars over() script", "DuckDB window query", "polars objective script"
POLARS_FLOOR_0, POLARS_FLOOR_9 = "polars read + write", "polars read + write, 9 columns"
PEER_PACKAGES = ("polars", "duckdb", "torch")  # whose scripts --skip-peers can skip
AGAINST_PEERS = "grpo against its peers"  # the setup of the rows of grpo against each peer (docs/hooks.py shows them so)
# (grpo, peer): the --cores suite's ratios (issue 44's targets)
PEERS = [
    ("grpo advantages -o", POLARS_OVER),
    ("grpo advantages -o", DUCKDB_WINDOW),
    ("grpo advantages -o", POLARS_FLOOR_0),
    ("grpo advantages -o", "grpo advantages -o --threads 2"),
    ("grpo advantages (summary only)", "read floor (pyarrow reads prompt_id, reward)"),
    ("grpo objective -o", POLARS_OBJECTIVE),
    ("grpo objective -o", POLARS_FLOOR_9),
    ("grpo objective -o", "grpo objective -o --threads 2"),
    ("grpo objective (summary only)", "read floor (pyarrow read only)"),
]
CORES_ROWS, CORES_ROW_GROUP = 10_000_000, 1_000_000  # --cores: ids and rewards
CORES_TOKEN_ROWS, CORES_MEAN_TOKENS, CORES_TOKEN_ROW_GROUP = 200_000, 600, 8_192  # --cores: 1.2e8 tokens
LISTS = ("logprobs", "old_logprobs", "ref_logprobs")
REPORT_LISTS = ("logprobs", "old_logprobs", "rollout_logprobs")  # --report: every section of the page
COLUMNS = [
    "date",
    "commit",
    "cores",
    "memory_gib",
    "cpu",
    "setup",
    "command",
    "floor",
    "seconds",
    "ratio",
    "peak_rss_mib",
    "output_mib",
    "cpu_seconds",
]


class Run(NamedTuple):
    """One process: wall seconds, peak RSS (bytes), CPU seconds (user and system, its threads')."""

    seconds: float
    rss: int
    cpu: float


def generate(
    path: Path,
    rows: int,
    group_size: int,
    mean_tokens: int,
    seed: int,
    scattered: bool = False,
    needs: frozenset[str] = frozenset(),
    rewards: str = "binary",
    checksums: bool = False,
    row_group_rows: int = CHUNK_ROWS,
    lists: tuple[str, ...] = ("logprobs", "old_logprobs"),
) -> int:
    """Write synthetic rollouts a row group of ``row_group_rows`` rows at a time (bounded
    memory); return the token count. ``lists``: the float32 log-prob list columns (the first
    the policy's, the others near it).
    ``rewards``: ``binary`` (0/1) or ``continuous`` (normal, rounded to 3 decimals).
    ``mean_tokens=0`` writes only prompt_id and reward (for the advantages-only benchmark);
    ``scattered`` shuffles the ids within each chunk of 65,536 rows, so no group's rows
    are contiguous (as after a trainer's batch balancing). ``needs`` (of the estimators run)
    adds a ``reward_baseline`` column for ``baseline``, and for ``length`` without log-prob
    columns a ``response_mask`` of 1-7 tokens per row. ``checksums``: a CRC32 checksum on
    every page."""
    rng = np.random.default_rng(seed)
    writer, tokens = None, 0
    for start in range(0, rows, row_group_rows):
        n = min(row_group_rows, rows - start)
        ids = (np.arange(start, start + n) // group_size).astype(np.int64)
        if scattered:
            ids = rng.permutation(ids)
        reward = (rng.uniform(size=n) < 0.5).astype(np.float64) if rewards == "binary" else np.round(rng.normal(size=n), 3)
        columns = {"prompt_id": ids, "reward": reward}
        lengths = rng.integers(1, 2 * mean_tokens, size=n) if mean_tokens else np.zeros(n, dtype=np.int64)
        if mean_tokens:
            offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
            old = -rng.gamma(0.6, 0.8, size=int(lengths.sum())).astype(np.float32)
            for k, name in enumerate(lists):
                near = old if k == 1 else np.minimum(old + rng.normal(0, 0.1, size=old.size).astype(np.float32), 0).astype(np.float32)
                columns[name] = pa.ListArray.from_arrays(offsets, pa.array(near))
        if "baseline" in needs:
            columns["reward_baseline"] = rng.uniform(size=n)
        if "length" in needs and not mean_tokens:
            lengths = rng.integers(1, 8, size=n)
            offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
            columns["response_mask"] = pa.ListArray.from_arrays(offsets, pa.array(np.ones(int(lengths.sum()), np.int8)))
        table = pa.table(columns)
        writer = writer or pq.ParquetWriter(path, table.schema, write_page_checksum=checksums)
        writer.write_table(table, row_group_size=row_group_rows)
        tokens += int(lengths.sum())
    writer.close()
    return tokens


def generated(path: Path, *args, **kwargs) -> int:
    """:func:`generate` in a process of its own, so that this one stays small: a command's peak
    RSS (``ru_maxrss``) counts the memory of the process that started it."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(generate, path, *args, **kwargs).result()


def run(argv: list[str]) -> Run:
    """One process run: its wall seconds, peak RSS and CPU seconds."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{proc.stderr.read().decode()}")
    return Run(elapsed, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime)


def machine() -> dict[str, str]:
    """The machine's cores, memory and CPU model, and the checkout's commit (``+`` if modified)."""
    here = Path(__file__).resolve().parent

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=here, capture_output=True, text=True).stdout.strip()

    cpu = (
        next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")), "")
        if Path("/proc/cpuinfo").exists()
        else ""
    )
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "commit": git("rev-parse", "--short=10", "HEAD") + ("+" if git("status", "--porcelain", "--untracked-files=no") else ""),
        "cores": str(os.cpu_count()),
        "memory_gib": f"{memory:.0f}",
        "cpu": cpu or "unknown",
    }


def record(path: Path, rows: list[dict[str, str]]) -> None:
    """Append ``rows`` to the results file (with its header if it is new)."""
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        if new:
            writer.writeheader()
        writer.writerows(rows)


def grpo() -> list[str]:
    found = shutil.which("grpo", path=os.path.dirname(sys.executable)) or shutil.which("grpo")
    return [found] if found else [sys.executable, "-m", "grpo_cli"]


def baseline(name: str, *args: str) -> list[str]:
    return [sys.executable, str(BASELINES / f"{name}.py"), *args]


def has(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


def cases(data: Path, out: Path, args: argparse.Namespace) -> list[tuple[str, str, list[str]]]:
    """``(task, label, argv)`` of every command to time; the first of each task is its floor."""
    src, dst = str(data), str(out)
    skipped = set(args.skip_peers.split(","))
    verified = "read floor, page checksums verified" + ("" if args.page_checksums == "with" else " (the file has none)")
    polars, duckdb, torch = (
        "polars" not in skipped and has("polars"),
        "duckdb" not in skipped and has("duckdb"),
        "torch" not in skipped and has("torch", "pandas"),
    )
    found = [
        ("advantages", "floor (pyarrow read + write, 1 column)", baseline("floor", src, dst, "1")),
        ("advantages", "pyarrow default writer, 1 column", baseline("floor", src, dst, "1", "default")),
        *(
            (
                "advantages",
                "grpo advantages -o" + (f" --estimator {e}" if e != "grpo" else ""),
                [*grpo(), "advantages", src, "--estimator", e, "-o", dst, "-q"],
            )
            for e in args.estimators.split(",")
        ),
        *([("advantages", "grpo advantages -o --threads 2", [*grpo(), "advantages", src, "-o", dst, "-q", "--threads", "2"])] if args.cores else []),
        *([("advantages", POLARS_OVER, baseline("polars_over", src, dst))] if polars else []),
        *([("advantages", POLARS_FLOOR_0, baseline("polars_floor", src, dst, "0"))] if polars else []),
        *([("advantages", DUCKDB_WINDOW, baseline("duckdb_window", src, dst))] if duckdb else []),
        *([("advantages", "torch-style script", baseline("torch_style", "advantages", src, dst))] if torch else []),
        *([] if args.skip_naive else [("advantages", "naive per-sample Python loop", baseline("naive", src, dst))]),
    ]
    if not args.mean_tokens:
        return found + [
            ("summary", "read floor (pyarrow reads prompt_id, reward)", baseline("read_floor", src, "prompt_id,reward")),
            *([("summary", verified, baseline("read_floor", src, "prompt_id,reward", "verify"))] if args.page_checksums else []),
            ("summary", "grpo advantages (summary only)", [*grpo(), "advantages", src, "-q"]),
        ]
    return found + [
        ("objective", "floor (pyarrow read + write, 8 columns)", baseline("floor", src, dst, "8")),
        *(
            (
                "objective",
                "grpo objective -o" + (f" --loss {loss}" if loss != "ppo" else ""),
                [*grpo(), "objective", src, "--loss", loss, "-o", dst, "-q"],
            )
            for loss in args.losses.split(",")
        ),
        *([("objective", "grpo objective -o --threads 2", [*grpo(), "objective", src, "-o", dst, "-q", "--threads", "2"])] if args.cores else []),
        *([("objective", POLARS_OBJECTIVE, baseline("polars_objective", src, dst))] if polars else []),
        *([("objective", POLARS_FLOOR_9, baseline("polars_floor", src, dst, "9"))] if polars else []),
        *([("objective", "torch-style script", baseline("torch_style", "objective", src, dst))] if torch else []),
        ("summary", "read floor (pyarrow read only)", baseline("read_floor", src)),
        *([("summary", verified, baseline("read_floor", src, "", "verify"))] if args.page_checksums else []),
        ("summary", "grpo objective (summary only)", [*grpo(), "objective", src, "-q"]),
    ]


def against(timed: list[tuple[str, str, list[str]]], checkout: Path | None) -> tuple[list[tuple[str, str, list[str]]], list[tuple[str, str]]]:
    """``timed`` with, after each `grpo` command, the same command of the code in ``checkout``
    (another commit's work tree, e.g. ``git worktree add /tmp/base COMMIT``), and the pairs of
    :func:`against_peers`: :data:`PEERS` and each command against its twin."""
    if checkout is None:
        return timed, PEERS
    commit = (  # a copy of the code alone is named by its folder
        subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=checkout, capture_output=True, text=True).stdout.strip()
        if (checkout / ".git").exists()
        else checkout.name
    )

    def started(root: Path) -> list[str]:  # both alike: the tree's grpo_cli run as `python -m grpo_cli` runs it (see LAUNCH)
        path = os.pathsep.join(filter(None, [str(root.resolve()), os.environ.get("PYTHONPATH")]))  # for any process it starts too
        return ["env", f"PYTHONPATH={path}", sys.executable, "-c", LAUNCH, str(root.resolve())]

    found, pairs = [], list(PEERS)
    for task, label, argv in timed:
        if argv[: len(grpo())] != grpo():
            found.append((task, label, argv))
            continue
        found += [(task, label, [*started(ROOT), *argv[len(grpo()) :]]), (task, f"{label} @ {commit}", [*started(checkout), *argv[len(grpo()) :]])]
        pairs.append((label, f"{label} @ {commit}"))
    return found, pairs


def timed_rounds(timed: list[tuple[str, str, list[str]]], runs: int, out: Path) -> tuple[dict[str, list[Run]], dict[str, str]]:
    """Each command's :class:`Run` per round, and the size of the file it wrote (MiB).
    The rounds are interleaved: one run of every command per round, every other round in the
    reverse order, since a process runs faster on the memory the one before it freed."""
    results: dict[str, list[Run]] = {label: [] for _, label, _ in timed}
    sizes = {}
    for k in range(runs):
        for _, label, argv in timed[:: -1 if k % 2 else 1]:
            if results[label] and results[label][0].seconds >= SLOW_SECONDS:
                continue
            out.unlink(missing_ok=True)
            results[label].append(run(argv))
            sizes[label] = f"{out.stat().st_size / 2**20:.1f}" if out.exists() else ""
    return results, sizes


def cores_used(runs: list[Run]) -> float:
    """The cores a command kept busy: its median CPU time over its median wall time (as the docs'
    Performance page works it out from a row's ``cpu_seconds`` and ``seconds``)."""
    return statistics.median(r.cpu for r in runs) / statistics.median(r.seconds for r in runs)


def table_rows(timed, results, sizes, run_of: dict[str, str], setup: str) -> list[dict[str, str]]:
    """Print the markdown table (median, ratio to the task's floor) and return its rows for the results file."""
    print("| command | median s | x floor | cores used | peak RSS MiB | output MiB |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    floor, rows = {}, []
    for task, label, _ in timed:
        median = statistics.median(r.seconds for r in results[label])
        peak = max(r.rss for r in results[label])
        floor.setdefault(task, (label, median))
        print(
            f"| {label} | {median:.3f} | {median / floor[task][1]:.2f} | {cores_used(results[label]):.2f} | {peak / 2**20:.0f} | {sizes[label]} |",
            flush=True,
        )
        rows.append(
            {
                **run_of,
                "setup": setup,
                "command": label,
                "floor": floor[task][0],
                "seconds": f"{median:.3f}",
                "ratio": f"{median / floor[task][1]:.2f}",
                "peak_rss_mib": f"{peak / 2**20:.0f}",
                "output_mib": sizes[label],
                "cpu_seconds": f"{statistics.median(r.cpu for r in results[label]):.3f}",
            }
        )
    return rows


def against_peers(results, sizes, pairs: list[tuple[str, str]], run_of: dict[str, str], setup: str) -> list[dict[str, str]]:
    """Print and return each ``(grpo, peer)`` pair timed in this run: grpo's time over the peer's,
    the median of the rounds' ratios (each round ran both within seconds of each other)."""
    print("\n| grpo | peer | grpo s | peer s | ratio | grpo cores | peer cores | grpo MiB | peer MiB |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = []
    for figure, peer in pairs:
        if not (results.get(figure) and results.get(peer)):
            continue
        ratio = statistics.median(f.seconds / p.seconds for f, p in zip(results[figure], results[peer]))
        seconds = [statistics.median(r.seconds for r in results[label]) for label in (figure, peer)]
        busy = [cores_used(results[label]) for label in (figure, peer)]
        print(
            f"| {figure} | {peer} | {seconds[0]:.3f} | {seconds[1]:.3f} | {ratio:.2f} | {busy[0]:.2f} | {busy[1]:.2f} | {sizes[figure]} | {sizes[peer]} |",
            flush=True,
        )
        peak = max(r.rss for r in results[figure])
        row = {"setup": setup, "command": figure, "floor": peer, "seconds": f"{seconds[0]:.3f}", "ratio": f"{ratio:.2f}"}
        cpu = statistics.median(r.cpu for r in results[figure])
        rows.append({**run_of, **row, "peak_rss_mib": f"{peak / 2**20:.0f}", "output_mib": sizes[figure], "cpu_seconds": f"{cpu:.3f}"})
    return rows


def cores_suite(args: argparse.Namespace, workdir: Path, run_of: dict[str, str], invocation: str) -> None:
    """``--cores``: the many-core comparison of issue 44 on data it makes itself, ``--scale`` times
    :data:`CORES_ROWS` rows of ids and rewards in row groups of :data:`CORES_ROW_GROUP` rows, and
    ``--scale`` times :data:`CORES_TOKEN_ROWS` rows of three log-prob lists of
    :data:`CORES_MEAN_TOKENS` tokens on average; grpo against every peer installed."""
    out = workdir / "out.parquet"
    thin, tokens = workdir / "cores-rewards.parquet", workdir / "cores-tokens.parquet"
    generated(thin, round(CORES_ROWS * args.scale), args.group_size, 0, args.seed, row_group_rows=CORES_ROW_GROUP)
    n_tokens = generated(
        tokens, round(CORES_TOKEN_ROWS * args.scale), args.group_size, CORES_MEAN_TOKENS, args.seed, row_group_rows=CORES_TOKEN_ROW_GROUP, lists=LISTS
    )
    for data, what, mean_tokens in ((thin, "ids and rewards", 0), (tokens, f"{n_tokens:,} tokens", CORES_MEAN_TOKENS)):
        found = cases(data, out, argparse.Namespace(**{**vars(args), "mean_tokens": mean_tokens, "skip_naive": True}))
        timed, pairs = against([c for c in found if not (mean_tokens and c[0] == "advantages")], args.against)  # advantages: the thin file's
        print(f"\n{what}, {os.cpu_count()} cores, {args.runs} runs each, data {data.stat().st_size / 2**20:.1f} MiB\n")
        results, sizes = timed_rounds(timed, args.runs, out)
        setup = f"{invocation}; {what}"
        record(
            args.results, table_rows(timed, results, sizes, run_of, setup) + against_peers(results, sizes, pairs, run_of, f"{setup}; {AGAINST_PEERS}")
        )


def report_suite(args: argparse.Namespace, workdir: Path, run_of: dict[str, str], invocation: str) -> None:
    """``--report``: `grpo report -o` against `grpo mismatch`, the slowest command whose figures
    it shows, on ``--rows`` rows of ``--mean-tokens`` tokens with new, old and rollout log-probs."""
    if not has("matplotlib"):
        print("\n--report: skipped, matplotlib is not installed (pip install 'grpo-cli[report]')")
        return
    data, page = workdir / "report.parquet", workdir / "report.html"
    n_tokens = generated(data, args.rows, args.group_size, args.mean_tokens, args.seed, lists=REPORT_LISTS)
    src = str(data)
    timed, pairs = against(
        [
            ("report", "grpo mismatch (summary only)", [*grpo(), "mismatch", src, "-q"]),
            ("report", "grpo report -o", [*grpo(), "report", src, "-o", str(page), "-q"]),
        ],
        args.against,
    )
    print(f"\n{args.rows:,} rows, {n_tokens:,} tokens with rollout log-probs, {os.cpu_count()} cores, {args.runs} runs each\n")
    results, sizes = timed_rounds(timed, args.runs, page)
    setup = f"{invocation}; {n_tokens:,} tokens with rollout log-probs"
    rows = table_rows(timed, results, sizes, run_of, setup)
    record(args.results, rows + (against_peers(results, sizes, pairs[len(PEERS) :], run_of, f"{setup}; {AGAINST_PEERS}") if args.against else []))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--mean-tokens", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None, help="where the data goes (default: a temp dir)")
    parser.add_argument("--rewards", default="binary", help="comma-separated: binary, continuous (one table each)")
    parser.add_argument("--skip-naive", action="store_true")
    parser.add_argument(
        "--skip-peers",
        nargs="?",
        const=",".join(PEER_PACKAGES),
        default="",
        help=f"skip the peers' scripts: all, or those of the packages named (comma-separated: {', '.join(PEER_PACKAGES)})",
    )
    parser.add_argument("--scattered", action="store_true", help="shuffle ids within each chunk: no group is contiguous")
    parser.add_argument("--estimators", default="grpo", help="comma-separated: time `grpo advantages -o` with each")
    parser.add_argument("--losses", default="ppo", help="comma-separated: time `grpo objective -o` with each")
    parser.add_argument(
        "--page-checksums", choices=["with", "without"], help="data written with page checksums or without; the read floor timed verifying them too"
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="the CSV file the rows are appended to")
    parser.add_argument(
        "--cores", action="store_true", help="the many-core suite on its own data (issue 44); ignores --rows, --mean-tokens, --rewards"
    )
    parser.add_argument("--against", type=Path, default=None, help="a work tree of another commit: each grpo command is timed with its code too")
    parser.add_argument("--report", action="store_true", help="also time `grpo report -o` against `grpo mismatch` (issue 45)")
    parser.add_argument("--scale", type=float, default=1.0, help="--cores: the data's size, a multiple of 10M rows and 1.2e8 tokens")
    args = parser.parse_args()
    if unknown := set(filter(None, args.skip_peers.split(","))) - set(PEER_PACKAGES):
        parser.error(f"--skip-peers: unknown {', '.join(sorted(unknown))} (valid: {', '.join(PEER_PACKAGES)})")
    run_of = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), **machine()}
    invocation = " ".join(["python benchmarks/bench.py", *sys.argv[1:]])
    needs = frozenset(n for e in args.estimators.split(",") for n in lookup(e).needs)

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="grpo-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    for rewards in [] if args.cores else args.rewards.split(","):
        data, out = workdir / f"rollouts-{rewards}.parquet", workdir / "out.parquet"
        checksums = args.page_checksums == "with"
        tokens = generated(data, args.rows, args.group_size, args.mean_tokens, args.seed, args.scattered, needs, rewards, checksums)
        print(
            f"\n{args.rows:,} rows, {rewards} rewards, {tokens:,} tokens, groups of {args.group_size}"
            f"{' (scattered)' if args.scattered else ''}, {os.cpu_count()} cores, {args.runs} runs each, "
            f"data {data.stat().st_size / 2**20:.1f} MiB\n"
        )
        timed, pairs = against(cases(data, out, args), args.against)
        results, sizes = timed_rounds(timed, args.runs, out)
        setup = f"{invocation}; {rewards} rewards"
        rows = table_rows(timed, results, sizes, run_of, setup)
        record(args.results, rows + (against_peers(results, sizes, pairs, run_of, f"{setup}; {AGAINST_PEERS}") if args.against else []))
    if args.cores:
        cores_suite(args, workdir, run_of, invocation)
    if args.report:
        report_suite(args, workdir, run_of, invocation)
    if args.workdir is None:
        shutil.rmtree(workdir)


if __name__ == "__main__":
    main()
