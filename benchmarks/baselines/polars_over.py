"""A plain polars script: GRPO advantages (reward - group mean) / group std (population std,
0 for a zero-variance group: grpo's defaults) `over` the prompt id, in one lazy pass, written
with polars' default parquet writer.  python polars_over.py SRC DST"""

import sys

import polars as pl

src, dst = sys.argv[1], sys.argv[2]
r, group = pl.col("reward"), pl.col("prompt_id")
std = r.std(ddof=0).over(group)
advantage = pl.when(std > 0).then((r - r.mean().over(group)) / std).otherwise(0.0)
pl.scan_parquet(src).with_columns(advantage=advantage).sink_parquet(dst)
