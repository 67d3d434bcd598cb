"""The case of TRL's reference numbers (/work/research/41/ref-trl-1.16.0.json, made with TRL
1.16.0's own GRPOTrainer._compute_loss in float64 by ref-trl.py): 6 rows x 4 tokens, row 4
fully masked; the advantages are its GRPO ones (sum_then_normalize, group). TRL's loss is
-objective; dapo and cispo are a token-mean over the generation batch (the whole input)."""

from grpo_cli import policy_objective
from grpo_cli.numerics import LOGRATIO_CLAMP_MAX

MASK = [[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]]
NEW = [
    [-1.0, -0.5, -2.0, -0.3],
    [-0.7, -1.2, 0.0, 0.0],
    [-0.2, -3.0, -0.9, 0.0],
    [-1.5, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0],
    [-0.4, -0.6, -0.8, -1.0],
]
OLD = [
    [-1.1, -0.4, -1.5, -0.35],
    [-0.9, -1.0, 0.0, 0.0],
    [-0.25, -2.0, -1.0, 0.0],
    [-1.2, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0],
    [-0.5, -0.55, -1.4, -0.9],
]
REF = [
    [-1.2, -0.6, -1.8, -0.3],
    [-0.8, -1.1, 0.0, 0.0],
    [-0.3, -2.5, -0.7, 0.0],
    [-1.4, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0],
    [-0.45, -0.7, -0.9, -1.1],
]
SAMPLED = [  # the vLLM sampler's log-probs
    [-1.0, -0.45, -1.2, -0.4],
    [-0.95, -0.2, 0.0, 0.0],
    [-0.3, -2.1, -1.05, 0.0],
    [-1.3, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0],
    [-0.5, -0.5, -1.3, -0.95],
]
ADV = [0.7558146775799328, -1.133722016369899, 0.3779073387899664, -0.7067070073327899, 0.0, 0.7067070073327899]


def trl_loss(loss: str, **options) -> float:
    """Our objective on the case, negated as TRL's loss (token-mean, no log-ratio clamp, as TRL)."""
    options = {"agg": "token-mean", "logratio_clamp": LOGRATIO_CLAMP_MAX} | options
    return -policy_objective(NEW, OLD, advantage_values=ADV, mask=MASK, loss=loss, **options)


ENTROPY = [  # the token entropies (TRL's `entropies`), for top_entropy_quantile
    [0.5, 1.2, 2.0, 0.1],
    [0.8, 0.3, 0.0, 0.0],
    [1.5, 0.05, 0.9, 0.0],
    [0.7, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0],
    [0.2, 1.1, 0.6, 0.4],
]
