"""`grpo filter`: each rule on a hand-built case, the written rows, and the errors."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_cli import FilterConfig, filter_file
from grpo_cli.errors import InputError, UsageError

from ..conftest import run_grpo


@pytest.fixture
def rollouts(tmp_path):
    # groups: a = [1, 1] (no signal), b = [0, 1], c = [0.5] (one row), d = [0, 0]
    path = tmp_path / "r.parquet"
    pq.write_table(
        pa.table(
            {
                "prompt_id": ["a", "a", "b", "b", "c", "d", "d"],
                "reward": [1.0, 1.0, 0.0, 1.0, 0.5, 0.0, 0.0],
                "truncated": [False, False, True, False, False, False, True],
                "response_mask": [[1, 1], [1, 1, 1, 1], [1, 1, 0], [1], [1, 1, 1, 1, 1, 1], [1], [1, 1]],
            }
        ),
        path,
    )
    return path


def kept(path):
    return pq.read_table(path).to_pydict()


def test_zero_variance_drops_groups_of_equal_rewards_and_keeps_groups_of_one(rollouts, tmp_path):
    out = tmp_path / "o.parquet"
    f = filter_file(str(rollouts), str(out), config=FilterConfig(drop_zero_variance=True))
    assert kept(out)["prompt_id"] == ["b", "b", "c"]
    assert f["zero_variance"] == {"groups": 2, "rows": 4} and f["kept"] == {"rows": 3, "groups": 2}
    assert f["unused_columns"] == ["truncated"]  # a truncation column it did not use is said


@pytest.mark.parametrize(
    "rule, ids",
    [
        ("0<mean<1", ["b", "b", "c"]),
        ("0<=mean<1", ["b", "b", "c", "d", "d"]),
        ("mean<=0.5", ["b", "b", "c", "d", "d"]),
        ("0<std", ["b", "b"]),
        ("0.5<=max", ["a", "a", "b", "b", "c"]),
    ],
)
def test_keep_if(rollouts, tmp_path, rule, ids):
    out = tmp_path / "o.parquet"
    filter_file(str(rollouts), str(out), config=FilterConfig(keep_if=rule))
    assert kept(out)["prompt_id"] == ids


def test_truncated_rows_dropped_or_masked(rollouts, tmp_path):
    out = tmp_path / "o.parquet"
    f = filter_file(str(rollouts), str(out), config=FilterConfig(truncated="drop"))
    assert kept(out)["prompt_id"] == ["a", "a", "b", "c", "d"] and f["truncated"] == {"rows": 2, "action": "drop"}
    f = filter_file(str(rollouts), str(out), config=FilterConfig(truncated="mask"))
    rows = kept(out)
    assert len(rows["prompt_id"]) == 7 and f["dropped"]["rows"] == 0
    assert rows["response_mask"] == [[1, 1], [1, 1, 1, 1], [0, 0, 0], [1], [1, 1, 1, 1, 1, 1], [1], [0, 0]]


def test_overlong_penalty_rewrites_the_reward(rollouts, tmp_path):
    # valid tokens 2, 4, 2, 1, 6, 1, 2; max length 6, buffer 4: expected 2, penalty -(L - 2) / 4 * 0.5 below 0
    out = tmp_path / "o.parquet"
    f = filter_file(str(rollouts), str(out), config=FilterConfig(overlong_buffer=4, max_length=6, overlong_factor=0.5))
    rewards = kept(out)["reward"]
    assert rewards == pytest.approx([1.0, 1.0 - 0.25, 0.0, 1.0, 0.5 - 0.5, 0.0, 0.0])
    assert f["overlong"] == {"rows": 2, "penalty_mean": pytest.approx(-0.375), "penalty_min": -0.5}
    assert f["columns"]["tokens"] == "response_mask"


def test_batches_do_not_change_the_output(rollouts, tmp_path):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    config = FilterConfig(drop_zero_variance=True, truncated="mask", overlong_buffer=2, max_length=4)
    assert filter_file(str(rollouts), str(a), config=config) == filter_file(str(rollouts), str(b), config=config, batch_rows=2, threads=1)
    assert pq.read_table(a).equals(pq.read_table(b))


def test_report_only_writes_nothing_and_errors(rollouts, tmp_path):
    proc = run_grpo("filter", str(rollouts), "--drop-zero-variance", "-q", "--summary-json", str(tmp_path / "s.json"))
    assert json.loads((tmp_path / "s.json").read_text())["kept"]["rows"] == 3 and sorted(p.name for p in tmp_path.iterdir()) == [
        "r.parquet",
        "s.json",
    ]
    with pytest.raises(UsageError, match="no rule given"):
        FilterConfig()
    with pytest.raises(UsageError, match="needs `max_length`"):
        FilterConfig(overlong_buffer=4)
    with pytest.raises(UsageError, match="keep_if"):
        FilterConfig(keep_if="median<1")
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"prompt_id": ["a", "a"], "reward": [1.0, None], "truncated": [0, 2]}), bad)
    with pytest.raises(InputError, match=r"row 1 \(prompt id 'a'\): column 'reward' is null"):
        filter_file(str(bad), config=FilterConfig(drop_zero_variance=True))
    proc = run_grpo("filter", str(bad), "--truncated", "drop", "--reward-col", "reward", check=False)
    assert proc.returncode == 1 and "'reward' is null" in proc.stderr.decode()


def test_a_truncation_flag_other_than_0_or_1_is_refused(tmp_path):
    bad = tmp_path / "t.parquet"
    pq.write_table(pa.table({"prompt_id": ["a", "a"], "reward": [1.0, 0.0], "truncated": [0, 2]}), bad)
    with pytest.raises(InputError, match=r"row 1 \(prompt id 'a'\): column 'truncated' \(truncation flag\) must hold booleans or 0/1"):
        filter_file(str(bad), config=FilterConfig(truncated="drop"))


def test_rules_that_drop_every_row_write_nothing_and_say_so(tmp_path):
    """Issue 43, class 17: an empty file, which the next command would refuse, is never
    written; the run says so in one line (exit 1), and without an output it reports."""
    path = tmp_path / "same.parquet"
    pq.write_table(pa.table({"prompt_id": [0, 0, 1, 1], "reward": [1.0, 1.0, 0.0, 0.0]}), path)
    out = tmp_path / "f.parquet"
    proc = run_grpo("filter", str(path), "--drop-zero-variance", "-o", str(out), check=False)
    assert proc.returncode == 1 and proc.stderr.decode() == (
        f"Error: {path}: the rules drop every one of the 4 rows; nothing is written (run without --output or --output-dir to see why)\n"
    )
    assert not out.exists()
    assert filter_file(str(path), config=FilterConfig(drop_zero_variance=True))["kept"]["rows"] == 0
