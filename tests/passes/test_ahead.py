"""Advantages computed while pass 1 reads (passes.ahead): kept only when the ids' layout
allows, then the same bits and figures as when computed after the pass; errors raised as
without them, and no worker thread left behind."""

import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st

from grpo_cli import AdvantageConfig, advantages_file
from grpo_cli.passes.ahead import WindowsAhead
from grpo_cli.errors import InputError
from grpo_cli.estimators import GroupIndex, Runs

from ..conftest import examples

CONFIGS = [
    AdvantageConfig(),
    AdvantageConfig(estimator="rloo", std="sample"),
    AdvantageConfig(scale="none", reward_clip=(-1.0, 2.0)),
    AdvantageConfig(estimator="passk"),
    AdvantageConfig(whiten=True),
]


def _recording(monkeypatch, window: int) -> list:
    """Windows of ``window`` rows; what each :meth:`WindowsAhead.finish` returns, recorded."""
    finished, finish = [], WindowsAhead.finish
    monkeypatch.setattr("grpo_cli.passes.ahead.WINDOW_ROWS", window)
    monkeypatch.setattr(WindowsAhead, "finish", lambda self, g: finished.append(finish(self, g)) or finished[-1])
    return finished


@settings(max_examples=examples(80), deadline=None)
@given(
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=80),
    seed=st.integers(0, 2**32 - 1),
    back=st.booleans(),
    text=st.booleans(),
    nulls=st.lists(st.integers(0, 500), max_size=3),
    batch=st.integers(1, 64),
    window=st.integers(1, 48),
    config=st.sampled_from(CONFIGS),
)
def test_advantages_computed_ahead_are_the_bits_computed_after_the_pass(tmp_path_factory, sizes, seed, back, text, nulls, batch, window, config):
    """Any group sizes, batch edges and window size; a returning id (groups not contiguous:
    the work ahead is dropped); unscorable rows: the summary-only run (ahead) gives the figures
    of the ``-o`` run (no pass streamed, nothing ahead), and ahead's advantages are the written ones."""
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(len(sizes)), sizes)
    ids = np.append(ids, 0) if back and len(sizes) > 1 else ids
    rewards = np.round(rng.normal(size=len(ids)), int(rng.integers(0, 3))).tolist()
    for row in nulls:
        rewards[row % len(ids)] = None
    if all(r is None for r in rewards):
        rewards[0] = 1.0
    path, out = tmp_path_factory.mktemp("ahead") / "r.parquet", None
    pq.write_table(pa.table({"prompt_id": [f"p{i}" for i in ids] if text else ids, "reward": pa.array(rewards, pa.float64())}), path)
    with pytest.MonkeyPatch.context() as monkeypatch:
        finished = _recording(monkeypatch, window)
        summary = advantages_file(str(path), batch_rows=batch, config=config, prompt_col="prompt_id")  # (its ids may all differ)
        out = path.with_name("o.parquet")
        assert advantages_file(str(path), str(out), batch_rows=batch, config=config, prompt_col="prompt_id") == summary
    assert len(finished) == 1
    if back and len(sizes) > 1:
        assert finished[0] is None
    else:
        written = pq.read_table(out)["advantage"].to_numpy()
        assert finished[0] is not None and (config.whiten or finished[0][0].tobytes() == written.tobytes())


@pytest.mark.parametrize("first, kept", [([0, 2], True), ([0, 3], False), ([0, 1, 2], False)])
def test_windows_are_kept_only_where_the_finished_index_starts_the_groups_they_assumed(monkeypatch, first, kept):
    """The batch's runs sent rows 0-1 as one group, the cut at row 2."""
    monkeypatch.setattr("grpo_cli.passes.ahead.WINDOW_ROWS", 1)
    with WindowsAhead(np.array([[1.0], [0.0], [1.0], [3.0]]), None, ["reward"], AdvantageConfig(), threads=1) as ahead:
        ahead.read(0, Runs.of(np.array([7, 7, 8, 8])))
        found = ahead.finish(GroupIndex(np.array(first), 4))
    assert (found is not None) == kept
    if kept:
        assert found[0].tolist() == [1.0, -1.0, -1.0, 1.0] and found[1].groups == 2


def test_rows_of_a_returning_id_are_computed_after_the_pass(tmp_path, monkeypatch):
    """p0 comes back in the last batch: the windows sent while reading assumed otherwise."""
    finished = _recording(monkeypatch, 2)
    ids = ["p0", "p0", "p1", "p1", "p2", "p2", "p0"]
    path = tmp_path / "r.parquet"
    pq.write_table(pa.table({"prompt_id": ids, "reward": [1.0, 0.0, 1.0, 1.0, 0.0, 2.0, 1.0]}), path)
    figures = advantages_file(str(path), batch_rows=2)
    assert finished == [None]
    assert figures["groups"] == 3 and figures["group_sizes"] == {"2": 2, "3": 1} and figures["zero_variance_groups"]["count"] == 1


def test_an_error_in_pass_1_comes_before_one_in_a_window_sent_ahead(tmp_path, monkeypatch):
    """A null reward early (refused by `on_null` 'error' when its window runs) and a null id
    late: as when the advantages follow the pass, the id is named; and no worker thread stays."""
    _recording(monkeypatch, 2)
    ids = pa.array([0, 0, 1, 1, 2, 2, None, 3], pa.int64())
    path = tmp_path / "r.parquet"
    pq.write_table(pa.table({"prompt_id": ids, "reward": [1.0, None, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0]}), path)
    threads = threading.active_count()
    with pytest.raises(InputError, match=r"row 6: column 'prompt_id' \(prompt id\) is null"):
        advantages_file(str(path), batch_rows=2, config=AdvantageConfig(on_null="error"))
    pq.write_table(pa.table({"prompt_id": ids.fill_null(3), "reward": [1.0, None, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0]}), path)
    with pytest.raises(InputError, match=r"row 1 \(prompt id 0\): column 'reward' is null or NaN"):
        advantages_file(str(path), batch_rows=2, config=AdvantageConfig(on_null="error"))
    with pytest.raises(InputError, match=r"prompt id 0 has 2 rows, expected `num_generations` 3"):
        advantages_file(str(path), batch_rows=2, num_generations=3)
    assert threading.active_count() == threads
