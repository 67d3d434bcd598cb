"""A DuckDB window query: GRPO advantages (reward - group mean) / group std (population
std, 0 for a zero-variance group: grpo's defaults) over the prompt id, written with DuckDB's
default parquet writer (the rows in the order the window leaves them).  python duckdb_window.py SRC DST"""

import sys

import duckdb

src, dst = sys.argv[1], sys.argv[2]
duckdb.sql(
    f"""COPY (
        SELECT * EXCLUDE (mean, std), CASE WHEN std > 0 THEN (reward - mean) / std ELSE 0.0 END AS advantage
        FROM (
            SELECT *,
                avg(reward) OVER (PARTITION BY prompt_id) AS mean,
                stddev_pop(reward) OVER (PARTITION BY prompt_id) AS std
            FROM read_parquet('{src}')
        )
    ) TO '{dst}' (FORMAT parquet)"""
)
