"""Benchmark `grpo` against the I/O floor and a naive per-sample loop, as whole processes.

    python benchmarks/bench.py --rows 1000000 --group-size 8 --mean-tokens 64 --runs 3
    python benchmarks/bench.py --rows 10000000 --mean-tokens 0 --estimators grpo,remax,opo,gpg,passk
    python benchmarks/bench.py --rows 1000000 --losses ppo,gspo,sapo,cispo,gmpo,gpg --skip-naive

Generates synthetic rollouts (prompt_id, reward, logprobs, old_logprobs as ragged float32
lists), then times each command over --runs runs and prints a markdown table of median wall
time, ratio to the floor, and peak resident memory (ru_maxrss of the process, via wait4).

- floor (advantages): pyarrow streams the same input and writes it back with one more column.
- floor (objective): the same with the 8 per-row columns `grpo objective` adds, no math.
- read floor (summary-only objective): pyarrow streaming the same input, writing nothing.
- naive loop: a plain Python dict of lists keyed by prompt id, float by float.
- ``--estimators``: `grpo advantages -o` once per estimator, on one file that holds what each
  needs (a ``reward_baseline`` column; without log-prob columns, a ``response_mask`` of 1-7
  tokens per row for the lengths), so their times compare side by side.
- ``--losses``: `grpo objective -o` once per loss, against the same 8-column floor.
This is a benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
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

FLOOR = """
import sys, pyarrow as pa, pyarrow.parquet as pq
src, dst, extra = sys.argv[1], sys.argv[2], int(sys.argv[3])
f = pq.ParquetFile(src, pre_buffer=False)
writer = None
for batch in f.iter_batches():  # pyarrow's default batch size
    for k in range(extra):
        batch = batch.append_column(f"c{k}", pa.array(batch.column(1).to_numpy()))  # a float column, no math
    writer = writer or pq.ParquetWriter(dst, batch.schema)
    writer.write_batch(batch)
writer.close()
"""

READ_FLOOR = """
import sys, pyarrow.parquet as pq
for batch in pq.ParquetFile(sys.argv[1], pre_buffer=False).iter_batches():
    pass
"""

NAIVE = """
import sys, math, pyarrow as pa, pyarrow.parquet as pq
src, dst = sys.argv[1], sys.argv[2]
t = pq.read_table(src, columns=["prompt_id", "reward"])
ids, rewards = t["prompt_id"].to_pylist(), t["reward"].to_pylist()
groups = {}
for i, r in zip(ids, rewards):
    groups.setdefault(i, []).append(r)
stats = {}
for key, rs in groups.items():
    mean = sum(rs) / len(rs)
    std = math.sqrt(sum((r - mean) ** 2 for r in rs) / len(rs))
    stats[key] = (mean, std)
adv = []
for i, r in zip(ids, rewards):
    mean, std = stats[i]
    adv.append((r - mean) / std if std > 0 else 0.0)
f = pq.ParquetFile(src, pre_buffer=False)
writer, start = None, 0
for batch in f.iter_batches():
    batch = batch.append_column("advantage", pa.array(adv[start:start + batch.num_rows], pa.float64()))
    start += batch.num_rows
    writer = writer or pq.ParquetWriter(dst, batch.schema)
    writer.write_batch(batch)
