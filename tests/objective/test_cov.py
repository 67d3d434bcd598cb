"""verl's covariance losses, kl_cov and clip_cov: the tokens of largest covariance between
advantage and log-prob, over the whole input, are penalised (kl_cov) or, a random draw of
them, left out (clip_cov)."""

import math
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import assume

from grpo_cli import ObjectiveConfig, objective_file, policy_objective
from grpo_cli.errors import UsageError
from grpo_cli.objective import row_terms
from grpo_cli.objective.cov import candidate_counts, draw
from grpo_cli.objective.terms import block, scanned
from grpo_cli.tokens import Tokens

from .references import whole_input
from .verl_case import ADV, MASK, NEW, OLD, TOKENS, counted, verl_loss


def flat(news, olds, advs) -> list[tuple]:
    """(row, position, new, old, advantage) of every token, row-major."""
    return [(i, t, n, o, a) for i, row in enumerate(zip(news, olds, advs)) for t, (n, o, a) in enumerate(zip(*row))]


def clamped(d: float, config) -> float:
    return max(-config.logratio_clamp, min(config.logratio_clamp, d))


def covariances(tokens: list[tuple], eps: float) -> tuple[list[float], list[float]]:
    """Each token's covariance, and a bound on its rounding error (where the means cancel)."""
    mean_a = sum(a for *_, a in tokens) / (len(tokens) + eps)
    mean_logp = sum(n for _, _, n, _, _ in tokens) / (len(tokens) + eps)
    cov = [(a - mean_a) * (n - mean_logp) for _, _, n, _, a in tokens]
    error = [1e-12 * ((abs(a) + abs(mean_a)) * abs(n - mean_logp) + abs(a - mean_a) * (abs(n) + abs(mean_logp))) + 1e-300 for *_, n, _, a in tokens]
    return cov, error


def near(x: float, y: float) -> bool:
    return abs(x - y) <= 1e-9 * max(1.0, abs(x))


# the slow references (tests/objective/references.py): functions of every row
@whole_input
def kl_cov_reference(news, olds, advs, config) -> list[float]:
    tokens, sums = flat(news, olds, advs), [0.0] * len(news)
    if not tokens:
        return sums
    cov, error = covariances(tokens, 0.0)
    k = max(1, int(len(tokens) * config.kl_cov_ratio))
    order = sorted(range(len(tokens)), key=lambda j: (-cov[j], tokens[j][0], tokens[j][1]))
    last, same = order[k - 1], lambda j, u: (tokens[j][2], tokens[j][4]) == (tokens[u][2], tokens[u][4])  # cov reads (log pi, A)
    # a near tie at the cut is decided by rounding: not this test's business
    assume(all(same(last, u) or abs(cov[last] - cov[u]) > error[last] + error[u] for u in order[k:]))
    chosen = set(order[:k])
    for j, (i, _, n, o, a) in enumerate(tokens):
        d = clamped(n - o, config)
        sums[i] += a * math.exp(d) - (config.ppo_kl_coef * abs(d) if j in chosen else 0.0)
    return sums


@whole_input
def clip_cov_reference(news, olds, advs, config) -> list[float]:
    tokens, sums = flat(news, olds, advs), [0.0] * len(news)
    cov, error = covariances(tokens, 1e-8)
    low, high = 1 - config.epsilon_low, 1 + config.epsilon_high
    terms, candidates = [], []
    for j, (_, _, n, o, a) in enumerate(tokens):
        r = math.exp(clamped(n - o, config))
        at_bound = min(abs(cov[j] - config.clip_cov_lb), abs(cov[j] - config.clip_cov_ub)) <= error[j]
        assume(not (near(r, low) or near(r, high) or at_bound))
        binds = (a > 0 and r > high) or (a < 0 and r < low)
        if not binds and config.clip_cov_lb < cov[j] < config.clip_cov_ub:
            candidates.append(j)
        terms.append(a * (min(r, high) if a > 0 else max(r, low)))
    drawn = {candidates[k] for k in draw(len(candidates), max(int(config.clip_cov_ratio * len(tokens)), 1), config.seed)}
    for j, (i, *_) in enumerate(tokens):
        sums[i] += 0.0 if j in drawn else terms[j]
    return sums


REFERENCES = {"kl_cov": kl_cov_reference, "clip_cov": clip_cov_reference}


