"""verl's agg_loss case (research/41 ref_verl.py, case A): a loss matrix of 6 rows, width 5, its
mask (row 4 fully masked; 9.0: padding) and each row's response length (row 4: one token,
masked). Row sums S = [0.4, 1.1, 0.2, 0, 0, 2.0], counted tokens n = [3, 4, 2, 4, 0, 1]."""

LOSS = [
    [0.5, -0.2, 0.1, 9.0, 9.0],
    [1.0, 0.3, 9.0, -0.4, 0.2],
    [-0.6, 0.8, 9.0, 9.0, 9.0],
    [0.25, 0.25, -1.0, 0.5, 9.0],
    [9.0, 9.0, 9.0, 9.0, 9.0],
    [2.0, 9.0, 9.0, 9.0, 9.0],
]
MASK = [[1, 1, 1, 0, 0], [1, 1, 0, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 1, 0], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0]]
LENGTHS = [3, 5, 2, 4, 1, 1]
