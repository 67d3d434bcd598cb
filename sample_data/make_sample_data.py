"""Generate sample_data/rollouts.{parquet,jsonl}: 40 prompts x 8 responses = 320 rows.

Columns: prompt_id, prompt, response, reward, logprobs / old_logprobs / ref_logprobs
(ragged float32 lists, one value per response token). Rewards are 0/1 correctness with an
occasional 0.5 partial credit, so some groups are all-correct or all-wrong (zero variance).
sample_data/rollouts_vllm.parquet is the same rows plus rollout_logprobs, the log-probs a
sampler (vLLM, say) reported: the old ones plus noise that grows along the response, as
train/inference mismatch does.
Run (with grpo-cli installed): python sample_data/make_sample_data.py
"""

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from grpo_cli.io import write_jsonl

HERE = Path(__file__).parent
PROMPTS, GROUP, SEED = 40, 8, 20261122


def ragged(rng: np.random.Generator, lengths: np.ndarray, values: np.ndarray) -> pa.ListArray:
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values.astype(np.float32)))


def main() -> None:
    rng = np.random.default_rng(SEED)
    n = PROMPTS * GROUP
    prompt_idx = np.repeat(np.arange(PROMPTS), GROUP)
    difficulty = rng.uniform(0.0, 1.0, PROMPTS)[prompt_idx]
    correct = rng.uniform(size=n) < difficulty
    partial = rng.uniform(size=n) < 0.1
    reward = np.where(correct, 1.0, np.where(partial, 0.5, 0.0))
    lengths = rng.integers(8, 65, size=n)
    tokens = int(lengths.sum())
    old = -rng.gamma(shape=0.6, scale=0.8, size=tokens)
    new = np.minimum(old + rng.normal(0.0, 0.15, tokens), 0.0)
    ref = np.minimum(old + rng.normal(0.0, 0.05, tokens), 0.0)
    table = pa.table(
        {
            "prompt_id": [f"gsm8k-{i:04d}" for i in prompt_idx],
            "prompt": [f"Question {i}: what is {i} + {2 * i}?" for i in prompt_idx],
            "response": [f"The answer is {3 * i + (0 if c else 1)}." for i, c in zip(prompt_idx, correct)],
            "reward": reward,
            "logprobs": ragged(rng, lengths, new),
            "old_logprobs": ragged(rng, lengths, old),
            "ref_logprobs": ragged(rng, lengths, ref),
        }
    )
    pq.write_table(table, HERE / "rollouts.parquet")
    with open(HERE / "rollouts.jsonl", "wb") as f:
        write_jsonl(table, f)  # float32 widened: the JSONL sample computes the parquet's numbers
    vllm = np.random.default_rng(SEED + 1)  # its own stream: the files above do not change
    position = np.arange(tokens) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    rollout = np.minimum(old + vllm.normal(0.0, 0.01 + 0.002 * position), 0.0)
    pq.write_table(table.append_column("rollout_logprobs", ragged(vllm, lengths, rollout)), HERE / "rollouts_vllm.parquet")


if __name__ == "__main__":
    main()
