"""The estimator registry: names, aliases, specs and help from the functions' docstrings."""

import pytest

from grpo_cli import UsageError
from grpo_cli.estimators import ESTIMATORS, SCALES, lookup, names


def test_names_and_aliases():
    # listed by name, each estimator's aliases after it
    valid = ["flash-reinforce", "batch-mean", "gae", "gpg", "grpo", "mean", "drgrpo", "unbiased", "opo", "optimal-token-baseline", "passk"]
    valid += ["reinforce", "reinforce-baseline", "remax", "rloo", "tir-optimal-token-baseline"]
    assert names() == valid
    assert lookup("unbiased") is ESTIMATORS["mean"] and lookup("rloo").name == "rloo"
    with pytest.raises(UsageError, match=r"unknown `estimator` 'gdpo' \(valid: " + ", ".join(valid) + r"\)"):
        lookup("gdpo")


@pytest.mark.parametrize("name", ESTIMATORS)
def test_every_spec_is_complete(name):
    spec = ESTIMATORS[name]
    assert spec.help and "math::" in spec.compute.__doc__  # a help line and the formula
    assert spec.default_scale in spec.scales and set(spec.scales) <= set(SCALES)
    assert spec.scope in ("group", "file") and spec.level in ("row", "token")
    assert set(spec.params) <= {"scale", "std", "eps", "gamma", "lam", "group_stats"} and set(spec.needs) <= {
        "length",
        "baseline",
        "values",
        "old",
        "sum_pi_squared",
    }
    assert spec.whitens in (None, "tokens") and (spec.level == "row" or spec.whitens == "tokens" or spec.sums is not None)


def test_the_mean_baseline_is_never_scaled():
    assert ESTIMATORS["mean"].scales == ("none",) and ESTIMATORS["mean"].params == ("scale",)
    assert ESTIMATORS["grpo"].default_scale == "group" and ESTIMATORS["rloo"].default_scale == "group"
