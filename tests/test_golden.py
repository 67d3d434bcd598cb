"""Every estimator, loss, preset and command on ``sample_data/`` gives the summary and the
output bytes recorded in ``tests/golden/golden.json`` (see :mod:`tests.golden.cases`)."""

import json
from pathlib import Path

import pytest

from .conftest import ROOT
from .golden.cases import cases
from .golden.run import run_case

GOLDEN = json.loads((Path(__file__).parent / "golden" / "golden.json").read_text())


def test_every_case_is_recorded():
    assert sorted(GOLDEN) == sorted(cases())


@pytest.mark.parametrize("name", sorted(cases()))
def test_golden_run(name, tmp_path):
    (tmp_path / "sample_data").symlink_to(ROOT / "sample_data")
    assert run_case(cases()[name], tmp_path) == GOLDEN[name]
