"""Options declared once (:mod:`grpo_cli.options`): the commands that group rows or read
rewards take them with one meaning, a command refuses options it has no use for, and an
option that takes one value refuses to be given twice."""

import inspect
import json
import os
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import grpo_cli
from grpo_cli import commands
from grpo_cli.cli import app
from grpo_cli.commands.base import build

from .conftest import SAMPLE, run_grpo


def grpo(*args: str):
    return CliRunner().invoke(app, list(args))


def figures(*args: str) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        summary = os.path.join(folder, "summary.json")
        result = grpo(*args, "--summary-json", summary, "-q")
        assert result.exit_code == 0, result.output
        with open(summary) as f:
            return json.load(f)


@pytest.fixture(scope="module")
def two_rewards(tmp_path_factory) -> str:
    """The sample with a second reward column, ``format``: a 0/1 reward of its own."""
    table = pq.read_table(SAMPLE / "rollouts.parquet")
    format_reward = (np.arange(table.num_rows) % 3 == 0).astype(np.float64)
    path = tmp_path_factory.mktemp("rewards") / "two.parquet"
    pq.write_table(table.append_column("format", pa.array(format_reward)), path)
    return str(path)


def test_reward_weights_give_the_same_rewards_and_advantages_in_each_command(two_rewards, tmp_path):
    given = ("--reward-col", "reward", "--reward-col", "format", "--reward-weights", "1,0.5", "--reward-clip", "0,1.2")
    advantages = figures("advantages", two_rewards, *given, "-o", str(tmp_path / "a.parquet"))
    inspected = figures("inspect", two_rewards, *given)
    assert inspected["reward"] == advantages["reward"] and inspected["advantage"] == advantages["advantage"]
    table = pq.read_table(two_rewards)
    weighted = np.clip(np.array(table["reward"].to_pylist()) + 0.5 * np.array(table["format"].to_pylist()), 0, 1.2)
    assert advantages["reward"]["mean"] == pytest.approx(weighted.mean(), rel=1e-12)
    figures("compare", two_rewards, *given, "--estimators", "grpo,rloo", "-o", str(tmp_path / "c.parquet"))
    written = pq.read_table(tmp_path / "a.parquet")["advantage"]
    assert pq.read_table(tmp_path / "c.parquet")["advantage_grpo"].equals(written)
    filtered = figures("filter", two_rewards, *given, "--drop-zero-variance", "--keep-if", "0.5<mean")
    assert filtered["zero_variance"]["groups"] == advantages["zero_variance_groups"]["count"]
    means = {}
    for key, r in zip(table["prompt_id"].to_pylist(), weighted):
        means.setdefault(key, []).append(r)
    assert filtered["keep_if"]["groups"] == sum(np.mean(v) <= 0.5 for v in means.values())


def test_a_preset_gives_the_same_advantages_in_compare_and_inspect(tmp_path):
    sample = str(SAMPLE / "rollouts.parquet")
    advantages = figures("advantages", sample, "--preset", "trl", "-o", str(tmp_path / "a.parquet"))
    assert figures("inspect", sample, "--preset", "trl")["advantage"] == advantages["advantage"]
    compared = figures("compare", sample, "--preset", "trl", "--estimators", "grpo,rloo", "-o", str(tmp_path / "c.parquet"))
    assert compared["config"]["grpo"] == advantages["config"]
    assert pq.read_table(tmp_path / "c.parquet")["advantage_grpo"].equals(pq.read_table(tmp_path / "a.parquet")["advantage"])


@pytest.mark.parametrize("command", ["advantages", "objective", "inspect", "compare", "filter", "mismatch"])
def test_an_option_that_takes_one_value_refuses_to_be_given_twice(command):
    result = grpo(command, str(SAMPLE / "rollouts.parquet"), "--input-format", "parquet", "--input-format", "jsonl")
    assert result.exit_code == 2 and result.stderr == "Error: --input-format given twice; it takes one value\n"


def test_a_flag_given_twice_is_refused_and_several_prompt_columns_are_one_key():
    result = grpo("advantages", str(SAMPLE / "rollouts.parquet"), "--whiten", "--whiten")
    assert result.exit_code == 2 and result.stderr == "Error: --whiten given twice; it takes one value\n"
    proc = run_grpo("advantages", str(SAMPLE / "rollouts.parquet"), "--prompt-col", "prompt_id", "--prompt-col", "uid", check=False)
    assert proc.returncode == 1 and proc.stderr.decode().startswith("Error: ") and "no column 'uid' for prompt id" in proc.stderr.decode()
    proc = run_grpo("advantages", str(SAMPLE / "rollouts.parquet"), "--prompt-col", "prompt_id", "--prompt-col", "prompt_id", check=False)
    assert proc.returncode == 2 and "--prompt-col takes each column of a composite key once" in proc.stderr.decode()


