import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

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


def reference_advantages(rewards, groups, *, estimator="grpo", scale="group", ddof=0, eps=0.0) -> np.ndarray:
    """Slow, obvious reference: a Python loop over groups."""
    rewards = np.asarray(rewards, dtype=np.float64)
    out = np.zeros_like(rewards)
    batch_std = rewards.std(ddof=ddof) if rewards.size > ddof else np.nan
    for key in set(groups):
        idx = [i for i, g in enumerate(groups) if g == key]
        r = rewards[idx]
        if len(r) < 2 or r.max() == r.min():
            continue
        a = r - r.mean()
        if estimator == "rloo":
            a = a * len(r) / (len(r) - 1)
        if scale == "group":
            a = a / (r.std(ddof=ddof) + eps)
        elif scale == "batch":
            a = a / (batch_std + eps)
        out[idx] = a
    return out


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


def reference_row_objective(new, old, adv, eps_low=0.2, eps_high=0.2, dual_clip=None, mask=None) -> float:
    """Slow, obvious reference: one row's sum_t of the clipped surrogate, token by token."""
    import math

    total = 0.0
    for t, (n, o) in enumerate(zip(new, old)):
        if mask is not None and not mask[t]:
            continue
        ratio = math.exp(n - o)
        term = min(ratio * adv, min(max(ratio, 1 - eps_low), 1 + eps_high) * adv)
        if dual_clip is not None and adv < 0:
            term = max(term, dual_clip * adv)
        total += term
    return total
