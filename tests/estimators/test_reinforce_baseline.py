"""REINFORCE++-baseline: r - group mean, whitened over every valid token (verl
compute_reinforce_plus_plus_baseline_outcome_advantage + masked_whiten; OpenRLHF
reinforce_baseline + its batch whitening)."""

import numpy as np

from grpo_cli import AdvantageConfig, advantages


def test_hand_derived_token_weighted_whitening():
    # r - mean: group a (1, 0) -> (0.5, -0.5); group b (1, 0) -> (0.5, -0.5); lengths (3, 1, 1, 1).
    # Over the 6 tokens: values (.5, .5, .5, -.5, .5, -.5), mean 1/6, sum of squared deviations
    # 4 * (1/3)^2 + 2 * (2/3)^2 = 4/3. verl: sample variance (4/3) / 5, A = (x - 1/6) / sqrt(var + 1e-8).
    x, mu, var = np.array([0.5, -0.5, 0.5, -0.5]), 1 / 6, (4 / 3) / 5
    verl = AdvantageConfig(estimator="reinforce-baseline", whiten_std="sample", whiten_eps_at="var", whiten_eps=1e-8)
    got = advantages([1.0, 0.0, 1.0, 0.0], list("aabb"), verl, lengths=[3, 1, 1, 1])
    np.testing.assert_allclose(got, (x - mu) / np.sqrt(var + 1e-8), rtol=1e-14)
    # OpenRLHF: population variance (4/3) / 6, A = (x - mu) * rsqrt(clamp(var, 1e-8))
    openrlhf = AdvantageConfig(estimator="reinforce-baseline", whiten_std="population", whiten_eps_at="var-floor")
    got = advantages([1.0, 0.0, 1.0, 0.0], list("aabb"), openrlhf, lengths=[3, 1, 1, 1])
    np.testing.assert_allclose(got, (x - mu) / np.sqrt((4 / 3) / 6), rtol=1e-14)


def test_equals_whitening_the_repeated_tokens():
    rng = np.random.default_rng(0)
    r, keys, lengths = rng.random(40), np.repeat(np.arange(10), 4), rng.integers(1, 30, 40)
    centered = r - np.repeat(r.reshape(10, 4).mean(axis=1), 4)
    tokens = np.repeat(centered, lengths)
    expected = (centered - tokens.mean()) / (tokens.std(ddof=1) + 1e-8)  # this tool's default whitening form
    got = advantages(r, keys, AdvantageConfig(estimator="reinforce-baseline"), lengths=lengths)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
