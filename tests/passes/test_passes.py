"""The shared passes: pass 1 streamed or held gives the same groups and rewards, and the
advantages computed while it reads are the bits computed after it."""

import pytest

from grpo_cli import passes
from grpo_cli.engines import LocalEngine
from grpo_cli.io import open_source
from grpo_cli.passes import advantages, first_pass
from grpo_cli.plan import plan_advantages


@pytest.mark.parametrize("held_rows", [passes.HELD_ROWS, 7])
def test_first_pass_streamed_or_held_and_advantages_ahead_or_after(sample_parquet, monkeypatch, held_rows):
    """Held columns go through pass 1 ``held_rows`` rows at a time, their runs joined: the
    same groups and rewards as streamed batches of another size."""
    monkeypatch.setattr(passes, "HELD_ROWS", held_rows)
    engine = LocalEngine(threads=2, batch_rows=33)
    with open_source(str(sample_parquet)) as source:
        plan = plan_advantages(source)
        g, inputs, held, ahead = first_pass(engine, source, plan.grouping, plan.inputs, plan.estimator)
        g_held, inputs_held, table, none_ahead = first_pass(engine, source, plan.grouping, plan.inputs, plan.estimator, hold=True)
        assert held is None and ahead is not None and none_ahead is None and table.num_rows == len(inputs.r)
        assert g.codes.tobytes() == g_held.codes.tobytes() and inputs.r.tobytes() == inputs_held.r.tobytes()
        computed_ahead = advantages(engine, source, plan.grouping, g, inputs, plan.estimator, ahead)
        computed_after = advantages(engine, source, plan.grouping, g_held, inputs_held, plan.estimator)
    assert computed_ahead[0].tobytes() == computed_after[0].tobytes() and computed_ahead[1] == computed_after[1]


@pytest.mark.parametrize(
    "bad, message", [("prompt_id", "row 20: column 'prompt_id' (prompt id) is null"), ("reward", "row 20 (prompt id 5): column 'reward' is infinite")]
)
def test_a_bad_row_of_held_columns_is_named_where_it_is_in_the_input(tmp_path, monkeypatch, bad, message):
    """Pass 1 over held columns (an output is written) takes them a few rows at a time: an
    error in a later window names the row among all, as the streamed pass does."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from grpo_cli import advantages_file
    from grpo_cli.errors import InputError

    monkeypatch.setattr(passes, "HELD_ROWS", 7)
    ids, rewards = pa.array(np.arange(40) // 4), np.linspace(0, 1, 40)
    if bad == "prompt_id":
        ids = pa.array(np.arange(40) // 4, mask=np.arange(40) == 20)
    else:
        rewards[20] = np.inf
    pq.write_table(pa.table({"prompt_id": ids, "reward": rewards}), tmp_path / "in.parquet")
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        advantages_file(str(tmp_path / "in.parquet"), str(tmp_path / "out.parquet"), threads=2)
