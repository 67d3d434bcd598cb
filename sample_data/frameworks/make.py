"""Generate sample_data/frameworks/: small files in the shapes verl, TRL and OpenRLHF write, field
for field from their sources (a few prompts x a few responses each; deterministic).

- verl/rollout/{1,2,10}.jsonl: ``trainer.rollout_data_dir`` dumps (verl 0.9.1,
  ``RayPPOTrainer._write_generations``): one file per step, keys ``input``, ``output``, ``gts``,
  ``score``, ``step``, then the reward function's extra keys (here DAPO's ``acc`` and ``pred``;
  its ``score`` overwrites the summed one). Rows shuffled (batch balancing), no uid; the prompts
  of step 1 come back at step 10 (a later epoch).
- verl/validation/10.jsonl: ``trainer.validation_data_dir``, the same keys plus ``reward``.
- verl/batch.parquet: a DataProto batch saved to parquet (verl 0.9.1 ``ray_trainer.py``, after
  ``compute_advantage``): right-padded ``responses`` and ``response_mask``, ``old_log_probs``,
  ``ref_log_prob``, ``rollout_log_probs``, ``token_level_scores`` (the score on the last valid
  token), GRPO's token-level ``advantages`` and ``returns`` (equal in GRPO), ``uid`` (the group)
  and ``index`` (the dataset row). No new log-probs: on-policy, new = old.
- trl/completions/completions_{step:05d}.parquet: TRL 1.16.0 ``GRPOTrainer.log`` with
  ``log_completions`` (a pandas DataFrame's ``to_parquet``): ``step``, ``prompt``, ``completion``,
  one column per reward function (NaN where it returned None, which pandas writes as null), the
  logged ``advantage``; rows in consecutive blocks of
  ``num_generations``.
- openrlhf/experiences.jsonl: OpenRLHF 0.11.2 ``Experience`` fields dumped as JSON Lines by a user:
  ``index`` numbers samples (``split_rollout_samples``), ``prompts``, ``labels``, ``rewards``,
  ``scores``, ``action_log_probs`` (old), ``base_action_log_probs`` (reference),
  ``rollout_log_probs`` (vLLM's, kept for TIS), ``action_mask``, ``response_length``; groups are consecutive blocks of ``n_samples_per_prompt``.

Run (with grpo-cli installed): python sample_data/frameworks/make.py
"""

import json
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).parent
SEED = 20261127
N = 4  # responses per prompt (verl rollout.n, TRL num_generations, OpenRLHF n_samples_per_prompt)
WIDTH = 8  # verl's response length: right padding up to it


def question(k: int) -> tuple[str, int]:
    """A prompt as verl decodes it (chat template, special tokens dropped; several lines) and its answer."""
    a, b = 3 + 2 * k, 4 + 5 * k
    return f"system\nYou are a careful math tutor.\nuser\nWhat is {a} + {b}? Think step by step.\nassistant\n", a + b


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def verl_rollout(rng: np.random.Generator) -> None:
    """Steps 1, 2 and 10 of a run on 4 prompts, 2 per step: step 10 repeats step 1's prompts."""
    for step, prompts in ((1, (0, 1)), (2, (2, 3)), (10, (0, 1))):
        rows = []
        for k in prompts:
            text, answer = question(k)
            for _ in range(N):
                pred = answer + int(rng.integers(0, 2)) * int(rng.integers(1, 4))
                acc = pred == answer
                rows.append(
                    {
                        "input": text,
                        "output": f"{answer - 1} + 1 = {pred}. The answer is {pred}.",
                        "gts": str(answer),
                        "score": 1.0 if acc else -1.0,  # DAPO's compute_score: its score overwrites the summed one
                        "step": step,
                        "acc": acc,
                        "pred": str(pred),
                    }
                )
        write_jsonl(HERE / "verl" / "rollout" / f"{step}.jsonl", [rows[i] for i in rng.permutation(len(rows))])


def verl_validation(rng: np.random.Generator) -> None:
    """``trainer.validation_data_dir`` at step 10: the same keys, rows in order, and ``reward``
    too (``_validate`` adds the summed score to the extra keys; DAPO's ``score`` overwrites the
    summed one): two reward columns, equal here."""
    rows = []
    for k in (4, 5):
        text, answer = question(k)
        for _ in range(N):
            pred = answer + int(rng.integers(0, 2))
            score = 1.0 if pred == answer else -1.0
            rows.append(
                {
                    "input": text,
                    "output": f"The answer is {pred}.",
                    "gts": str(answer),
                    "score": score,
                    "step": 10,
                    "reward": score,
                    "acc": pred == answer,
                    "pred": str(pred),
                }
            )
    write_jsonl(HERE / "verl" / "validation" / "10.jsonl", rows)


def right_padded(values: np.ndarray, mask: np.ndarray) -> pa.Array:
    """Rows of ``values`` as float32 (verl's tensors) with 0 after the last valid token."""
    return pa.array(np.where(mask == 1, values, 0.0).astype(np.float32).tolist(), type=pa.list_(pa.float32()))


