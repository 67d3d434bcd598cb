"""The golden runs: every estimator, loss, preset and command on ``sample_data/``, each as
the CLI runs it, in parquet and JSON Lines. ``make_golden.py`` records their exit code,
first error line, summary JSON and output bytes (sha256); ``test_golden.py`` replays them, so a
change that moves any computed number or byte shows here."""

SAMPLE = "sample_data/rollouts.parquet"
VLLM = "sample_data/rollouts_vllm.parquet"
JSONL = "sample_data/rollouts.jsonl"

ESTIMATORS = ["grpo", "rloo", "mean", "drgrpo", "unbiased", "passk", "gpg", "opo", "remax", "reinforce-baseline", "reinforce", "gae"]
LOSSES = ["ppo", "gspo", "gspo-token", "sapo", "cispo", "gmpo", "gpg"]
PRESETS = ["verl", "trl", "openrlhf", "twinkle"]


def cases() -> dict[str, list[str]]:
    """Name: the arguments after ``grpo`` (``OUT`` stands for the output path)."""
    runs: dict[str, list[str]] = {}
    for e in ESTIMATORS:
        runs[f"advantages-{e}"] = ["advantages", SAMPLE, "--estimator", e, "-o", "OUT.parquet"]
    runs["advantages-remax-baseline"] = ["advantages", SAMPLE, "--estimator", "remax", "--baseline-col", "reward", "-o", "OUT.parquet"]
    runs["advantages-gae-values"] = ["advantages", SAMPLE, "--estimator", "gae", "--values-col", "ref_logprobs", "-o", "OUT.parquet"]
    runs["advantages-jsonl-round"] = ["advantages", JSONL, "--estimator", "rloo", "--std", "sample", "--eps", "1e-8", "-o", "OUT.jsonl"]
    runs["advantages-kl-in-reward"] = ["advantages", SAMPLE, "--kl-in-reward", "0.05", "--kl", "k3", "-o", "OUT.parquet"]
    runs["advantages-whiten"] = ["advantages", SAMPLE, "--whiten", "--whiten-std", "sample", "-o", "OUT.parquet"]
    runs["advantages-round"] = ["advantages", JSONL, "--round", "4", "-o", "OUT.jsonl"]
    runs["advantages-num-generations"] = ["advantages", SAMPLE, "--prompt-col", "none", "--num-generations", "8", "-o", "OUT.parquet"]
    runs["advantages-reward-clip"] = ["advantages", SAMPLE, "--reward-clip", "0.2,0.8", "--scale", "batch", "-o", "OUT.parquet"]
    for p in PRESETS:
        runs[f"advantages-preset-{p}"] = ["advantages", SAMPLE, "--preset", p, "-o", "OUT.parquet"]
        runs[f"objective-preset-{p}"] = ["objective", VLLM, "--preset", p, "-o", "OUT.parquet"]
        runs[f"compare-preset-{p}"] = ["compare", SAMPLE, "--estimators", f"grpo,rloo,{p}", "-o", "OUT.parquet"]
    for loss in LOSSES:
        runs[f"objective-{loss}"] = ["objective", SAMPLE, "--loss", loss, "-o", "OUT.parquet"]
        runs[f"objective-{loss}-jsonl"] = ["objective", JSONL, "--loss", loss, "--epsilon", "0.1", "-o", "OUT.jsonl"]
    runs["objective-rollout-is"] = ["objective", VLLM, "--is", "token", "-o", "OUT.parquet"]
    runs["objective-kl"] = ["objective", SAMPLE, "--beta", "0.04", "--kl", "k3", "--agg", "seq-mean-token-sum", "-o", "OUT.parquet"]
    runs["mismatch"] = ["mismatch", VLLM, "-o", "OUT.parquet"]
    runs["mismatch-jsonl"] = ["mismatch", VLLM, "-o", "OUT.jsonl"]
    runs["inspect"] = ["inspect", SAMPLE]
    runs["inspect-vllm"] = ["inspect", VLLM]
    runs["inspect-jsonl"] = ["inspect", JSONL]
    runs["compare"] = ["compare", SAMPLE, "--estimators", "grpo:std=sample,eps=1e-6,rloo,drgrpo,passk", "-o", "OUT.parquet"]
    runs["filter-zero-variance"] = ["filter", SAMPLE, "--drop-zero-variance", "-o", "OUT.parquet"]
    runs["filter-jsonl"] = ["filter", JSONL, "--drop-zero-variance", "-o", "OUT.jsonl"]
    runs["presets"] = ["presets"]
    return runs