@pytest.mark.parametrize("command", ["advantages", "objective", "inspect", "filter", "compare", "mismatch"])
def test_a_composite_key_groups_alike_in_every_command(command, tmp_path):
    """The same prompt at two steps is two groups with `--prompt-col step --prompt-col input`
    (one group of 4 without the step), in every command that groups rows."""
    path = tmp_path / "steps.parquet"
    logprobs = pa.array([[-1.0, -0.5]] * 8)
    table = pa.table(
        {
            "step": [1, 1, 1, 1, 2, 2, 2, 2],
            "input": ["a", "a", "b", "b", "a", "a", "b", "b"],
            "score": [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0],
            "logprobs": logprobs,
            "old_logprobs": logprobs,
            "rollout_logprobs": logprobs,
        }
    )
    pq.write_table(table, path)
    extra = {"filter": ["--drop-zero-variance"], "compare": ["--estimators", "grpo,rloo"]}.get(command, [])
    key = ["--prompt-col", "step", "--prompt-col", "input"]
    f = figures(command, str(path), *key, *extra)
    groups = f["groups"] if "groups" in f else f["index"]["groups"] if "index" in f else None
    if command in ("advantages", "inspect", "filter", "compare"):
        assert groups == 4, command
    if command == "advantages":
        assert f["grouped_by"] == "by columns 'step', 'input'" and f["columns"]["prompt"] == ["step", "input"]
        assert f["zero_variance_groups"]["count"] == 2  # step 1 'b' [1, 1] and step 2 'a' [0, 0]
        assert figures(command, str(path), "--prompt-col", "input", "--by", "none")["groups"] == 2
    if command == "filter":
        assert f["kept"]["groups"] == 2
    if command == "objective":
        assert f["grouped_by"] == "by columns 'step', 'input'"


@pytest.mark.parametrize("option", ["--reward-col", "--reward-weights", "--preset", "--estimator"])
def test_mismatch_takes_no_reward_options(option):
    result = grpo("mismatch", str(SAMPLE / "rollouts_vllm.parquet"), option, "x")
    assert result.exit_code == 2 and "No such option" in result.output


def test_the_commands_that_group_or_read_rewards_take_the_same_options():
    shared = {"prompt_col", "num_generations", "reward_col", "reward_weights", "multi_reward", "on_null", "reward_clip", "preset"}
    for name in ("advantages", "objective", "inspect", "compare"):
        params = {p.name: p for p in build(name).params}
        assert shared <= set(params), name
        assert {p: params[p].help for p in shared} == {p.name: p.help for p in build("advantages").params if p.name in shared}
    assert {"prompt_col", "input_format", "hive"} <= {p.name for p in build("mismatch").params}


def test_the_registry_lists_every_command_module():
    assert commands.names() == ("advantages", "compare", "filter", "inspect", "mismatch", "objective", "presets", "report")
    assert all(build(name).help.splitlines()[0] == commands.summary(name) for name in commands.names())


def test_mismatch_checks_the_group_size_as_every_command_does():
    vllm = str(SAMPLE / "rollouts_vllm.parquet")
    assert grpo("mismatch", vllm, "--num-generations", "8", "-q").exit_code == 0
    proc = run_grpo("mismatch", vllm, "--num-generations", "7", "-q", check=False)
    assert proc.returncode == 1 and proc.stderr.decode() == (f"Error: {vllm}: prompt id 'gsm8k-0000' has 8 rows, expected --num-generations 7\n")


def test_the_file_functions_have_typed_keyword_only_signatures():
    for name in ("advantages", "objective", "mismatch", "inspect", "compare", "filter"):
        params = inspect.signature(getattr(grpo_cli, f"{name}_file")).parameters
        assert all(p.kind is not p.VAR_KEYWORD and p.annotation is not p.empty for p in params.values()), name
        assert [p.name for p in params.values() if p.kind is not p.KEYWORD_ONLY] == (["input"] if name == "inspect" else ["input", "output"])
    with pytest.raises(
        grpo_cli.UnknownOptionError, match=r"did you mean `reward_weights`, in a config object: config=AdvantageConfig\(reward_weights=...\)"
    ):
        grpo_cli.inspect_file(str(SAMPLE / "rollouts.parquet"), reward_weight=(1.0,))


def test_several_reward_columns_in_inspect_and_filter(two_rewards):
    f = grpo_cli.inspect_file(two_rewards, reward_col=["reward", "format"], config=grpo_cli.AdvantageConfig(reward_weights=(1.0, 0.5)))
    assert f["columns"]["reward"] == {"column": "reward, format", "why": "given", "option": "reward_col"}
    with pytest.raises(grpo_cli.UsageError, match="`reward_weights` has 1 weights for 2 reward columns"):
        grpo_cli.inspect_file(two_rewards, reward_col=["reward", "format"], config=grpo_cli.AdvantageConfig(reward_weights=(1.0,)))
    overlong = grpo_cli.FilterConfig(overlong_buffer=4, max_length=6)
    with pytest.raises(grpo_cli.UsageError, match=r"the overlong penalty rewrites the reward column, and there are 2 \(reward, format\)"):
        grpo_cli.filter_file(two_rewards, reward_col=["reward", "format"], config=overlong)
    with pytest.raises(grpo_cli.UsageError, match=r"^`grpo filter` reads the rewards, and `scale` is no reward option; drop it$"):
        grpo_cli.filter_file(two_rewards, config=overlong, advantage_config=grpo_cli.AdvantageConfig(scale="none"))


