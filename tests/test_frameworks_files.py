"""The files trainers really write (issue 42), in ``sample_data/frameworks/`` (made by its
``make.py`` field for field from verl 0.9.1, TRL 1.16.0 and OpenRLHF 0.11.2): each trap of the
issue on them, where the wrong grouping is impossible and the error names the fix, against hand
computations; and no combination of realistic options on them ends in an internal error."""

import json
import math
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .conftest import SAMPLE, examples, read_json, run_grpo

FRAMEWORKS = SAMPLE / "frameworks"
VERL_ROLLOUT = FRAMEWORKS / "verl" / "rollout"
VERL_VALIDATION = FRAMEWORKS / "verl" / "validation" / "10.jsonl"
VERL_BATCH = FRAMEWORKS / "verl" / "batch.parquet"
TRL = FRAMEWORKS / "trl" / "completions"
OPENRLHF = FRAMEWORKS / "openrlhf" / "experiences.jsonl"
TRL_REWARDS = ("--reward-col", "accuracy_reward", "--reward-col", "format_reward")
N = 4  # responses per prompt in every file


def jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def one_line_error(ran) -> str:
    """The single stderr line of a refused run."""
    lines = ran.stderr.decode().strip().splitlines()
    assert ran.returncode in (1, 2) and len(lines) == 1, ran.stderr.decode()
    return lines[0]


def group_normalised(r: np.ndarray, ddof: int, eps: float) -> np.ndarray:
    """(r - mean) / (std + eps) over consecutive blocks of N (the groups of these files)."""
    g = r.reshape(-1, N)
    return ((g - g.mean(1, keepdims=True)) / (g.std(1, ddof=ddof, keepdims=True) + eps)).reshape(-1)


def test_openrlhf_unique_index_is_refused_naming_num_generations(tmp_path):
    """OpenRLHF's ``index`` numbers samples (split_rollout_samples: ``sample.index = [i]``): as a
    prompt id every group would be one row. Refused, naming --num-generations; with
    ``--prompt-col none --num-generations 4`` the groups are OpenRLHF's blocks of
    n_samples_per_prompt, and group_norm's advantage is (r - mean) / (std + 1e-9), std ddof 1
    (OpenRLHF 0.11.2 experience_maker.py)."""
    refused = one_line_error(run_grpo("advantages", str(OPENRLHF), "--reward-col", "rewards", check=False))
    assert "'index'" in refused and "--num-generations" in refused and "--prompt-col" in refused
    out = tmp_path / "a.jsonl"
    run_grpo(
        "advantages",
        str(OPENRLHF),
        "--reward-col",
        "rewards",
        "--prompt-col",
        "none",
        "--num-generations",
        "4",
        "--preset",
        "openrlhf",
        "-o",
        str(out),
        "-q",
    )
    rows = jsonl(OPENRLHF)
    r = np.array([row["rewards"] for row in rows])
    np.testing.assert_allclose([row["advantage"] for row in jsonl(out)], group_normalised(r, ddof=1, eps=1e-9), rtol=0, atol=1e-12)


def test_openrlhf_rows_out_of_index_order_are_never_grouped_by_file_order(tmp_path):
    """The same experiences with two samples of different prompts swapped in the file (their
    ``index`` kept, as a dump in micro-batch order has them): blocks of 4 in file order would
    mix two prompts, so the run stops naming the fix; grouped by the prompt's text, the groups
    and advantages are OpenRLHF's (blocks of 4 in ``index`` order)."""
    rows = jsonl(OPENRLHF)
    rows[3], rows[4] = rows[4], rows[3]
    shuffled = tmp_path / "experiences.jsonl"
    shuffled.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "a.jsonl"
    args = ("--reward-col", "rewards", "--prompt-col", "none", "--num-generations", "4", "--preset", "openrlhf")
    ran = run_grpo("advantages", str(shuffled), *args, "-o", str(out), "-q", check=False)
    assert "experiences.jsonl: row 4: column 'index' goes down here (4 then 3)" in one_line_error(ran) and not out.exists()
    assert "sort the rows by 'index', or pass --prompt-col the prompt's column" in one_line_error(ran)
    by_text, expected = tmp_path / "by_text.jsonl", tmp_path / "expected.jsonl"
    run_grpo("advantages", str(shuffled), *args[:2], "--prompt-col", "prompts", *args[4:], "-o", str(by_text), "-q")  # the prompt's text
    run_grpo("advantages", str(OPENRLHF), *args, "-o", str(expected), "-q")
    by_index = {row["index"]: row["advantage"] for row in jsonl(expected)}
    assert all(math.isclose(row["advantage"], by_index[row["index"]], abs_tol=1e-12) for row in jsonl(by_text))