def case_rows(config):
    """The verl case as rows of tokens, its per-row advantages, and what the loss's scans find."""
    mask = np.array(MASK, dtype=bool).ravel()
    tokens = Tokens(np.full(6, 4), np.array(NEW).ravel(), np.array(OLD).ravel(), mask=mask)
    adv = np.array(ADV)
    return tokens, adv, scanned(lambda partial, state: [partial(tokens, adv, 0, state)], config)


def loss_of(terms) -> float:
    """verl's token-mean loss of the row terms."""
    return -terms["objective_sum"].sum() / TOKENS


def test_kl_cov_verl_numbers():
    # k = max(1, int(14 * 0.0002)) = 1 token of largest cov = (A - mean A)(log pi - mean log pi),
    # mean A = (4 - 1.5 + 1.6 - 4.8 + 0.6) / 14 = -0.1 / 14: the token (3, 3) (A = -1.2, log pi
    # = -2.95, the lowest), cov 2.18. verl: L = -A rho everywhere (no clip), + 0.1 |d| at (3, 3),
    # d = -2.95 + 3.0 = 0.05
    unclipped = -sum(a * math.exp(n - o) for _, _, n, o, a in counted())
    assert verl_loss("kl_cov") == pytest.approx((unclipped + 0.1 * 0.05) / TOKENS, rel=1e-13)
    assert verl_loss("kl_cov") == pytest.approx(0.37654463255676013, rel=1e-12)  # verl's
    assert verl_loss("kl_cov", "seq-mean-token-sum") == pytest.approx(0.8786041426324401, rel=1e-12)  # verl's engine
    # ratio 0.2: k = int(14 * 0.2) = int(2.8000000000000003) = 2, the next is (0, 0) (A = 1, the
    # highest log pi, -0.1: cov 1.03; kl_cov does not leave clipped tokens out), d = -0.1 + 0.4 = 0.3
    assert verl_loss("kl_cov", kl_cov_ratio=0.2) == pytest.approx((unclipped + 0.1 * (0.05 + 0.3)) / TOKENS, rel=1e-13)
    assert verl_loss("kl_cov", kl_cov_ratio=0.2) == pytest.approx(0.3786874896996172, rel=1e-12)


def test_clip_cov_verl_numbers():
    # Defaults (lb 1, ub 5, ratio 0.0002: one token): the one candidate is (3, 3), cov 2.18 (A < 0,
    # rho = e^0.05 above 0.8: the clip does not bind), so it is drawn whatever the seed; its term
    # is 0 and it stays counted. The others: PPO's clip, no dual clip.
    def ppo(n, o, a):
        r = math.exp(n - o)
        return a * (min(r, 1.2) if a > 0 else max(r, 0.8))

    expected = -sum(ppo(n, o, a) for i, t, n, o, a in counted() if (i, t) != (3, 3)) / TOKENS
    for seed in (0, 1):
        assert verl_loss("clip_cov", seed=seed) == pytest.approx(expected, rel=1e-13)
    assert verl_loss("clip_cov") == pytest.approx(0.30369782648062493, rel=1e-12)  # verl's
    assert verl_loss("clip_cov", "seq-mean-token-sum") == pytest.approx(0.708628261788125, rel=1e-12)  # verl's engine
    # lb 0.05, ratio 0.2: two to draw, two candidates, (0, 3) and (3, 3): both left out
    assert verl_loss("clip_cov", clip_cov_lb=0.05, clip_cov_ratio=0.2) == pytest.approx(0.3515778297688849, rel=1e-12)


def test_clip_cov_given_selection():
    # lb 0.05: the candidates are (0, 3) (cov 0.67) and (3, 3) (cov 2.18), in verl's order too;
    # one to draw. verl's torch.randperm after torch.manual_seed(0) drew (0, 3): 0.4416867808868298.
    # Ours draws with its own generator; given verl's selection it gives verl's number.
    config = ObjectiveConfig(loss="clip_cov", clip_cov_lb=0.05)
    tokens, adv, found = case_rows(config)
    counts = candidate_counts(block(tokens, adv, config, 0, found.means).inputs, found.means, config)
    assert counts.tolist() == [1, 0, 0, 1, 0, 0] and found.means.n == TOKENS
    verl_drawn = replace(found, row=np.array([0]), rank=np.array([0]))  # row 0's first candidate: (0, 3)
    assert loss_of(row_terms(tokens, adv, config, context=verl_drawn)) == pytest.approx(0.4416867808868298, rel=1e-12)
    other = replace(found, row=np.array([3]), rank=np.array([0]))  # (3, 3), as with the defaults
    assert loss_of(row_terms(tokens, adv, config, context=other)) == pytest.approx(0.30369782648062493, rel=1e-12)


