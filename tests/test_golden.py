"""Every estimator, loss, preset and command on ``sample_data/`` gives the summary and the
output recorded in ``tests/golden/golden.json`` (see :mod:`tests.golden.cases`): the same
layout and values, floats within :data:`~tests.golden.run.TOLERANCE` (a CPU's math library
moves their last bit), everything else exactly."""

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from .conftest import ROOT
from .golden.cases import cases
from .golden.run import TOLERANCE, output_digest, run_case

GOLDEN = json.loads((Path(__file__).parent / "golden" / "golden.json").read_text())


def differences(got, want, at: str = "") -> list[str]:
    """Where ``got`` differs from ``want`` (JSON values): floats beyond :data:`TOLERANCE`,
    anything else at all."""
    if isinstance(got, dict) and isinstance(want, dict):
        if got.keys() != want.keys():
            return [f"{at}: keys {sorted(got)} != {sorted(want)}"]
        return [d for k in want for d in differences(got[k], want[k], f"{at}.{k}")]
    if isinstance(got, list) and isinstance(want, list):
        if len(got) != len(want):
            return [f"{at}: {len(got)} items != {len(want)}"]
        return [d for k, (g, w) in enumerate(zip(got, want)) for d in differences(g, w, f"{at}[{k}]")]
    if isinstance(got, float) or isinstance(want, float):
        numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (got, want))
        return [] if numbers and math.isclose(got, want, **TOLERANCE) else [f"{at}: {got!r} != {want!r}"]
    return [] if got == want else [f"{at}: {got!r} != {want!r}"]


def test_every_case_is_recorded():
    assert sorted(GOLDEN) == sorted(cases())


@pytest.mark.parametrize("name", sorted(cases()))
def test_golden_run(name, tmp_path):
    (tmp_path / "sample_data").symlink_to(ROOT / "sample_data")
    assert differences(run_case(cases()[name], tmp_path), GOLDEN[name]) == []


def test_a_last_bit_passes_and_any_other_change_shows(tmp_path):
    """What a CPU's math library moves (a float's last bit) passes; a value moved by 1e-8 of
    itself, a list's length, an id or an encoding does not."""
    x = np.linspace(-2.5, 2.5, 101)
    x -= x.mean()  # the sum cancels to near zero, as advantages' does

    def digest(values, ids=range(101), lengths=(1,) * 101, **options) -> dict:
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        tokens = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(np.resize(values, offsets[-1]), pa.float32()))
        pq.write_table(pa.table({"id": list(ids), "advantage": values, "tokens": tokens}), tmp_path / "out.parquet", **options)
        return output_digest(tmp_path / "out.parquet")

    want = digest(x)
    assert differences(digest(np.nextafter(x, np.inf)), want) == []
    assert differences(digest(x * (1 + 1e-8)), want) != []
    assert differences(digest(x, ids=[*range(100), 0]), want) != []
    assert differences(digest(x, lengths=(2, *(1,) * 99, 0)), want) != []
    assert differences(digest(x, use_dictionary=False), want) != []