writer.close()
"""


def generate(path: Path, rows: int, group_size: int, mean_tokens: int, seed: int, scattered: bool = False,
             needs: frozenset[str] = frozenset()) -> int:
    """Write synthetic rollouts chunk by chunk (bounded memory); return the token count.
    ``mean_tokens=0`` writes only prompt_id and reward (for the advantages-only benchmark);
    ``scattered`` shuffles the ids within each chunk of 65,536 rows, so no group's rows
    are contiguous (as after a trainer's batch balancing). ``needs`` (of the estimators run)
    adds a ``reward_baseline`` column for ``baseline``, and for ``length`` without log-prob
    columns a ``response_mask`` of 1-7 tokens per row."""
    rng = np.random.default_rng(seed)
    writer, tokens = None, 0
    for start in range(0, rows, CHUNK_ROWS):
        n = min(CHUNK_ROWS, rows - start)
        ids = (np.arange(start, start + n) // group_size).astype(np.int64)
        if scattered:
            ids = rng.permutation(ids)
        columns = {"prompt_id": ids, "reward": (rng.uniform(size=n) < 0.5).astype(np.float64)}
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
        writer = writer or pq.ParquetWriter(path, table.schema)
        writer.write_table(table, row_group_size=CHUNK_ROWS)
        tokens += int(lengths.sum())
    writer.close()
    return tokens


def run(argv: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{proc.stderr.read().decode()}")
    return elapsed, usage.ru_maxrss * 1024


def grpo() -> list[str]:
    found = shutil.which("grpo", path=os.path.dirname(sys.executable)) or shutil.which("grpo")
    return [found] if found else [sys.executable, "-m", "grpo_cli"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--mean-tokens", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None, help="where the data goes (default: a temp dir)")
    parser.add_argument("--skip-naive", action="store_true")
    parser.add_argument("--scattered", action="store_true", help="shuffle ids within each chunk: no group is contiguous")
    parser.add_argument("--estimators", default="grpo", help="comma-separated: time `grpo advantages -o` with each")
    parser.add_argument("--losses", default="ppo", help="comma-separated: time `grpo objective -o` with each")
    args = parser.parse_args()
    estimators = args.estimators.split(",")
    needs = frozenset(n for e in estimators for n in lookup(e).needs)

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="grpo-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    data, out = workdir / "rollouts.parquet", workdir / "out.parquet"
    tokens = generate(data, args.rows, args.group_size, args.mean_tokens, args.seed, args.scattered, needs)
    py = sys.executable
    cases = [
        ("advantages", "floor (pyarrow read + write, 1 column)", [py, "-c", FLOOR, str(data), str(out), "1"]),
        *(("advantages", "grpo advantages -o" + (f" --estimator {e}" if e != "grpo" else ""),
           [*grpo(), "advantages", str(data), "--estimator", e, "-o", str(out), "-q"]) for e in estimators),
        ("advantages", "naive per-sample Python loop", [py, "-c", NAIVE, str(data), str(out)]),
        ("objective", "floor (pyarrow read + write, 8 columns)", [py, "-c", FLOOR, str(data), str(out), "8"]),
        *(("objective", "grpo objective -o" + (f" --loss {loss}" if loss != "ppo" else ""),
           [*grpo(), "objective", str(data), "--loss", loss, "-o", str(out), "-q"]) for loss in args.losses.split(",")),
        ("summary", "read floor (pyarrow read only)", [py, "-c", READ_FLOOR, str(data)]),
        ("summary", "grpo objective (summary only)", [*grpo(), "objective", str(data), "-q"]),
    ]
    if not args.mean_tokens:
        cases = [c for c in cases if c[0] == "advantages"]
    if args.skip_naive:
        cases = [c for c in cases if not c[1].startswith("naive")]
    print(f"{args.rows:,} rows, {tokens:,} tokens, groups of {args.group_size}{' (scattered)' if args.scattered else ''}, {os.cpu_count()} cores, "
          f"{args.runs} runs each, data {data.stat().st_size / 2**20:.1f} MiB\n")
    print("| command | median s | x floor | peak RSS MiB |")
    print("| --- | ---: | ---: | ---: |")
    floor = {}
    for task, label, argv in cases:
        results = [run(argv) for _ in range(args.runs)]
        median = statistics.median(t for t, _ in results)
        peak = max(m for _, m in results)
        floor.setdefault(task, median)
        print(f"| {label} | {median:.3f} | {median / floor[task]:.2f} | {peak / 2**20:.0f} |", flush=True)
    if args.workdir is None:
        shutil.rmtree(workdir)


if __name__ == "__main__":
    main()
