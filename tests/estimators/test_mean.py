"""Dr.GRPO's mean baseline: r - group mean, never scaled (aliases drgrpo, unbiased)."""

from grpo_cli import AdvantageConfig, advantages


def test_mean_aliases_are_unscaled():
    for name in ("mean", "drgrpo", "unbiased"):
        cfg = AdvantageConfig(estimator=name)
        assert cfg.estimator == "mean" and cfg.scale == "none"
        assert advantages([1.0, 0.0], [0, 0], cfg).tolist() == [0.5, -0.5]
