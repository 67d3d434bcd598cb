"""TRL 1.9.0's experimental PPOTrainer: its GAE against `--preset trl@1.9 --estimator gae`, and
why a file of the rows' tokens does not hold what it needs (experimental/ppo/ppo_trainer.py).

Its score is added at ``actual_end = sequence_lengths + 1`` (:786-789), one position past the
last token (a pad token), unless the row fills the generation width; the values are kept
there too (``padding_mask_p1``, :770-773), so the GAE recursion (:796-803, gamma 1, lambda
0.95) meets ``A_L = score - V_L`` at that position, where ``V_L`` is the value model's output
on the pad token, and at the last token

    A_{L-1} = r_{L-1} - V_{L-1} + gamma V_L + gamma lambda (score - V_L)
            = r_{L-1} - V_{L-1} + gamma (lambda score + (1 - lambda) V_L)

where a terminal row's GAE has ``score - V_{L-1}``: the score of a row shorter than the width
counts as ``gamma (lambda score + (1 - lambda) V_L)``. The advantages are then whitened over
the tokens (:804, ``masked_whiten`` on ``~padding_mask``, Bessel variance + 1e-8 under the
root), as the preset whitens them.

The numbers below come from TRL's own lines 762-798 and its masked_mean/var/whiten,
truncate_response and first_true_indices, run unchanged in float64 (torch 2.13 CPU) on this
case: 3 rows, width 5, pad 0, EOS 2; row 0 is 3 tokens ending at EOS, row 1 fills the
width, row 2 is EOS alone; kl_coef 0.05 k1, whiten_rewards False.
"""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_cli import AdvantageConfig, advantages_file

LAM = 0.95
LENGTHS = [3, 5, 1]
WIDTH = 5
# the policy's and the reference's log-probs, and the value model's output, at every position of the width
LOGPROBS = [[-0.5, -1.0, -0.2, -3.0, -3.0], [-0.3, -0.7, -1.1, -0.4, -0.9], [-0.1, -2.0, -2.0, -2.0, -2.0]]
REF = [[-0.6, -0.8, -0.25, -2.0, -2.0], [-0.35, -0.6, -1.0, -0.5, -0.8], [-0.3, -1.0, -1.0, -1.0, -1.0]]
VALUES = [[0.1, 0.2, 0.3, 0.7, 0.9], [0.5, 0.4, 0.3, 0.2, 0.1], [-0.2, 0.6, 0.8, 0.8, 0.8]]
SCORES = [1.0, -0.5, 2.0]
TRL_ADVANTAGES = [  # TRL's, on each row's tokens (0 beyond them)
    [0.6983007074271097, 0.6439714872269635, 0.5717546107099621],
    [-0.8898512894617663, -0.8298958451491493, -0.7742989629732393, -0.7157759291038605, -0.6441539197739841],
    [1.9399491410979641],
]


def ours(tmp_path, rewards):
    """`--preset trl@1.9 --estimator gae` on the rows' tokens (the file holds no padding)."""
    path, out = tmp_path / "rows.parquet", tmp_path / "out.parquet"
    cut = [[row[:n] for row, n in zip(x, LENGTHS)] for x in (LOGPROBS, REF, VALUES)]
    pq.write_table(pa.table({"reward": rewards, "logprobs": cut[0], "ref_logprobs": cut[1], "values": cut[2]}), path)
    advantages_file(str(path), str(out), config=AdvantageConfig(preset="trl@1.9", estimator="gae"))
    return pq.read_table(out)["token_advantage"].to_pylist()


def test_trls_ppo_advantages_are_gae_with_the_score_one_past_the_last_token(tmp_path):
    # the score of rows 0 and 2, shorter than the width, counts as lambda score + (1 - lambda) V_L (gamma 1)
    shifted = [LAM * s + (1 - LAM) * v[n] if n < WIDTH else s for s, v, n in zip(SCORES, VALUES, LENGTHS)]
    for got, want in zip(ours(tmp_path, shifted), TRL_ADVANTAGES):
        assert got == pytest.approx(want, rel=1e-13, abs=1e-15)


def test_a_file_of_the_rows_tokens_does_not_give_them(tmp_path):
    # with the score itself the rows shorter than the width are off by V_L's share (and, whitened, every row)
    got = ours(tmp_path, SCORES)
    assert got[0][0] == pytest.approx(0.6859260452313815, rel=1e-12) and got[0][0] != pytest.approx(TRL_ADVANTAGES[0][0], rel=1e-3)
