"""The fair floor: pyarrow streams the input and writes it back with EXTRA more float64
columns of distinct (random) doubles, as advantages are, dictionary-encoding only string
columns; no math.  python floor.py SRC DST EXTRA [default]  ("default": pyarrow's default
writer, which also tries a dictionary on every other column)."""

import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

src, dst, extra = sys.argv[1], sys.argv[2], int(sys.argv[3])
default_writer = sys.argv[4:] == ["default"]
source = pq.ParquetFile(src, pre_buffer=False)
strings = [f.name for f in source.schema_arrow if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
rng = np.random.default_rng(0)
writer = None
for batch in source.iter_batches():  # pyarrow's default batch size
    for k in range(extra):
        batch = batch.append_column(f"c{k}", pa.array(rng.random(batch.num_rows)))
    writer = writer or pq.ParquetWriter(dst, batch.schema, **({} if default_writer else {"use_dictionary": strings}))
    writer.write_batch(batch)
writer.close()