def test_verl_step_files_are_read_in_natural_order(tmp_path):
    """verl writes ``{step}.jsonl``: a folder of steps 1, 2 and 10 is read 1, 2, 10 (plain sorting
    would put 10 before 2)."""
    assert sorted(p.name for p in VERL_ROLLOUT.iterdir()) == ["1.jsonl", "10.jsonl", "2.jsonl"]
    out = tmp_path / "a.jsonl"
    run_grpo("advantages", str(VERL_ROLLOUT), "--prompt-col", "step", "--prompt-col", "input", "-o", str(out), "-q")
    assert [row["step"] for row in jsonl(out)] == [1] * 8 + [2] * 8 + [10] * 8


def test_verl_dump_of_one_step_groups_by_prompt_text(tmp_path):
    """verl's dumps hold no uid and shuffled rows: within a step the prompt text is the group.
    DAPO's score (+1 / -1) overwrites the summed one; grpo's default: (r - mean) / std,
    population std, eps 0. Step 10 holds 2 prompts x 4: each group's rewards are +-1, so its
    advantage is (r - m) / s with m, s of that group."""
    out = tmp_path / "a.jsonl"
    run_grpo("advantages", str(VERL_ROLLOUT / "10.jsonl"), "--prompt-col", "input", "-o", str(out), "-q")
    rows = jsonl(out)
    for text in {row["input"] for row in rows}:
        r = np.array([row["score"] for row in rows if row["input"] == text])
        assert len(r) == N
        expected = np.zeros(N) if r.std() == 0 else (r - r.mean()) / r.std()
        np.testing.assert_allclose([row["advantage"] for row in rows if row["input"] == text], expected, atol=1e-12)


def test_verl_validation_dump_names_both_rewards():
    """verl's validation dumps hold ``score`` and ``reward`` (its summed score): the run stops and
    names both; ``--reward-col score`` reads DAPO's."""
    refused = one_line_error(run_grpo("advantages", str(VERL_VALIDATION), "--prompt-col", "input", check=False))
    assert "'reward'" in refused and "'score'" in refused and "--reward-col" in refused
    run_grpo("advantages", str(VERL_VALIDATION), "--prompt-col", "input", "--reward-col", "score", "-q")


def test_a_composite_key_keeps_the_steps_apart(tmp_path):
    """The prompts of step 1 recur at step 10: `--prompt-col step --prompt-col input` keeps
    them in six groups of 4, where `--prompt-col input` alone would merge them into groups of 8."""
    figures = tmp_path / "s.json"
    run_grpo("advantages", str(VERL_ROLLOUT), "--prompt-col", "step", "--prompt-col", "input", "-q", "--summary-json", str(figures))
    assert read_json(figures)["group_sizes"] == {"4": 6} and read_json(figures)["grouped_by"] == "by columns 'step', 'input'"


def test_verl_steps_never_merge_the_same_prompt(tmp_path):
    """A prompt that recurs in a later step (a later epoch) is another group, or the run stops."""
    ran = run_grpo("advantages", str(VERL_ROLLOUT), "--prompt-col", "input", "-q", "--summary-json", str(tmp_path / "s.json"), check=False)
    assert ran.returncode != 0 or read_json(tmp_path / "s.json")["group_sizes"] == {"4": 6}


def test_groups_named_by_prompt_text_are_told_apart():
    """verl's ``input`` starts with the chat template's ``system`` line: the names of two groups
    in compare's table of most affected groups differ."""
    shown = run_grpo("compare", str(VERL_ROLLOUT / "10.jsonl"), "--prompt-col", "input", "--estimators", "grpo,rloo", env={"COLUMNS": "100"})
    table = shown.stderr.decode().split("most affected groups", 1)[1]
    names = [line.split("│")[1].strip() for line in table.splitlines() if line.startswith("│")]
    assert len(names) == 2 and names[0] != names[1], names


