"""A plain polars script for the clipped PPO objective (eps 0.2) as `grpo objective` computes
it by default: the advantage r minus its group's mean `over` the prompt id, then the log-prob
lists exploded, the clipped term per token, its sum per row, joined back onto the rows and
written with polars' default parquet writer.  python polars_objective.py SRC DST"""

import sys

import polars as pl

src, dst = sys.argv[1], sys.argv[2]
r = pl.col("reward")
rows = pl.scan_parquet(src).with_columns(advantage=r - r.mean().over("prompt_id")).with_row_index("row")
ratio = (pl.col("logprobs").cast(pl.Float64) - pl.col("old_logprobs")).exp()
a = pl.col("advantage")
per_row = (
    rows.select("row", "advantage", "logprobs", "old_logprobs")
    .explode("logprobs", "old_logprobs")
    .group_by("row")
    .agg(objective=pl.min_horizontal(ratio * a, ratio.clip(0.8, 1.2) * a).sum())
)
rows.join(per_row, on="row", how="left", maintain_order="left").drop("row").sink_parquet(dst)