def test_errors_of_the_shared_options_name_their_flags_in_every_command():
    for command in ("inspect", "filter", "compare"):
        extra = {"compare": ["--estimators", "grpo,rloo"], "filter": ["--drop-zero-variance"]}.get(command, [])
        proc = run_grpo(command, str(SAMPLE / "rollouts.parquet"), "--reward-weights", "1,2", *extra, check=False)
        assert proc.returncode == 2 and proc.stderr.decode().startswith(
            "Error: --reward-weights has 2 weights for 1 reward columns (reward); give one weight per --reward-col"
        ), command


def test_compare_a_preset_for_every_estimator_and_a_preset_named_for_its_own():
    f = grpo_cli.compare_file(str(SAMPLE / "rollouts.parquet"), estimators="grpo,rloo,verl", config=grpo_cli.AdvantageConfig(preset="trl"))
    assert (f["config"]["grpo"]["preset"], f["config"]["grpo"]["std"], f["config"]["grpo"]["eps"]) == ("trl", "sample", 1e-4)
    assert f["config"]["rloo"]["preset"] == "trl" and f["config"]["verl"]["preset"] == "verl"


def test_a_config_field_is_its_options_one_declaration(monkeypatch):
    """Every field of a command's config object is one of its options, with the field's help
    and default; a field in the `rewards` group is an option of every command that reads
    rewards. So a new option is one field (and its test): shown here by adding one."""
    from dataclasses import fields

    from grpo_cli import AdvantageConfig, FilterConfig, MismatchConfig, ObjectiveConfig
    from grpo_cli import options as o

    taken = {
        "advantages": [AdvantageConfig],
        "objective": [ObjectiveConfig],
        "mismatch": [MismatchConfig],
        "filter": [FilterConfig],
    }
    for name, classes in taken.items():
        params = {p.name: p for p in build(name).params}
        for cls in classes:
            for f in fields(cls):
                assert f.name in params, (name, f.name)
                assert params[f.name].help.startswith(f.metadata["help"].split(" [")[0][:40]), (name, f.name)
    rewards = {f.name for f in fields(AdvantageConfig) if f.metadata["group"] == "rewards"}
    assert rewards == {"reward_weights", "multi_reward", "on_null", "reward_clip"}
    for name in ("advantages", "objective", "inspect", "filter", "compare"):
        assert rewards <= {p.name for p in build(name).params}, name

    @__import__("dataclasses").dataclass(frozen=True, kw_only=True)
    class Wider(AdvantageConfig):
        reward_scale: float = grpo_cli.config.option(1.0, "Multiply each reward by S.", group="rewards")

    added = o.config_options(Wider)["reward_scale"]
    assert added.group == "rewards" and added.type is float and added.info.help == "Multiply each reward by S. \\[default: 1.0]"
    assert added.info.rich_help_panel == o.ESTIMATOR and added.convert(None) is None


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["advantages", "--estimator", "remax", "--singleton", "reward"],
            "estimator 'remax' takes no groups, so no group of one row; drop --singleton",
        ),
        (["advantages", "--estimator", "gae", "--singleton", "zero"], "estimator 'gae' takes no groups"),
        (["advantages", "--estimator", "reinforce", "--singleton", "zero"], "estimator 'reinforce' takes no groups"),
        (
            ["advantages", "--estimator", "reinforce-baseline", "--whiten"],
            "estimator 'reinforce-baseline' always whitens its advantages; drop --whiten",
        ),
        (["advantages", "--multi-reward", "normalize-then-sum", "--whiten"], "--multi-reward 'normalize-then-sum' always whitens its advantages"),
        (
            ["filter", "--drop-zero-variance", "--mask-col", "logprobs"],
            "--mask-col is read only by --truncated 'mask', the overlong penalty or a list reward",
        ),
        (["filter", "--drop-zero-variance", "--truncated-col", "done"], "--truncated-col is read only by --truncated, and no such rule is given"),
        (["filter", "--drop-zero-variance", "--logprobs-col", "logprobs"], "--logprobs-col is read only by the overlong penalty"),
        (["compare", "--estimators", "grpo,rloo", "--mask-col", "logprobs"], "--mask-col is read only by an estimator that reads tokens"),
        (["compare", "--estimators", "grpo,rloo", "--baseline-col", "reward"], "--baseline-col is read only by estimator 'remax'"),
    ],
)
def test_an_option_that_would_do_nothing_is_refused(args, message):
    """No option is silently ignored (issue 43, class 16): each says why and exits 2."""
    proc = run_grpo(args[0], str(SAMPLE / "rollouts.parquet"), *args[1:], "-q", check=False)
    assert proc.returncode == 2 and proc.stderr.decode().startswith(f"Error: {message}"), proc.stderr.decode()
