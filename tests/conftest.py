import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import settings

# Property tests assert numbers, not times: on a loaded machine an example's first run (an
# import, a thread pool) can pass hypothesis' 200 ms deadline and fail a correct test.
settings.register_profile("no-deadline", deadline=None)
settings.load_profile("no-deadline")

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


def run_grpo(*args: str, stdin: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([grpo_executable(), *args], input=stdin, capture_output=True, timeout=120)
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
