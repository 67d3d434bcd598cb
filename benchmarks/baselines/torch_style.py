"""A framework-style torch script, as trainers compute these numbers: pandas reads the whole
file, a Python loop over groups computes the advantages, and (for the objective) micro-batches
of 512 rows are padded into tensors for the clipped PPO loss (eps 0.2) and the per-row mean.
python torch_style.py advantages|objective SRC DST"""

import sys

import pandas as pd
import torch
from torch.nn.utils.rnn import pad_sequence

mode, src, dst = sys.argv[1:4]
frame = pd.read_parquet(src)
rewards = torch.tensor(frame["reward"].to_numpy(), dtype=torch.float64)
advantages = torch.zeros_like(rewards)
for rows in frame.groupby("prompt_id", sort=False).indices.values():
    r = rewards[rows]
    std = r.std(unbiased=False)
    if std > 0:
        advantages[rows] = (r - r.mean()) / std
frame["advantage"] = advantages.numpy()
if mode == "objective":
    objective, clipped = [], []
    for start in range(0, len(frame), 512):
        chunk = frame.iloc[start : start + 512]
        new = pad_sequence([torch.from_numpy(x.astype("float64")) for x in chunk["logprobs"]], batch_first=True)
        old = pad_sequence([torch.from_numpy(x.astype("float64")) for x in chunk["old_logprobs"]], batch_first=True)
        mask = pad_sequence([torch.ones(len(x), dtype=torch.float64) for x in chunk["logprobs"]], batch_first=True)
        a = torch.from_numpy(chunk["advantage"].to_numpy())[:, None]
        ratio = torch.exp(new - old)
        surrogate = torch.minimum(ratio * a, ratio.clamp(0.8, 1.2) * a)
        objective.append((surrogate * mask).sum(1) / mask.sum(1))
        clipped.append(((surrogate != ratio * a).double() * mask).sum(1) / mask.sum(1))
    frame["objective"] = torch.cat(objective).numpy()
    frame["clip_fraction"] = torch.cat(clipped).numpy()
frame.to_parquet(dst)
