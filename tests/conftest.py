from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import traceback
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import settings

# Property tests assert numbers, not times: on a loaded machine an example's first run (an
# import, a thread pool) can pass hypothesis' 200 ms deadline and fail a correct test.
# The whole suite tries every property's examples ("full"); a run without the slow tests
# (`pytest -m "not slow"`) a fifth of them ("quick"); HYPOTHESIS_PROFILE picks one.
settings.register_profile("full", deadline=None)
settings.register_profile("quick", deadline=None, max_examples=20)
settings.load_profile("full")


def pytest_configure(config) -> None:
    quick = "not slow" in " ".join((config.getoption("markexpr") or "").split())
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "quick" if quick else "full"))


def examples(n: int) -> int:
    """A property's ``n`` examples in the full profile; a fifth of them (at least 10) in the quick one."""
    return max(n * settings.default.max_examples // 100, min(n, 10))


ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data"


def grpo_executable() -> str:
    """The installed console script, next to this interpreter (a venv) or on PATH."""
    for folder in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        candidate = Path(folder) / "grpo"
        if candidate.exists():
            return str(candidate)
    found = shutil.which("grpo")
    assert found, "the `grpo` command is not installed (pip install -e '.[test]')"
    return found


def run_grpo(*args: str, stdin: bytes | None = None, check: bool = True, env: dict[str, str | None] | None = None) -> Ran:
    """Run ``grpo args`` in this process: the CLI's :data:`~grpo_cli.cli.app` with stdin,
    stdout and stderr on temporary files (real descriptors, as a pipe has: the command copies
    into stdout's and points it at /dev/null on an error), ``env`` set (``None``: unset) for
    the run. It is the command as a user runs it, less what :func:`grpo_cli.cli.main` does to
    the process (garbage collector, pandas blocked, the quick exit, a closed pipe's 141):
    tests of those use :func:`run_grpo_process`."""
    from grpo_cli.cli import app

    with contextlib.ExitStack() as stack:
        into, out, err = (stack.enter_context(tempfile.TemporaryFile()) for _ in range(3))
        into.write(stdin or b"")
        into.seek(0)
        environ = stack.enter_context(pytest.MonkeyPatch.context())
        for name, value in (env or {}).items():
            environ.delenv(name, raising=False) if value is None else environ.setenv(name, value)
        code = _run_app(app, list(args), into, out, err)
        out.seek(0)
        err.seek(0)
        ran = Ran([*args], code, out.read(), err.read())
    if check and ran.returncode != 0:
        raise AssertionError(f"grpo {' '.join(args)} exited {ran.returncode}:\n{ran.stderr.decode()}")
    return ran


@dataclasses.dataclass
class Ran:
    """A run's exit code and what it wrote, as :class:`subprocess.CompletedProcess` holds them."""

    args: list[str]
    returncode: int
    stdout: bytes
    stderr: bytes


def _run_app(app, args: list[str], into, out, err) -> int:
    """``app(args)`` with the standard streams on duplicates of ``into``, ``out`` and ``err``'s
    descriptors; its exit code as :func:`grpo_cli.cli.main` makes it (a traceback and 1 for an
    exception, as Python's own exit)."""
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin = open(os.dup(into.fileno()), encoding="utf-8")
    sys.stdout = open(os.dup(out.fileno()), "w", encoding="utf-8")
    sys.stderr = open(os.dup(err.fileno()), "w", encoding="utf-8", errors="backslashreplace", buffering=1)
    try:
        app(args, prog_name="grpo")
        code = 0
    except SystemExit as exc:
        code = 0 if exc.code is None else exc.code
        if not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
    except Exception:
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdin, sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.close()
        sys.stdin, sys.stdout, sys.stderr = saved
    return code


def run_grpo_process(
    *args: str, stdin: bytes | None = None, check: bool = True, env: dict[str, str | None] | None = None
) -> subprocess.CompletedProcess:
    """Run the installed ``grpo`` command in its own process (``env`` as :func:`run_grpo` takes it)."""
    environ = {**os.environ, **(env or {})}
    environ = {name: value for name, value in environ.items() if value is not None}
    proc = subprocess.run([grpo_executable(), *args], input=stdin, capture_output=True, timeout=120, env=environ)
    if check and proc.returncode != 0:
        raise AssertionError(f"grpo {' '.join(args)} exited {proc.returncode}:\n{proc.stderr.decode()}")
    return proc


@pytest.fixture
def sample_parquet() -> Path:
    return SAMPLE / "rollouts.parquet"


@pytest.fixture
def sample_jsonl() -> Path:
    return SAMPLE / "rollouts.jsonl"


def write_jsonl_rows(path, rows) -> Path:
    """Write dicts as JSON Lines (one object per line) and return the path."""
    Path(path).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return Path(path)


def gathered_references(package: str, folder: Path) -> dict:
    """The slow references of a registry's tests: every ``REFERENCES`` dict of the test modules
    ``package.test_*`` in ``folder`` (each estimator's or loss's own test holds its own)."""
    found: dict = {}
    for path in sorted(folder.glob("test_*.py")):
        found.update(getattr(importlib.import_module(f"{package}.{path.stem}"), "REFERENCES", {}))
    return found


def read_json(path) -> dict:
    return json.loads(Path(path).read_text())


@pytest.fixture
def steps(tmp_path, sample_parquet):
    """The sample split into 4 step files of 80 rows (groups of 8 stay whole)."""
    folder = tmp_path / "steps"
    folder.mkdir()
    table = pq.read_table(sample_parquet)
    for k in range(4):
        pq.write_table(table.slice(80 * k, 80), folder / f"step_{k}.parquet")
    return folder
