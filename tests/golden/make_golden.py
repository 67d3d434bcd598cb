"""Record the golden runs (``python -m tests.golden.make_golden``): only when a change of a
computed number or byte is intended, and said so in its commit."""

import json
import tempfile
from pathlib import Path

from tests.golden.cases import cases
from tests.golden.run import run_case

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).with_name("golden.json")

if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "sample_data").symlink_to(ROOT / "sample_data")
        records = {name: run_case(args, Path(tmp)) for name, args in cases().items()}
    GOLDEN.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n")
    print(f"{len(records)} runs, {sum(r['exit'] != 0 for r in records.values())} refused")
