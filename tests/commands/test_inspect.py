"""`grpo inspect`: the text on the sample (a snapshot), its JSON figures checked against
independent computations, layouts, roles it cannot resolve, nulls and truncation."""

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from grpo_cli import inspect_file

from ..conftest import SAMPLE, run_grpo
from ..test_docs import run_in_sample_folder

SNAPSHOT = Path(__file__).parent.parent / "snapshots" / "inspect_sample.txt"


def test_text_on_the_sample_matches_the_snapshot(tmp_path):
    proc = run_in_sample_folder("grpo inspect sample_data/rollouts.parquet", tmp_path)
    assert proc.returncode == 0 and proc.stdout == b""
    assert proc.stderr.decode() == SNAPSHOT.read_text(), "grpo inspect's text changed: regenerate tests/snapshots/inspect_sample.txt if meant"


def test_json_figures_against_independent_computations():
    f = json.loads(run_grpo("inspect", str(SAMPLE / "rollouts.parquet"), "--json").stdout)
    table = pq.read_table(SAMPLE / "rollouts.parquet")
    lengths = np.array([len(x) for x in table["logprobs"].to_pylist()])
    rewards = np.array(table["reward"].to_pylist())
    assert (f["rows"], f["groups"], f["layout"]) == (320, 40, "ragged")
    assert f["tokens"] == {
        "total": int(lengths.sum()),
        "min": int(lengths.min()),
        "median": int(np.sort(lengths)[159]),
        "p99": int(np.sort(lengths)[int(np.ceil(0.99 * 320)) - 1]),
        "max": int(lengths.max()),
        "rows_at_max": int((lengths == lengths.max()).sum()),
    }
    assert f["reward"]["mean"] == rewards.mean() and sum(f["reward_histogram"]["counts"]) == 320
    by_group = {}
    for key, r in zip(table["prompt_id"].to_pylist(), rewards):
        by_group.setdefault(key, []).append(r)
    assert f["zero_variance_groups"]["count"] == sum(min(v) == max(v) for v in by_group.values())
    assert f["columns"]["prompt"] == {"column": "prompt_id", "why": "found by name (looked for prompt_id, uid, index)", "option": "prompt_col"}
    assert f["advantage_config"]["estimator"] == "grpo" and f["nulls"]["reward"] == 0 and f["truncated_rows"] is None
    assert inspect_file(str(SAMPLE / "rollouts.parquet"), batch_rows=7, threads=1) == inspect_file(str(SAMPLE / "rollouts.parquet"))


def test_padded_layout_nulls_truncation_and_roles_it_cannot_resolve(tmp_path):
    path = tmp_path / "p.parquet"
    pq.write_table(
        pa.table(
            {
                "uid": ["a", "a", "b", "b"],
                "prompt_id": ["a", "a", "b", "b"],  # two prompt id candidates (uid wins over index only): said, not stopped on
                "score": [1.0, None, 0.5, 0.5],
                "response_mask": [[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0]],
                "old_log_probs": [[-0.1, -0.2, 0.0], [-0.3, 0.0, 0.0], [-0.1, -0.1, -0.1], [-0.2, -0.2, 0.0]],
                "truncated": [False, False, True, False],
                "note": ["x", None, None, "y"],
            }
        ),
        path,
    )
    f = inspect_file(str(path))
    assert f["layout"] == "padded" and f["tokens"]["total"] == 2 + 1 + 3 + 2 and f["tokens"]["rows_at_max"] == 1
    assert f["columns"]["prompt"]["column"] is None and "could each be the prompt id" in f["columns"]["prompt"]["why"]
    assert f["grouped_by"] == "one group: the whole input" and f["unscorable_rows"] == 1
    assert f["nulls"] == {"uid": 0, "prompt_id": 0, "score": 1, "response_mask": 0, "old_log_probs": 0, "truncated": 0, "note": 2}
    assert f["truncated_rows"] == 1
    given = inspect_file(str(path), prompt_col="uid")
    assert (
        given["columns"]["prompt"]["why"] == "given" and given["groups"] == 2 and given["zero_variance_groups"]["count"] == 2
    )  # a: one scored row; b: equal rewards
    bare = tmp_path / "bare.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), bare)
    f = inspect_file(str(bare))
    assert f["reward"] is None and f["tokens"] is None and f["layout"] == "no token columns"
    proc = run_grpo("inspect", str(bare), "--json", "--summary-json", "-", check=False)
    assert proc.returncode == 2 and os.path.exists(bare)


def test_a_null_list_is_counted_not_stopped_on(tmp_path):
    """Issue 43, class 18: inspect stopped at a null token list; it says what a file holds, so
    it counts the null (and the row has no tokens)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "nulls.parquet"
    pq.write_table(
        pa.table({"prompt_id": ["a", "a", "b", "b"], "reward": [1.0, 0.0, 1.0, 0.5], "logprobs": [[-1.0], None, [-0.5, -0.2], [-0.2]]}), path
    )
    f = inspect_file(str(path))
    assert f["nulls"]["logprobs"] == 1 and f["tokens"]["total"] == 4


def test_a_null_id_is_counted_not_stopped_on(tmp_path):
    """Issue 43, class 18: inspect stopped at a null prompt id (`grpo advantages` refuses it);
    it counts the null, with the rest of what the file holds, and forms no groups."""
    path = tmp_path / "ids.parquet"
    pq.write_table(
        pa.table({"prompt_id": ["a", "a", None, "b"], "reward": [1.0, 0.0, 0.5, 1.0], "logprobs": [[-1.0], None, [-0.5, -0.2], [-0.2]]}), path
    )
    f = inspect_file(str(path))
    assert f["nulls"] == {"prompt_id": 1, "reward": 0, "logprobs": 1} and f["tokens"]["total"] == 4
    assert f["reward"] is None and f["advantage"] is None
    proc = run_grpo("inspect", str(path))
    assert proc.returncode == 0 and "prompt_id 1" in proc.stderr.decode()