def test_verl_batch_groups_by_uid_over_index_and_sums_the_token_scores(tmp_path):
    """A DataProto batch holds ``uid`` (the group) and ``index`` (the dataset row): uid wins, and
    inspect says why. ``token_level_scores`` holds the score on the last valid token: the row's
    reward is its sum, said in the summary. Under --preset verl the advantage is verl's GRPO,
    (r - mean) / (std + 1e-6), std ddof 1: the batch's own ``advantages`` on every valid token."""
    summary = tmp_path / "s.json"
    out = tmp_path / "a.parquet"
    ran = run_grpo("advantages", str(VERL_BATCH), "--preset", "verl", "-o", str(out), "--summary-json", str(summary), env={"COLUMNS": "100"})
    figures = read_json(summary)
    assert figures["columns"]["prompt"] == "uid" and figures["grouped_by"] == "by column 'uid'"
    assert figures["rewards_summed"] == ["token_level_scores"] and "sum of token_level_scores" in ran.stderr.decode()
    why = run_grpo("inspect", str(VERL_BATCH), env={"COLUMNS": "200"}).stderr.decode()
    assert "uid over index" in why
    batch = pq.read_table(VERL_BATCH).to_pydict()
    r = np.array([sum(row) for row in batch["token_level_scores"]])
    assert all(len(set(batch["uid"][k : k + N])) == 1 for k in range(0, len(r), N))  # a uid's rows are a block
    expected = group_normalised(r, ddof=1, eps=1e-6)
    written = pq.read_table(out)["advantage"].to_numpy()
    np.testing.assert_allclose(written, expected, atol=1e-12)
    logged = [row[0] for row in batch["advantages"]]  # verl broadcasts A over the valid tokens (float32)
    np.testing.assert_allclose(written, logged, atol=1e-6)


def test_verl_batch_on_policy_objective_has_ratio_one(tmp_path):
    """No new log-probs in a saved batch (on-policy: new = old): --logprobs-col old_log_probs gives
    every ratio 1, so PPO's clipped term is A on every valid token; the default aggregation
    (seq-mean-token-sum) makes the objective the mean over rows of the sum of the row's
    advantages, read from the batch's token-level ``advantages``."""
    summary = tmp_path / "s.json"
    ran = run_grpo("objective", str(VERL_BATCH), "--logprobs-col", "old_log_probs", "--summary-json", str(summary), env={"COLUMNS": "100"})
    figures = read_json(summary)
    assert figures["ratio"] == {"mean": 1.0, "min": 1.0, "max": 1.0}
    assert "every ratio is 1" in ran.stderr.decode()
    batch = pq.read_table(VERL_BATCH).to_pydict()
    per_row = [sum(a for a, m in zip(adv, mask) if m) for adv, mask in zip(batch["advantages"], batch["response_mask"])]
    assert math.isclose(figures["objective"], sum(per_row) / len(per_row), abs_tol=1e-12)
    # verl's own: token-mean of A over every valid token, from the logged advantages (float32) or
    # from the scores by --estimator grpo: the same number
    logged, recomputed = (tmp_path / "logged.json", tmp_path / "recomputed.json")
    run_grpo("objective", str(VERL_BATCH), "--logprobs-col", "old_log_probs", "--preset", "verl", "-q", "--summary-json", str(logged))
    run_grpo(
        "objective",
        str(VERL_BATCH),
        "--logprobs-col",
        "old_log_probs",
        "--preset",
        "verl",
        "--estimator",
        "grpo",
        "-q",
        "--summary-json",
        str(recomputed),
    )
    tokens = [a for adv, mask in zip(batch["advantages"], batch["response_mask"]) for a, m in zip(adv, mask) if m]
    assert math.isclose(read_json(logged)["objective"], sum(tokens) / len(tokens), abs_tol=1e-12)
    assert math.isclose(read_json(recomputed)["objective"], read_json(logged)["objective"], abs_tol=1e-6)


