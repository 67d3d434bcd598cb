"""Benchmark `grpo` against the I/O floor, peer scripts and a naive per-sample loop, as whole processes.

    python benchmarks/bench.py --rows 1000000 --group-size 8 --mean-tokens 64 --runs 3
    python benchmarks/bench.py --rows 10000000 --mean-tokens 0 --rewards binary,continuous
    python benchmarks/bench.py --rows 10000000 --mean-tokens 0 --estimators grpo,remax,opo,gpg,passk
    python benchmarks/bench.py --rows 1000000 --losses ppo,gspo,sapo,cispo,gmpo,gpg --skip-naive
    python benchmarks/bench.py --rows 200000 --skip-naive --skip-peers --page-checksums with

Generates synthetic rollouts (prompt_id, reward, logprobs, old_logprobs as ragged float32
lists; rewards binary 0/1 or continuous: normal, rounded to 3 decimals), then times each
command over --runs runs and prints a markdown table of median wall time, ratio to the floor,
peak resident memory (ru_maxrss of the process, via wait4) and the size of the file written.
The baselines are scripts in ``benchmarks/baselines/``:

- floor: pyarrow streams the same input and writes it back with the columns the command adds
  (1 for advantages, the 8 per-row figures for the objective) as distinct random doubles,
  dictionary-encoding string columns only: what any writer of real advantages must pay.
- pyarrow default writer: the same with pyarrow's default writer options (a dictionary tried
  on every column), for the output size.
- read floor: pyarrow streaming the columns the summary-only command reads, writing nothing.
- polars over(): a plain polars script, group mean and std ``over`` the prompt id.
- torch-style: pandas read, a Python loop over groups, padded micro-batches for the loss.
- naive loop: a plain Python dict of lists keyed by prompt id, float by float.
- ``--estimators``: `grpo advantages -o` once per estimator, on one file that holds what each
  needs (a ``reward_baseline`` column; without log-prob columns, a ``response_mask`` of 1-7
  tokens per row for the lengths), so their times compare side by side.
- ``--losses``: `grpo objective -o` once per loss, against the same 8-column floor.
- ``--page-checksums with`` (or ``without``): the data is written with a CRC32 checksum on
  every page (or none), and the read floor is timed verifying them too, as `grpo` reads.
The runs are interleaved: each round runs every command once, so a drift of the machine's speed
(a shared VM's is large) weighs on all of them alike rather than on whichever ran during it.
A command slower than :data:`SLOW_SECONDS` on its first run is not repeated. This is a
benchmark, not a test: nothing here asserts a time.

Each row printed is also appended to ``--results`` (default ``benchmarks/results.csv``, the
history the docs' Performance page shows), dated, with the commit and the machine.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from grpo_cli.estimators import lookup

CHUNK_ROWS = 65_536
SLOW_SECONDS = 20.0
BASELINES = Path(__file__).resolve().parent / "baselines"
# As a user's shell runs them: Python's compiled-module cache on (some sandboxes turn it off,
# which makes every start-up compile every module again).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
RESULTS = Path(__file__).resolve().parent / "results.csv"
COLUMNS = ["date", "commit", "cores", "memory_gib", "cpu", "setup", "command", "floor", "seconds", "ratio", "peak_rss_mib", "output_mib"]


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
) -> int:
    """Write synthetic rollouts chunk by chunk (bounded memory); return the token count.
    ``rewards``: ``binary`` (0/1) or ``continuous`` (normal, rounded to 3 decimals).
    ``mean_tokens=0`` writes only prompt_id and reward (for the advantages-only benchmark);
    ``scattered`` shuffles the ids within each chunk of 65,536 rows, so no group's rows
    are contiguous (as after a trainer's batch balancing). ``needs`` (of the estimators run)
    adds a ``reward_baseline`` column for ``baseline``, and for ``length`` without log-prob
    columns a ``response_mask`` of 1-7 tokens per row. ``checksums``: a CRC32 checksum on
    every page."""
    rng = np.random.default_rng(seed)
    writer, tokens = None, 0
    for start in range(0, rows, CHUNK_ROWS):
        n = min(CHUNK_ROWS, rows - start)
        ids = (np.arange(start, start + n) // group_size).astype(np.int64)
        if scattered:
            ids = rng.permutation(ids)
        reward = (rng.uniform(size=n) < 0.5).astype(np.float64) if rewards == "binary" else np.round(rng.normal(size=n), 3)
        columns = {"prompt_id": ids, "reward": reward}
        lengths = rng.integers(1, 2 * mean_tokens, size=n) if mean_tokens else np.zeros(n, dtype=np.int64)
        if mean_tokens:
            offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
            old = -rng.gamma(0.6, 0.8, size=int(lengths.sum())).astype(np.float32)
            new = np.minimum(old + rng.normal(0, 0.1, size=old.size).astype(np.float32), 0).astype(np.float32)
            columns["logprobs"] = pa.ListArray.from_arrays(offsets, pa.array(new))
            columns["old_logprobs"] = pa.ListArray.from_arrays(offsets, pa.array(old))
        if "baseline" in needs:
            columns["reward_baseline"] = rng.uniform(size=n)
        if "length" in needs and not mean_tokens:
            lengths = rng.integers(1, 8, size=n)
            offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
            columns["response_mask"] = pa.ListArray.from_arrays(offsets, pa.array(np.ones(int(lengths.sum()), np.int8)))
        table = pa.table(columns)
        writer = writer or pq.ParquetWriter(path, table.schema, write_page_checksum=checksums)
        writer.write_table(table, row_group_size=CHUNK_ROWS)
        tokens += int(lengths.sum())
    writer.close()
    return tokens


def run(argv: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{proc.stderr.read().decode()}")
    return elapsed, usage.ru_maxrss * 1024


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


def cases(data: Path, out: Path, args: argparse.Namespace) -> list[tuple[str, str, list[str]]]:
    """``(task, label, argv)`` of every command to time; the first of each task is its floor."""
    src, dst = str(data), str(out)
    peers = not args.skip_peers
    verified = "read floor, page checksums verified" + ("" if args.page_checksums == "with" else " (the file has none)")
    torch = peers and importlib.util.find_spec("torch") is not None and importlib.util.find_spec("pandas") is not None
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
        *([("advantages", "polars over() script", baseline("polars_over", src, dst))] if peers else []),
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
        *([("objective", "torch-style script", baseline("torch_style", "objective", src, dst))] if torch else []),
        ("summary", "read floor (pyarrow read only)", baseline("read_floor", src)),
        *([("summary", verified, baseline("read_floor", src, "", "verify"))] if args.page_checksums else []),
        ("summary", "grpo objective (summary only)", [*grpo(), "objective", src, "-q"]),
    ]


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
    parser.add_argument("--skip-peers", action="store_true", help="skip the polars and torch-style scripts")
    parser.add_argument("--scattered", action="store_true", help="shuffle ids within each chunk: no group is contiguous")
    parser.add_argument("--estimators", default="grpo", help="comma-separated: time `grpo advantages -o` with each")
    parser.add_argument("--losses", default="ppo", help="comma-separated: time `grpo objective -o` with each")
    parser.add_argument(
        "--page-checksums", choices=["with", "without"], help="data written with page checksums or without; the read floor timed verifying them too"
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="the CSV file the rows are appended to")
    args = parser.parse_args()
    run_of = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), **machine()}
    invocation = " ".join(["python benchmarks/bench.py", *sys.argv[1:]])
    needs = frozenset(n for e in args.estimators.split(",") for n in lookup(e).needs)

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="grpo-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    for rewards in args.rewards.split(","):
        data, out = workdir / f"rollouts-{rewards}.parquet", workdir / "out.parquet"
        checksums = args.page_checksums == "with"
        tokens = generate(data, args.rows, args.group_size, args.mean_tokens, args.seed, args.scattered, needs, rewards, checksums)
        print(
            f"\n{args.rows:,} rows, {rewards} rewards, {tokens:,} tokens, groups of {args.group_size}"
            f"{' (scattered)' if args.scattered else ''}, {os.cpu_count()} cores, {args.runs} runs each, "
            f"data {data.stat().st_size / 2**20:.1f} MiB\n"
        )
        print("| command | median s | x floor | peak RSS MiB | output MiB |")
        print("| --- | ---: | ---: | ---: | ---: |")
        timed = cases(data, out, args)
        results: dict[str, list[tuple[float, int]]] = {label: [] for _, label, _ in timed}
        sizes = {}
        for _ in range(args.runs):  # interleaved: one run of every command per round
            for _, label, argv in timed:
                if results[label] and results[label][0][0] >= SLOW_SECONDS:
                    continue
                out.unlink(missing_ok=True)
                results[label].append(run(argv))
                sizes[label] = f"{out.stat().st_size / 2**20:.1f}" if out.exists() else ""
        floor, rows = {}, []
        for task, label, _ in timed:
            median = statistics.median(t for t, _ in results[label])
            peak = max(m for _, m in results[label])
            floor.setdefault(task, (label, median))
            print(f"| {label} | {median:.3f} | {median / floor[task][1]:.2f} | {peak / 2**20:.0f} | {sizes[label]} |", flush=True)
            rows.append(
                {
                    **run_of,
                    "setup": f"{invocation}; {rewards} rewards",
                    "command": label,
                    "floor": floor[task][0],
                    "seconds": f"{median:.3f}",
                    "ratio": f"{median / floor[task][1]:.2f}",
                    "peak_rss_mib": f"{peak / 2**20:.0f}",
                    "output_mib": sizes[label],
                }
            )
        record(args.results, rows)
    if args.workdir is None:
        shutil.rmtree(workdir)


if __name__ == "__main__":
    main()
