"""The plan: columns and their roles, where advantages come from, and options that do not
apply to the resolved plan refused with what to pass instead."""

import pickle

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_cli import AdvantageConfig, ObjectiveConfig, UsageError
from grpo_cli.errors import ColumnNotFoundError
from grpo_cli.io import open_source
from grpo_cli.plan import plan_advantages
from grpo_cli.commands.objective import plan_objective
from grpo_cli.plan import OBJECTIVE_ESTIMATOR, objective_estimator

ROWS = {"prompt_id": ["a", "a"], "reward": [0.0, 1.0], "logprobs": [[-0.1], [-0.2]], "old_logprobs": [[-0.1], [-0.3]]}


def source_of(tmp_path, **columns):
    path = tmp_path / "r.parquet"
    pq.write_table(pa.table({**ROWS, **columns}), path)
    return open_source(str(path))


def test_advantages_plan(tmp_path, sample_parquet):
    with open_source(str(sample_parquet)) as source:
        plan = plan_advantages(source, output=str(tmp_path / "o.jsonl"), round_digits=3)
    assert plan.grouping.prompt == "prompt_id" and plan.inputs.rewards == ("reward",) and plan.estimator == AdvantageConfig()
    assert plan.output.targets == (str(tmp_path / "o.jsonl"),) and plan.output.format == "jsonl"
    assert pickle.loads(pickle.dumps(plan)) == plan  # names and numbers only: an engine can ship it


def test_objective_plan_advantage_sources(tmp_path):
    with source_of(tmp_path) as source:
        computed = plan_objective(source)
        assert computed.estimator == AdvantageConfig(estimator=OBJECTIVE_ESTIMATOR) and computed.inputs.rewards == ("reward",)
        assert computed.first_pass and computed.advantage is None
        grpo = plan_objective(source, advantage_config=AdvantageConfig(std="sample"))
        assert grpo.estimator.estimator == "grpo" and grpo.estimator.std == "sample"
    with source_of(tmp_path, advantage=[0.5, -0.5]) as source:
        read = plan_objective(source)
        assert read.advantage == "advantage" and read.estimator is None and read.inputs is None and not read.first_pass
        assert read.columns == ["logprobs", "old_logprobs", "advantage"]
        assert plan_objective(source, advantage_config=AdvantageConfig(estimator="rloo")).estimator.estimator == "rloo"
    with source_of(tmp_path, token_advantage=[[0.5], [-0.5]]) as source:
        per_token = plan_objective(source, advantage_col="token_advantage")
        assert per_token.per_token and per_token.tokens.advantage == "token_advantage" and per_token.advantage is None


@pytest.mark.parametrize(
    "options, message",
    [
        (
            {"scale": "group"},
            "`scale` applies to an estimator, and none is given: the advantages come from an advantage column "
            "if there is one, else from estimator 'mean', which takes no `scale`; pass `estimator` \\(e.g. 'grpo'\\), or drop `scale`",
        ),
        ({"std": "sample"}, "`std` applies to an estimator, and none is given"),
        ({"eps": 0.5}, "`eps` applies to an estimator, and none is given"),
    ],
)
def test_estimator_options_need_an_estimator(options, message):
    with pytest.raises(UsageError, match=message):
        objective_estimator(**options)
    assert objective_estimator() is None
    assert objective_estimator("grpo", **options).estimator == "grpo"


@pytest.mark.parametrize(
    "columns, options, error, message",
    [
        (
            {"advantage": [0.5, -0.5]},
            {"reward_col": "reward"},
            UsageError,
            "`reward_col` is not read: the advantages come from column 'advantage'; drop `reward_col`, or pass `estimator`",
        ),
        (
            {},
            {"advantage_col": "x", "advantage_config": AdvantageConfig()},
            UsageError,
            "pass either `advantage_col` or `advantage_config` \\(an estimator\\), not both",
        ),
        ({}, {"config": ObjectiveConfig(kl="k2")}, UsageError, "`kl` needs reference log-probs: pass `ref_logprobs_col`"),
        ({}, {"config": ObjectiveConfig(beta=0.1)}, UsageError, "`beta` > 0 needs reference log-probs: pass `ref_logprobs_col` \\(looked for"),
        ({}, {"output_format": "jsonl"}, UsageError, "`output_format` applies to written rows; pass `output` or `output_dir` too"),
        ({}, {"advantage_col": "nope"}, ColumnNotFoundError, "no column 'nope' for advantage \\(`advantage_col`\\)"),
    ],
)
def test_objective_options_that_do_not_apply(tmp_path, columns, options, error, message):
    with source_of(tmp_path, **columns) as source, pytest.raises(error, match=message):
        plan_objective(source, **options)


def test_advantages_options_that_do_not_apply(tmp_path):
    with source_of(tmp_path) as source:
        with pytest.raises(
            UsageError, match="`round_digits` rounds the written advantages \\(the summary never is\\); pass `output` or `output_dir`"
        ):
            plan_advantages(source, round_digits=2)
        with pytest.raises(UsageError, match="`num_generations` must be >= 1"):
            plan_advantages(source, num_generations=0)
    path = tmp_path / "noid.parquet"
    pq.write_table(pa.table({"reward": [0.0, 1.0]}), path)
    with open_source(str(path)) as source, pytest.raises(ColumnNotFoundError, match="pass `prompt_col`, or `num_generations` N"):
        plan_advantages(source)