def test_trl_logged_advantage_kept_and_compared(tmp_path):
    """TRL logs its ``advantage`` beside one column per reward function (null where it returned
    None). --advantage-name keeps it and writes ours beside; under --preset trl ours is TRL's:
    r = nansum of the functions, (r - mean) / (std + 1e-4), std ddof 1, a row no function scored
    (step 20's sixth) left out of its group's mean and std, its advantage 0 (TRL 1.16.0
    grpo_trainer.py); ``compare`` with ``column:advantage`` shows no sign flip, rank correlation 1."""
    out = tmp_path / "a.parquet"
    run_grpo("advantages", str(TRL), "--num-generations", "4", *TRL_REWARDS, "--preset", "trl", "--advantage-name", "ours", "-o", str(out), "-q")
    table = pq.read_table(out).to_pydict()
    scores = np.array([table["accuracy_reward"], table["format_reward"]], dtype=float)  # null: NaN
    unscorable = np.isnan(scores).all(0)
    assert unscorable.sum() == 1
    r = np.where(unscorable, np.nan, np.nansum(scores, axis=0)).reshape(-1, N)
    mean = np.nanmean(r, 1, keepdims=True)
    std = np.sqrt(np.nansum((r - mean) ** 2, 1, keepdims=True) / ((~np.isnan(r)).sum(1, keepdims=True) - 1))
    expected = np.nan_to_num((r - mean) / (std + 1e-4), nan=0.0).reshape(-1)
    np.testing.assert_allclose(table["ours"], expected, atol=1e-12)
    np.testing.assert_allclose(table["ours"], table["advantage"], atol=1e-12)
    summary = tmp_path / "c.json"
    run_grpo(
        "compare", str(TRL), "--num-generations", "4", *TRL_REWARDS, "--estimators", "column:advantage,trl", "-q", "--summary-json", str(summary)
    )
    figures = read_json(summary)
    assert figures["rank_correlation"] == {"column:advantage / trl": 1.0} and figures["sign_flips"] == {"column:advantage / trl": 0.0}


def test_a_pickled_batch_is_refused_with_the_conversion(tmp_path):
    """verl's DataProto.save_to_disk writes a torch pickle: never unpickled, one line with the recipe."""
    pickled = tmp_path / "batch.pt"
    pickled.write_bytes(b"PK\x03\x04archive/data.pkl")
    refused = one_line_error(run_grpo("advantages", str(pickled), check=False))
    assert "DataProto" in refused and "parquet" in refused


