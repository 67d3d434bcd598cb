"""Where a `grpo` run spends its time, and how many cores it keeps busy while it does.

    python benchmarks/timeline.py objective rollouts.parquet -o out.parquet --threads 16
    python benchmarks/timeline.py --interval 0.05 advantages rollouts.parquet -o out.parquet

Runs the command in this process, as the `grpo` console script does (its process tuning first),
with a timer around each call of the pipeline's stages, and samples the process's CPU time
(all threads, user and system) every ``--interval`` seconds (default 0.1). Prints to stderr,
after the command's own output:

- the run: wall seconds, CPU seconds, the cores it kept busy, the start-up (from this script's
  start to the first stage: imports, the options, the plan) and the cores kept busy after it;
- each stage: its calls, the seconds its calls took (summed over the threads that made them),
  their CPU seconds (the calling thread's own: a wait on Arrow's or another pool's threads
  takes none) and when its first call began and its last ended;
- a timeline: per interval, the cores used and how many threads were in each stage.

Stages: ``read`` (the main thread waiting for the next batch, which Arrow decodes on its own
threads), ``kernel`` (a batch's math, on the engine's threads), ``write`` (a batch handed to the
output on the writer thread, waiting there for the row groups held encoding and joining them),
``encode`` (a part of a row group encoded by pyarrow), ``join`` (a row group's parts appended
to the file: their bytes copied into it, on the writer thread, within ``write`` or ``close``)
and ``close`` (the output's last row groups and footer). The timers wrap internal functions of
grpo_cli: this is a benchmark's tool, kept in step with them by ``tests/test_benchmark_smoke.py``.
It asserts nothing about time. For the many-core machine, run it with ``--threads 2`` and with
the default: where the stages' threads and the cores used stop growing is where a run stops
scaling.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
from pathlib import Path

START = time.perf_counter()
if importlib.util.find_spec("grpo_cli") is None:  # a checkout, not installed: its code
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grpo_cli import process  # noqa: E402  (before numpy and pyarrow, as the console script tunes)

process.tune()

from dataclasses import dataclass, field  # noqa: E402
from functools import wraps  # noqa: E402

from grpo_cli import cli  # noqa: E402
from grpo_cli.engines import local  # noqa: E402
from grpo_cli.io import outputs, parquet_footer, parquet_writer  # noqa: E402
from grpo_cli.io.formats import Reader  # noqa: E402

STAGES = ("read", "kernel", "write", "encode", "join", "close")
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Calls:
    """Each stage's calls: ``(stage, began, ended, cpu seconds of the calling thread)``."""

    calls: list[tuple[str, float, float, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def timed(self, stage: str, fn):
        @wraps(fn)
        def call(*args, **kwargs):
            began, cpu = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                with self.lock:
                    self.calls.append((stage, began - START, time.perf_counter() - START, time.thread_time() - cpu))

        return call

    def timed_batches(self, guarded_batches):
        """The reader's batches, each ``next`` timed as ``read``."""

        read = self.timed("read", next)

        @wraps(guarded_batches)
        def batches(*args, **kwargs):
            found = guarded_batches(*args, **kwargs)
            while (batch := read(found, None)) is not None:
                yield batch

        return batches


def process_cpu() -> float:
    """This process's CPU seconds so far, every thread's, user and system."""
    fields = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def sampled(interval: float, samples: list[tuple[float, float]], done: threading.Event) -> None:
    while not done.wait(interval):
        samples.append((time.perf_counter() - START, process_cpu()))


def report(calls: list[tuple[str, float, float, float]], samples: list[tuple[float, float]], interval: float) -> None:
    """Print the run, the stages and the timeline (to stderr, where `grpo` prints its tables)."""
    end, cpu = time.perf_counter() - START, process_cpu()
    out = sys.stderr
    first = min((began for _, began, _, _ in calls), default=end)
    at_first = next((c for t, c in samples if t >= first), cpu)
    then = (cpu - at_first) / max(end - first, 1e-9)
    print(f"\nwall {end:.3f} s, CPU {cpu:.2f} s, {cpu / end:.2f} cores; start-up {first:.3f} s, then {then:.2f} cores", file=out)
    print("\n| stage | calls | seconds | CPU s | first began | last ended |\n| --- | ---: | ---: | ---: | ---: | ---: |", file=out)
    for stage in STAGES:
        mine = [c for c in calls if c[0] == stage]
        if mine:
            took, used = sum(e - b for _, b, e, _ in mine), sum(c for *_, c in mine)
            span = f"{min(b for _, b, _, _ in mine):.3f} | {max(e for _, _, e, _ in mine):.3f}"
            print(f"| {stage} | {len(mine)} | {took:.3f} | {used:.3f} | {span} |", file=out)
    print(f"\n| from s | cores used | {' | '.join(STAGES)} |\n| ---: | ---: |{' ---: |' * len(STAGES)}", file=out)
    last = [(end, cpu)] if not samples or end - samples[-1][0] >= interval / 2 else []  # a shorter last interval: ticks of 10 ms
    for (t0, c0), (t1, c1) in zip([(0.0, 0.0), *samples], [*samples, *last]):
        threads = [sum(max(0.0, min(e, t1) - max(b, t0)) for s, b, e, _ in calls if s == stage) / (t1 - t0) for stage in STAGES]
        print(f"| {t0:.2f} | {(c1 - c0) / (t1 - t0):.2f} | " + " | ".join(f"{n:.1f}" if n else "" for n in threads) + " |", file=out)


def main() -> None:
    interval = 0.1
    if sys.argv[1:2] == ["--interval"]:
        interval = float(sys.argv[2])
        del sys.argv[1:3]
    recorded = Calls()
    local.run_kernel = recorded.timed("kernel", local.run_kernel)
    outputs.Sink.write = recorded.timed("write", outputs.Sink.write)
    outputs.Sink.close = recorded.timed("close", outputs.Sink.close)
    parquet_writer.RowGroupWriter._encoded = recorded.timed("encode", parquet_writer.RowGroupWriter._encoded)
    parquet_footer.JoinedFile.append = recorded.timed("join", parquet_footer.JoinedFile.append)
    Reader.guarded_batches = recorded.timed_batches(Reader.guarded_batches)
    cli.tune = lambda: None  # tuned above, before numpy and pyarrow were imported
    samples: list[tuple[float, float]] = []
    done = threading.Event()
    threading.Thread(target=sampled, args=(interval, samples, done), daemon=True).start()
    sys.argv = ["grpo", *sys.argv[1:]]
    try:
        cli.main()
    except SystemExit:
        done.set()
        report(recorded.calls, samples, interval)
        raise


if __name__ == "__main__":
    main()
