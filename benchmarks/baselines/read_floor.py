"""The read floor: pyarrow streams the input (COLUMNS, comma-separated; default or empty: all),
writing nothing; with ``verify``, each page's checksum is verified where it has one.
python read_floor.py SRC [COLUMNS] [verify]"""

import sys

import pyarrow.parquet as pq

columns = sys.argv[2].split(",") if len(sys.argv) > 2 and sys.argv[2] else None
verify = sys.argv[3:] == ["verify"]
for _ in pq.ParquetFile(sys.argv[1], pre_buffer=False, page_checksum_verification=verify).iter_batches(columns=columns):  # read, decode, drop
    pass
