"""The case of verl's reference numbers (/work/research/41/ref-verl-losses-0.9.1.json, made with
verl 0.9.1's own loss functions in float64 by ref_verl_losses.py): 6 rows x 4 tokens, row 4
fully masked; masked slots hold finite values that must be ignored. verl's loss is -objective;
its "engine" numbers (global_batch_info: every row counts) are the whole-input ones."""

from grpo_cli import policy_objective

MASK = [[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 0, 0]]
OLD = [
    [-0.4, -1.2, -2.5, -0.05],
    [-1.9, -0.3, -1.6, -0.7],
    [-2.2, -0.35, -0.8, -1.0],
    [-0.6, -1.8, -0.25, -3.0],
    [-1.1, -0.5, -0.9, -1.3],
    [-1.5, -0.7, -0.7, -0.7],
]
NEW = [
    [-0.10000000000000003, -1.25, -2.4, -0.45],
    [-0.5999999999999999, -0.27999999999999997, -1.9000000000000001, -0.19999999999999996],
    [-2.7, -0.09999999999999998, -0.8, -1.0],
    [-0.44999999999999996, -0.40000000000000013, -0.35, -2.95],
    [-0.9000000000000001, -0.3, -0.7, -1.1],
    [-1.75, -0.7, -0.7, -0.7],
]
ROLLOUT = [
    [-0.35000000000000003, -1.22, -1.6, -0.04],
    [-2.0, -0.27, -1.6, -0.29999999999999993],
    [-2.18, -0.95, -0.8, -1.0],
    [-0.6, -1.76, -0.28, -2.8],
    [-1.0, -0.4, -0.8, -1.2],
    [-1.2, -0.7, -0.7, -0.7],
]
ADV = [1.0, -0.5, 0.8, -1.2, 0.7, 0.6]
TOKENS = 14  # counted tokens


def counted():
    """(row, token, new, old, advantage) of every counted token, row-major."""
    return [(i, t, NEW[i][t], OLD[i][t], ADV[i]) for i in range(6) for t in range(4) if MASK[i][t]]


def verl_loss(loss: str, agg: str = "token-mean", **options) -> float:
    """Our objective on the case, negated as verl's loss."""
    return -policy_objective(NEW, OLD, advantage_values=ADV, mask=MASK, loss=loss, agg=agg, **options)