# Realistic options on these files; each command draws from those it takes (every command takes
# the grouping and reward options it needs). Each run must exit 0, or 1 / 2 with one line.
OPTIONS = [
    *(["--prompt-col", c] for c in ("input", "none", "uid", "index", "prompt")),
    *(["--num-generations", n] for n in ("4", "3")),
    *(["--reward-col", c] for c in ("rewards", "score", "token_level_scores")),
    list(TRL_REWARDS),
    ["--reward-weights", "1,0.5"],
    *(["--preset", p] for p in ("verl", "trl", "openrlhf")),
    *(["--logprobs-col", c] for c in ("old_log_probs", "action_log_probs")),
    ["--old-logprobs-col", "rollout_log_probs"],
    ["--rollout-logprobs-col", "ref_log_prob"],
    ["--mask-col", "none"],
    ["--ref-logprobs-col", "none"],
    *(["--advantage-col", c] for c in ("none", "advantages")),
    *(["--estimator", e] for e in ("rloo", "reinforce-baseline", "gae")),
    ["--scale", "batch"],
    ["--std", "sample"],
    ["--whiten"],
    ["--kl-in-reward", "0.1"],
    ["--reward-clip", "-1,1"],
    ["--advantage-clip", "-1,1"],
    ["--advantage-name", "ours"],
    ["--round", "3"],
    *(["--loss", loss] for loss in ("cispo", "gspo")),
    ["--agg", "token-mean"],
    ["--beta", "0.04"],
    ["--is", "token", "--is-cap", "2"],
    ["--reject", "k3", "--reject-threshold", "1"],
    ["--max-length", "8"],
    ["--empty-rows", "skip"],
    ["--bypass", "ppo_clip"],
    ["--is-cap", "2"],
    ["--is-mask", "0.5,2"],
    ["--worst", "3"],
    ["--logratio-clamp", "20"],
    ["--json"],
    ["--drop-zero-variance"],
    ["--keep-if", "0<mean"],
    ["--overlong-buffer", "2", "--max-length", "8"],
    ["--truncated", "drop"],
    ["--top", "2"],
    *(["--by", c] for c in ("none", "step")),
    ["--by-file"],
    *(["--preset", p] for p in ("verl@0.7", "trl@1.9", "twinkle", "twinkle@0.1")),
    *(["--estimator", e] for e in ("optimal-token-baseline", "tir-optimal-token-baseline")),
    *(["--group-stats", g] for g in ("float32", "float32-one-pass")),
    ["--micro-batch-size", "3"],
    *(["--micro-batch-rule", r] for r in ("global", "row-weighted", "mean")),
    ["--top-entropy-quantile", "0.5"],
    ["--loss", "ppo_value"],
    ["--value-clip", "0.1"],
    *(["--agg", a] for a in ("luspo", "luspo-padded", "seq-mean-token-sum-norm")),
    ["--empty-rows", "refuse"],
    ["--is-weights-col", "rollout_is_weights"],
    ["--sum-pi-squared-col", "old_log_probs"],
]
# each file with the options that read it as its docs page says, and those objective needs too
FILES = {
    VERL_ROLLOUT: ([["--prompt-col", "step", "--prompt-col", "input"]], []),
    VERL_ROLLOUT / "10.jsonl": ([["--prompt-col", "input"]], []),
    VERL_VALIDATION: ([["--prompt-col", "input"], ["--reward-col", "score"]], []),
    VERL_BATCH: ([], [["--logprobs-col", "old_log_probs"]]),
    TRL: ([["--num-generations", "4"], list(TRL_REWARDS)], []),
    OPENRLHF: ([["--reward-col", "rewards"], ["--prompt-col", "none"], ["--num-generations", "4"]], [["--logprobs-col", "action_log_probs"]]),
}
ESTIMATORS = ["column:advantage,trl", "column:advantages,verl", "grpo,rloo", "trl:reward_weights=1 0.5,rloo", "trl:reward_weights=2,rloo"]
COMMANDS = ("advantages", "objective", "mismatch", "inspect", "filter", "compare")


def takes(command: str, option: list[str]) -> bool:
    from typer.main import get_command

    from grpo_cli.cli import app

    return any(option[0] in param.opts for param in get_command(app).commands[command].params)


@st.composite
def runs(draw) -> list[str]:
    command = draw(st.sampled_from(COMMANDS))
    path = draw(st.sampled_from(sorted(FILES)))
    reads, objective = FILES[path]
    base = [*reads, *(objective if command == "objective" else [])] if draw(st.integers(0, 3)) else []
    given = {option[0] for option in base}
    chosen = draw(st.lists(st.sampled_from([o for o in OPTIONS if takes(command, o) and o[0] not in given]), max_size=3, unique_by=tuple))
    written = ["-o", "OUT.parquet"] if takes(command, ["-o"]) and draw(st.booleans()) else []
    required = ["--estimators", draw(st.sampled_from(ESTIMATORS))] if command == "compare" else []
    options = [flag for option in [*base, *chosen] if takes(command, option) for flag in option]
    return [command, str(path), *required, *options, *written]


@settings(max_examples=examples(150), deadline=None)
@given(runs())
def test_no_internal_error_on_framework_files(args):
    """Any realistic options on any framework-shaped file: exit 0, or 1 / 2 with one line on
    stderr; never an internal error or a traceback."""
    with tempfile.TemporaryDirectory() as folder:
        args = [f"{folder}/out.parquet" if a == "OUT.parquet" else a for a in args]
        ran = run_grpo(*args, "-q", check=False, env={"COLUMNS": "100"})
    err = ran.stderr.decode()
    assert "internal error" not in err and "Traceback" not in err, err
    assert ran.returncode in (0, 1, 2), err
    if ran.returncode:
        assert len(err.strip().splitlines()) == 1, err


