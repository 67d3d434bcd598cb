"""The shared passes: pass 1 streamed or held gives the same groups and rewards, and the
advantages computed while it reads are the bits computed after it."""

from grpo_cli.engines import LocalEngine
from grpo_cli.io import open_source
from grpo_cli.passes import advantages, first_pass
from grpo_cli.plan import plan_advantages


def test_first_pass_streamed_or_held_and_advantages_ahead_or_after(sample_parquet):
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
