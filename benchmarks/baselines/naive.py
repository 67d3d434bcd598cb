"""A naive per-sample Python loop: group rewards in a dict of lists, float by float, then
write the input back with the advantages.  python naive.py SRC DST"""

import math
import sys

import pyarrow as pa
import pyarrow.parquet as pq

src, dst = sys.argv[1], sys.argv[2]
t = pq.read_table(src, columns=["prompt_id", "reward"])
ids, rewards = t["prompt_id"].to_pylist(), t["reward"].to_pylist()
groups = {}
for i, r in zip(ids, rewards):
    groups.setdefault(i, []).append(r)
stats = {}
for key, rs in groups.items():
    mean = sum(rs) / len(rs)
    std = math.sqrt(sum((r - mean) ** 2 for r in rs) / len(rs))
    stats[key] = (mean, std)
adv = []
for i, r in zip(ids, rewards):
    mean, std = stats[i]
    adv.append((r - mean) / std if std > 0 else 0.0)
source = pq.ParquetFile(src, pre_buffer=False)
writer, start = None, 0
for batch in source.iter_batches():
    batch = batch.append_column("advantage", pa.array(adv[start : start + batch.num_rows], pa.float64()))
    start += batch.num_rows
    writer = writer or pq.ParquetWriter(dst, batch.schema)
    writer.write_batch(batch)
writer.close()