def verl_batch(rng: np.random.Generator) -> None:
    """3 prompts x N responses after verl's GRPO advantage: (r - mean) / (std + 1e-6), std with
    ddof 1, over the uid's rows, broadcast over the row's valid tokens."""
    prompts = 3
    rows = prompts * N
    lengths = rng.integers(2, WIDTH + 1, rows)
    mask = (np.arange(WIDTH)[None, :] < lengths[:, None]).astype(np.int64)
    old = -rng.gamma(0.6, 0.8, (rows, WIDTH))
    ref = np.minimum(old + rng.normal(0.0, 0.05, (rows, WIDTH)), 0.0)
    rollout = np.minimum(old + rng.normal(0.0, 0.02, (rows, WIDTH)), 0.0)
    score = rng.integers(0, 2, rows).astype(np.float64)
    score[:N] = 1.0  # one group all correct: no signal
    scores = np.zeros((rows, WIDTH))
    scores[np.arange(rows), lengths - 1] = score
    grouped = score.reshape(prompts, N)
    advantage = ((grouped - grouped.mean(1, keepdims=True)) / (grouped.std(1, ddof=1, keepdims=True) + 1e-6)).reshape(-1)
    advantages = advantage[:, None] * mask
    uid = [str(uuid.UUID(int=int(rng.integers(0, 2**63)))) for _ in range(prompts)]
    table = pa.table(
        {
            "uid": np.repeat(uid, N).tolist(),
            "index": np.repeat(rng.choice(7473, prompts, replace=False), N),
            "responses": np.where(mask == 1, rng.integers(10, 32000, (rows, WIDTH)), 0).tolist(),
            "response_mask": mask.tolist(),
            "old_log_probs": right_padded(old, mask),
            "ref_log_prob": right_padded(ref, mask),
            "rollout_log_probs": right_padded(rollout, mask),
            "token_level_scores": right_padded(scores, mask),
            "advantages": right_padded(advantages, mask),
            "returns": right_padded(advantages, mask),
        }
    )
    pq.write_table(table, HERE / "verl" / "batch.parquet")


def trl_completions(rng: np.random.Generator) -> None:
    """Steps 10 and 20 (logging_steps 10), 3 prompts x N each; the logged advantage is TRL's
    sum_then_normalize: r = nansum of the reward functions, (r - mean) / (nanstd + 1e-4), std
    with ddof 1, a row every function scored None (unscorable) left out of its group's mean and
    std, its advantage 0 (trl/trainer/grpo_trainer.py, ``_generate_and_score_completions``)."""
    folder = HERE / "trl" / "completions"
    folder.mkdir(parents=True, exist_ok=True)
    for number, step in enumerate((10, 20)):
        prompts = [question(10 + 3 * number + k) for k in range(3)]
        accuracy = rng.integers(0, 2, 3 * N).astype(np.float64)
        fmt = rng.choice([0.0, 0.5, 1.0], 3 * N)
        fmt[rng.random(3 * N) < 0.2] = np.nan  # the format function returned None
        if step == 20:
            accuracy[5] = fmt[5] = np.nan  # every function returned None: unscorable
        r = np.nansum(np.stack([accuracy, fmt]), axis=0)
        r[np.isnan(accuracy) & np.isnan(fmt)] = np.nan  # left out of the group's mean and std
        g = r.reshape(3, N)
        mean = np.nanmean(g, 1, keepdims=True)
        std = np.sqrt(np.nansum((g - mean) ** 2, 1, keepdims=True) / (np.sum(~np.isnan(g), 1, keepdims=True) - 1))
        advantage = np.nan_to_num((g - mean) / (std + 1e-4), nan=0.0)  # an unscorable row's advantage is 0
        table = pa.table(
            {
                "step": [step] * (3 * N),
                "prompt": [text.split("user\n")[1].split("\n")[0] for text, _ in prompts for _ in range(N)],
                "completion": [f"<think>...</think> {prompts[i // N][1] + int(a != 1)}" for i, a in enumerate(accuracy)],
                "accuracy_reward": pa.array(accuracy, from_pandas=True),
                "format_reward": pa.array(fmt, from_pandas=True),  # pandas' to_parquet: NaN is written as null
                "advantage": advantage.reshape(-1),
            }
        )
        pq.write_table(table, folder / f"completions_{step:05d}.parquet")


def openrlhf_experiences(rng: np.random.Generator) -> None:
    """3 prompts x N samples; ``index`` is the sample's position (unique per row), responses
    right-padded to the micro-batch's longest with ``action_mask`` False."""
    prompts = 3
    rows = prompts * N
    lengths = rng.integers(2, WIDTH + 1, rows)
    mask = np.arange(WIDTH)[None, :] < lengths[:, None]
    old = -rng.gamma(0.6, 0.8, (rows, WIDTH))
    base = np.minimum(old + rng.normal(0.0, 0.05, (rows, WIDTH)), 0.0)
    rollout = np.minimum(old + rng.normal(0.0, 0.02, (rows, WIDTH)), 0.0)
    reward = rng.integers(0, 2, rows).astype(float)
    out = []
    for i in range(rows):
        text, answer = question(20 + i // N)
        out.append(
            {
                "index": i,
                "prompts": text,
                "labels": str(answer),
                "rewards": reward[i],
                "scores": reward[i],
                "response_length": int(lengths[i]),
                "action_log_probs": np.where(mask[i], old[i], 0.0).round(6).tolist(),
                "base_action_log_probs": np.where(mask[i], base[i], 0.0).round(6).tolist(),
                "rollout_log_probs": np.where(mask[i], rollout[i], 0.0).round(6).tolist(),
                "action_mask": mask[i].tolist(),
            }
        )
    write_jsonl(HERE / "openrlhf" / "experiences.jsonl", out)


def main() -> None:
    rng = np.random.default_rng(SEED)
    verl_rollout(rng)
    verl_validation(np.random.default_rng(SEED + 1))  # its own stream: the other files stay as they were
    verl_batch(rng)
    trl_completions(rng)
    openrlhf_experiences(rng)


if __name__ == "__main__":
    main()