def test_draw():
    assert draw(0, 1, 0).tolist() == [] and draw(2, 5, 0).tolist() == [0, 1]
    drawn = draw(1000, 10, 3)
    assert len(set(drawn.tolist())) == 10 and drawn.tolist() == sorted(drawn.tolist()) and np.array_equal(drawn, draw(1000, 10, 3))
    assert not np.array_equal(drawn, draw(1000, 10, 4))


@pytest.mark.parametrize(
    "options", [{"loss": "kl_cov", "kl_cov_ratio": 0.05}, {"loss": "clip_cov", "clip_cov_lb": -1.0, "clip_cov_ratio": 0.1, "seed": 5}]
)
def test_whole_input_whatever_the_batches(tmp_path, options):
    # the means and the chosen tokens are the whole input's: the same for any batch size or
    # thread count, and the same as the Python API's one batch
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 9, 60)
    new = [list(rng.uniform(-4, 0, n)) for n in lengths]
    old = [list(np.minimum(np.array(row) + rng.normal(0, 0.3, len(row)), 0.0)) for row in new]
    adv = rng.normal(0, 1, 60)
    path = tmp_path / "r.parquet"
    pq.write_table(pa.table({"logprobs": new, "old_logprobs": old, "advantage": adv}), path)
    config = ObjectiveConfig(agg="token-mean", **options)
    expected = policy_objective(new, old, advantage_values=adv, agg="token-mean", details=True, **options)
    assert expected["clip_frac"][{"kl_cov": "penalised", "clip_cov": "drawn"}[options["loss"]]] > 0
    for batch_rows, threads in ((1, 1), (7, 2), (64, 2)):
        out = objective_file(str(path), config=config, batch_rows=batch_rows, threads=threads)
        assert out["objective"] == pytest.approx(expected["objective"], rel=1e-14)
        assert out["clip_frac"] == expected["clip_frac"]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"loss": "clip_cov", "clip_cov_lb": 5.0}, "`clip_cov_lb` must be < `clip_cov_ub`"),
        ({"loss": "clip_cov", "clip_cov_ratio": 0.0}, "`clip_cov_ratio` must be in"),
        ({"loss": "kl_cov", "kl_cov_ratio": 1.5}, "`kl_cov_ratio` must be in"),
        ({"loss": "kl_cov", "ppo_kl_coef": -0.1}, "`ppo_kl_coef` must be >= 0"),
        ({"loss": "clip_cov", "seed": -1}, "`seed` must be an integer >= 0"),
        ({"loss": "clip_cov", "seed": 1.5}, "`seed` must be an integer >= 0"),
        ({"loss": "ppo", "seed": 1}, "loss 'ppo' takes no `seed`"),
        ({"loss": "kl_cov", "clip_cov_lb": 0.5}, "loss 'kl_cov' takes no `clip_cov_lb`"),
        ({"loss": "clip_cov", "ratio_level": "sequence"}, "loss 'clip_cov' takes no `ratio_level`"),
    ],
)
def test_options_checked(options, message):
    with pytest.raises(UsageError, match=message):
        ObjectiveConfig(**options)


def test_defined_without_a_clamp_and_with_the_rejection_mask():
    # verl computes exp(new - old) unclamped in kl_cov and clip_cov: 709 unless given
    assert ObjectiveConfig(loss="kl_cov").logratio_clamp == 709.0
    assert ObjectiveConfig(loss="clip_cov", logratio_clamp=20.0).logratio_clamp == 20.0
    # rejected tokens leave the mask before the statistics (verl's decoupled rejection rewrites
    # the response mask first): rejecting every token of row 0 equals dropping row 0's tokens
    new, old, adv = [[-0.5, -0.6], [-1.0, -2.0, -0.3]], [[-0.7, -0.4], [-1.1, -1.5, -0.3]], [1.0, -1.0]
    rollout = [[-5.0, -5.0], [-1.1, -1.5, -0.3]]
    kept = policy_objective(new, old, advantage_values=adv, mask=[[0, 0], [1, 1, 1]], loss="kl_cov", kl_cov_ratio=0.5, agg="token-sum")
    rejected = policy_objective(
        new, old, advantage_values=adv, rollout_log_probs=rollout, reject="k1", reject_threshold="2", loss="kl_cov", kl_cov_ratio=0.5, agg="token-sum"
    )
    assert rejected == kept
