"""The estimator registry: names, aliases, specs and help from the functions' docstrings."""

import pytest

from grpo_cli import UsageError
from grpo_cli.estimators import ESTIMATORS, SCALES, lookup, names


def test_names_and_aliases():
    assert names() == ["grpo", "rloo", "mean", "drgrpo", "unbiased", "passk", "gpg"]
    assert lookup("unbiased") is ESTIMATORS["mean"] and lookup("rloo").name == "rloo"
    with pytest.raises(UsageError, match=r"unknown `estimator` 'gdpo' \(valid: grpo, rloo, mean, drgrpo, unbiased, passk, gpg\)"):
        lookup("gdpo")


@pytest.mark.parametrize("name", ESTIMATORS)
def test_every_spec_is_complete(name):
    spec = ESTIMATORS[name]
    assert spec.help and "math::" in spec.baseline_removed.__doc__  # a help line and the formula
    assert spec.default_scale in spec.scales and set(spec.scales) <= set(SCALES)
    assert spec.scope in ("group", "file") and spec.level in ("row", "token")
    assert set(spec.params) <= {"scale", "std", "eps"} and "reward" in spec.needs


def test_the_mean_baseline_is_never_scaled():
    assert ESTIMATORS["mean"].scales == ("none",) and ESTIMATORS["mean"].params == ("scale",)
    assert ESTIMATORS["grpo"].default_scale == "group" and ESTIMATORS["rloo"].default_scale == "group"