def test_objective_recomputes_advantages_with_advantage_col_none(tmp_path):
    """verl's batch holds its own `advantages`, which `objective` reads by default;
    `--advantage-col none` computes them from the rewards instead (the preset's GRPO, grouped
    by uid, from the summed token_level_scores), the same as `grpo advantages` writes."""
    args = ("--preset", "verl", "--logprobs-col", "old_log_probs")
    out, figures = tmp_path / "o.parquet", tmp_path / "s.json"
    run_grpo("objective", str(VERL_BATCH), *args, "--advantage-col", "none", "-o", str(out), "--summary-json", str(figures), "-q")
    summary = read_json(figures)
    assert summary["columns"]["advantage"] is None and summary["columns"]["reward"] == "token_level_scores"
    assert summary["config"]["advantages"]["estimator"] == "grpo" and summary["grouped_by"] == "by column 'uid'"
    written = tmp_path / "a.parquet"
    run_grpo("advantages", str(VERL_BATCH), "--preset", "verl", "-o", str(written), "-q")
    assert pq.read_table(out)["advantage"].to_pylist() == pq.read_table(written)["advantage"].to_pylist()
    with_estimator = run_grpo("objective", str(VERL_BATCH), *args, "--advantage-col", "none", "--estimator", "rloo", "-q", check=False)
    assert with_estimator.returncode == 0, with_estimator.stderr.decode()


def test_compare_reads_verl_token_advantages_as_one_per_row(tmp_path):
    """verl writes an outcome advantage as ``A * response_mask``: the row's A on every valid
    token, 0 on padding. compare takes it as A per row (the first entry); a list whose tokens
    hold two values (per-token advantages) is refused naming its row."""
    out = tmp_path / "c.parquet"
    run_grpo("compare", str(VERL_BATCH), "--estimators", "column:advantages,grpo", "--preset", "verl", "-o", str(out), "-q")
    table = pq.read_table(VERL_BATCH)
    first = [a[0] for a in table["advantages"].to_pylist()]
    written = pq.read_table(out)
    assert written["advantage_column_advantages"].to_pylist() == first
    np.testing.assert_allclose(written["advantage_column_advantages"].to_numpy(), written["advantage_grpo"].to_numpy(), atol=1e-6)
    lists = table["advantages"].to_pylist()
    lists[5][:2] = [0.25, -0.25]  # GAE-like: two values on one row's tokens
    pq.write_table(
        table.set_column(table.column_names.index("advantages"), "advantages", pa.array(lists, pa.list_(pa.float32()))), tmp_path / "gae.parquet"
    )
    line = one_line_error(run_grpo("compare", str(tmp_path / "gae.parquet"), "--estimators", "column:advantages,grpo", check=False))
    assert "gae.parquet: row 5" in line and "column 'advantages' holds two values" in line


@pytest.mark.parametrize("command", ["advantages", "inspect", "filter", "compare"])
def test_list_rewards_are_summed_over_the_valid_tokens(tmp_path, command):
    """A list reward is summed over the row's valid tokens (the mask's 1s): padding that
    holds a number is not the row's reward. Rows [0, 0, 1 | 5] and [0, 2 | 7] (| the end of
    the valid tokens) are rewards 1 and 2, mean 1.5; `--mask-col none` sums every entry, 6
    and 9, mean 7.5."""
    path, figures = tmp_path / "b.parquet", tmp_path / "s.json"
    scores = pa.array([[0.0, 0.0, 1.0, 5.0], [0.0, 2.0, 7.0]])
    pq.write_table(pa.table({"uid": ["a", "a"], "token_level_scores": scores, "response_mask": pa.array([[1, 1, 1, 0], [1, 1, 0]])}), path)
    for mask, mean in ((), 1.5), (("--mask-col", "none"), 7.5):
        if command == "compare":  # RLOO unscaled: r - the other row's reward, -+1 (-+3 unmasked)
            out = tmp_path / "c.parquet"
            run_grpo(command, str(path), "--estimators", "grpo,rloo:scale=none", *mask, "-o", str(out), "-q")
            assert pq.read_table(out)["advantage_rloo_scale_none"].to_pylist() == ([-3.0, 3.0] if mask else [-1.0, 1.0])
        elif command == "filter":  # the group's mean reward decides: kept under each sum
            run_grpo(command, str(path), "--keep-if", f"{mean - 0.25}<mean<{mean + 0.25}", *mask, "-q", "--summary-json", str(figures))
            assert read_json(figures)["kept"]["rows"] == 2
        else:
            run_grpo(command, str(path), *mask, "-q", "--summary-json", str(figures))
            assert read_json(figures)["reward"]["mean"] == mean
