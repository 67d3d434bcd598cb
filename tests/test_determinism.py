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


def test_windowed_file_advantages_equal_the_one_piece_computation(tmp_path):
    """Contiguous groups are computed a window at a time on threads; the numbers must be the
    bits of the whole-array computation, whatever the thread count."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from grpo_cli import AdvantageConfig, advantages, advantages_file
    from grpo_cli.engines.local import WINDOW_ROWS

    rng = np.random.default_rng(1)
    sizes = rng.integers(1, 40, size=WINDOW_ROWS // 4)  # variable groups, several windows in all
    ids = np.repeat(np.arange(len(sizes)), sizes)
    rewards = rng.normal(size=len(ids)) * 1e3 + rng.integers(0, 2, size=len(ids))
    path = tmp_path / "r.parquet"
    pq.write_table(pa.table({"prompt_id": ids, "reward": rewards}), path)
    assert len(ids) > 3 * WINDOW_ROWS
    for config in (AdvantageConfig(), AdvantageConfig(estimator="rloo", std="sample"), AdvantageConfig(scale="none")):
        expected = advantages(rewards, ids, config)
        for threads in (1, 2, 3):
            out = tmp_path / f"out{threads}.parquet"
            advantages_file(str(path), str(out), config=config, threads=threads)
            assert pq.read_table(out)["advantage"].to_numpy().tobytes() == expected.tobytes()


def test_contiguous_groups_from_parquet_never_import_polars(sample_parquet, tmp_path):
    """polars costs ~0.15 s to import; the common layout (parquet in, contiguous ids) skips it."""
    script = (
        "import sys; from grpo_cli.cli import main; sys.argv = ['grpo', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('polars' in sys.modules)"
    )
    run = subprocess.run(
        [sys.executable, "-c", script, "advantages", str(sample_parquet), "-o", str(tmp_path / "o.parquet"), "-q"],
        capture_output=True, text=True, check=True,
    )
    assert run.stdout.strip() == "False"
