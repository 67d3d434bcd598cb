"""Results never depend on the thread count (batch size is covered in test_cli_objective)."""

import os
import subprocess
import sys

SCRIPT = """
import hashlib, numpy as np
from grpo_cli import advantages, AdvantageConfig
rng = np.random.default_rng(0)
g = rng.integers(0, 25_000, 200_000)
r = rng.normal(size=200_000) * 1e3 + rng.uniform(size=200_000)
for cfg in (AdvantageConfig(), AdvantageConfig(estimator="rloo", scale="batch", std="sample")):
    print(hashlib.sha256(advantages(r, g, cfg).tobytes()).hexdigest())
"""


def digests(threads: int) -> str:
    env = {**os.environ, "POLARS_MAX_THREADS": str(threads)}
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, check=True, text=True).stdout


def test_advantages_are_bit_identical_across_thread_counts():
    assert digests(1) == digests(2) == digests(4)
