"""The polars floor: polars reads the input and writes it back with EXTRA more float64
columns of distinct (random) doubles, with its default parquet writer; no math.
python polars_floor.py SRC DST EXTRA"""

import sys

import numpy as np
import polars as pl

src, dst, extra = sys.argv[1], sys.argv[2], int(sys.argv[3])
frame = pl.read_parquet(src)
rng = np.random.default_rng(0)
frame.with_columns(pl.Series(f"c{k}", rng.random(frame.height)) for k in range(extra)).write_parquet(dst)
