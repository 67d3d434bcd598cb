"""The read floor: pyarrow streams the input (COLUMNS, comma-separated; default all), writing
nothing.  python read_floor.py SRC [COLUMNS]"""

import sys

import pyarrow.parquet as pq

columns = sys.argv[2].split(",") if len(sys.argv) > 2 else None
for _ in pq.ParquetFile(sys.argv[1], pre_buffer=False).iter_batches(columns=columns):  # read, decode, drop
    pass
