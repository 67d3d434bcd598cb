"""How the `grpo` command tunes its process (grpo_cli.process): the allocator settings and the one switch."""

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_cli.process import keep_freed_memory


def test_the_cli_allocator_setting_takes_on_glibc():
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("mallopt is glibc's")
    assert keep_freed_memory() is True


SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "rollouts.parquet"
POOL = "import pyarrow as pa; print(pa.default_memory_pool().backend_name)"


def _pool_after_setting(env: dict) -> str:
    code = f"from grpo_cli.process import keep_freed_memory; keep_freed_memory(); {POOL}"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip()


def test_the_cli_allocator_setting_puts_arrows_buffers_on_the_same_heap():
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("mallopt is glibc's")
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    assert _pool_after_setting(env) == "system"


ARENAS = """
import ctypes, threading
from grpo_cli.process import keep_freed_memory
keep_freed_memory()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
both = threading.Barrier(4)

def allocate():
    both.wait()
    libc.malloc(1000)
    both.wait()

threads = [threading.Thread(target=allocate) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
libc.malloc_stats()  # one "Arena N:" section per arena, on stderr
"""


def _arenas(env: dict) -> int:
    done = subprocess.run([sys.executable, "-c", ARENAS], env=env, capture_output=True, text=True, check=True)
    return sum(line.startswith("Arena ") for line in done.stderr.splitlines())


def test_every_thread_allocates_from_one_arena_unless_the_user_says_otherwise():
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("mallopt is glibc's")
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    assert _arenas(env) == 1
    assert _arenas({**env, "MALLOC_ARENA_MAX": "4"}) > 1


def test_a_users_arrow_pool_is_kept():
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("mallopt is glibc's")
    assert _pool_after_setting({**os.environ, "ARROW_DEFAULT_MEMORY_POOL": "jemalloc"}) == "jemalloc"


def _after_the_grpo_command(tmp_path, expression: str, env: dict) -> str:
    """``expression`` evaluated once `grpo advantages` on the sample has run in a process of its own."""
    script = tmp_path / "grpo_then.py"
    script.write_text(
        "import atexit, sys\n"
        "from grpo_cli import cli\n"
        f"atexit.register(lambda: sys.stderr.write(str({expression})))\n"
        "sys.argv = ['grpo', 'advantages', sys.argv[1], '-q']\n"
        "cli.main()\n"
    )
    done = subprocess.run([sys.executable, str(script), str(SAMPLE)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stderr.strip().splitlines()[-1]


def test_the_grpo_command_allocates_arrows_buffers_from_the_heap(tmp_path):
    """``cli.main`` makes the setting before anything imports pyarrow."""
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("mallopt is glibc's")
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    assert _after_the_grpo_command(tmp_path, "__import__('pyarrow').default_memory_pool().backend_name", env) == "system"


HUGE_PAGES = "__import__('numpy._core.multiarray', fromlist=['_']).__dict__.get('_get_madvise_hugepage', lambda: 'unknown')()"


@pytest.mark.slow  # a process per setting
def test_the_grpo_command_keeps_numpys_arrays_off_huge_pages_unless_the_user_says_otherwise(tmp_path):
    """``cli.main`` makes the setting before anything imports numpy; ``NUMPY_MADVISE_HUGEPAGE`` stands."""
    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    by_default = _after_the_grpo_command(tmp_path, HUGE_PAGES, env)
    if by_default == "unknown":
        pytest.skip("this numpy does not say whether it asks for huge pages")
    assert by_default == "False"
    assert _after_the_grpo_command(tmp_path, HUGE_PAGES, {**env, "NUMPY_MADVISE_HUGEPAGE": "1"}) == "True"


@pytest.mark.slow  # four processes
def test_grpo_tuning_0_turns_every_tweak_off_and_changes_no_result(tmp_path):
    """One switch (grpo_cli.process): with ``GRPO_TUNING=0`` the command sets none of the
    variables, keeps the collector as it was, does not hide pandas, and writes the same bytes."""
    env = {k: v for k, v in os.environ.items() if k not in ("ARROW_DEFAULT_MEMORY_POOL", "NUMPY_MADVISE_HUGEPAGE", "OPENBLAS_NUM_THREADS")}
    seen = "[__import__('os').environ.get(k) for k in ('ARROW_DEFAULT_MEMORY_POOL', 'NUMPY_MADVISE_HUGEPAGE', 'OPENBLAS_NUM_THREADS')]"
    seen += " + [__import__('gc').get_freeze_count() > 0, __import__('grpo_cli.process').process.WithoutPandas in sys.meta_path]"
    assert _after_the_grpo_command(tmp_path, seen, {**env, "GRPO_TUNING": "0"}) == "[None, None, None, False, False]"
    assert _after_the_grpo_command(tmp_path, seen, env) == "['system', '0', '1', True, True]"
    outputs = []
    for tuning in ("0", "1"):
        out = tmp_path / f"tuning{tuning}.parquet"
        done = subprocess.run(
            [sys.executable, "-m", "grpo_cli", "advantages", str(SAMPLE), "-q", "-o", str(out)],
            env={**env, "GRPO_TUNING": tuning},
            capture_output=True,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
