"""Presets reproduce each framework's numbers, estimator by estimator and loss by loss, at the
release each preset is read from. Each expected value is derived in the test from the
framework's published formula (file and line in /work/research/41-style notes: the docs'
presets page names the release and files)."""

import json
import math

import numpy as np
import pytest

from grpo_cli import AdvantageConfig, ObjectiveConfig, advantages, policy_objective
from grpo_cli.presets import ALIASES, PRESETS, Preset

from .conftest import run_grpo, write_jsonl_rows

# One group of four, one of two and one of one row.
REWARDS = np.array([1.0, 0.0, 0.0, 1.0, 0.5, 0.0, 0.7])
GROUPS = ["a", "a", "a", "a", "b", "b", "c"]


def framework_grpo(eps: float, singleton) -> np.ndarray:
    """(r - mean_g) / (torch.std(r_g) + eps), torch.std being the sample std (ddof 1);
    ``singleton(r)`` for a group of one row."""
    out = np.empty_like(REWARDS)
    for key in dict.fromkeys(GROUPS):
        rows = [i for i, g in enumerate(GROUPS) if g == key]
        r = REWARDS[rows]
        out[rows] = singleton(r) if len(r) == 1 else (r - r.mean()) / (r.std(ddof=1) + eps)
    return out


@pytest.mark.parametrize(
    "preset, eps, singleton",
    [
        # verl compute_grpo_outcome_advantage: epsilon 1e-6; a group of one has mean 0, std 1
        ("verl", 1e-6, lambda r: r / (1 + 1e-6)),
        # TRL: (r - mean) / (nanstd + 1e-4); nanstd of one value is NaN, and nan_to_num makes it 0
        ("trl", 1e-4, lambda r: 0.0 * r),
        # OpenRLHF group_norm: / (std + 1e-9); it asserts groups of more than one (0 here)
        ("openrlhf", 1e-9, lambda r: 0.0 * r),
        # Twinkle GRPOAdvantage 'group': / (std + 1e-8); num_generations 1 returns the rewards
        ("twinkle", 1e-8, lambda r: r),
    ],
)
def test_preset_advantages(preset, eps, singleton):
    got = advantages(REWARDS, GROUPS, AdvantageConfig(preset=preset))
    np.testing.assert_allclose(got, framework_grpo(eps, singleton), rtol=1e-14, atol=0)


def test_worked_numbers():
    # group a [1, 0, 0, 1]: mean 0.5, sample std sqrt(1/3) = 0.5773503; 0.5 / (0.5773503 + 1e-6) = 0.8660239
    a = advantages(REWARDS, GROUPS, AdvantageConfig(preset="verl"))
    assert round(a[0], 7) == 0.8660239 and round(a[6], 7) == 0.6999993


def test_explicit_options_override_a_preset():
    c = AdvantageConfig(preset="verl", eps=0.0, std="population")
    assert (c.estimator, c.std, c.eps, c.singleton) == ("grpo", "population", 0.0, "unit-std")
    assert c.given == {"eps", "std"}
    # a preset's scale options do not bind an estimator that is never scaled
    assert AdvantageConfig(preset="verl", estimator="mean").scale == "none"
    o = ObjectiveConfig(preset="verl", dual_clip=None, agg="seq-mean-token-sum")
    assert (o.dual_clip, o.agg, o.logratio_clamp) == (3.0, "seq-mean-token-sum", 20.0)  # None: not given
    assert ObjectiveConfig(preset="trl", epsilon_high=0.28).epsilon_low == 0.2


def verl_objective(new, old, adv, eps=0.2, c=3.0):
    """verl compute_policy_loss_vanilla + agg_loss('token-mean'): the per-token loss
    max(-A rho, -A clip(rho, 1 - eps, 1 + eps)), and for A < 0 min(that, -A c), averaged over
    every token; rho = exp(clamp(new - old, -20, 20)). The objective is minus the loss."""
    losses = []
    for n_row, o_row, a in zip(new, old, adv):
        for n, o in zip(n_row, o_row):
            rho = math.exp(max(-20.0, min(20.0, n - o)))
            lc = max(-a * rho, -a * min(max(rho, 1 - eps), 1 + eps))
            losses.append(min(lc, -a * c) if a < 0 else lc)
    return -sum(losses) / len(losses)


def test_verl_objective_from_rewards(tmp_path):
    new = [[-0.1, -2.0, -0.3], [-0.5], [-1.0, -0.2], [-0.05, -0.05], [-3.0], [-0.4, -0.1]]
    old = [[-0.3, -0.2, -0.3], [-0.1], [-1.5, -0.2], [-0.9, -0.05], [-0.1], [-0.4, -0.4]]
    rewards = [1.0, 0.0, 0.0, 1.0, 0.2, 0.9]
    ids = ["p", "p", "p", "p", "q", "q"]
    adv = advantages(rewards, ids, AdvantageConfig(std="sample", eps=1e-6))
    expected = verl_objective(new, old, adv)
    rows = [{"uid": i, "score": r, "log_probs": n, "old_log_probs": o} for i, r, n, o in zip(ids, rewards, new, old)]
    src = write_jsonl_rows(tmp_path / "verl.jsonl", rows)
    figures = run_grpo("objective", str(src), "--preset", "verl", "-q", "--summary-json", "-").stdout
    import json

    got = json.loads(figures)
    assert abs(got["objective"] - expected) < 1e-12 and got["config"]["preset"] == "verl"
    assert got["config"]["advantages"]["estimator"] == "grpo"
    assert policy_objective(new, old, rewards, groups=ids, preset="verl") == pytest.approx(expected, abs=1e-12)


def test_presets_command_lists_every_preset_its_version_and_values():
    shown = run_grpo("presets", env={"COLUMNS": "200"}).stdout.decode()
    for preset in PRESETS.values():
        assert preset.name in shown and preset.version in shown and preset.package in shown and preset.commit in shown
        for value in preset.advantage.values():
            assert (f"{value:g}" if isinstance(value, float) else str(value)) in shown


def test_presets_command_shows_one_preset_per_estimator_and_loss():
    shown = " ".join(run_grpo("presets", "--preset", "verl@0.9", env={"COLUMNS": "250"}).stdout.decode().split())
    assert "verl 0.9.1" in shown and "verl==0.9.1" in shown
    assert "rloo │ --scale none --singleton reward │" in shown  # verl never scales RLOO
    assert "gspo │ --agg token-mean" in shown  # 0.9.1: GSPO takes the configured aggregation
    assert "estimator optimal_token_baseline │ --estimator optimal-token-baseline (reads old_log_probs and sum_pi_squared)" in shown
    assert "optimal-token-baseline │ - │" in shown  # no preset value applies (a lone row keeps its returns, as verl)
    assert "with rollout correction (W weighted by the IS weights squared) │ the same, reading the batch's rollout_is_weights" in shown
    assert "not reproduced" not in shown  # verl 0.9.1: every estimator, loss and correction has its form
    older = " ".join(run_grpo("presets", "--preset", "verl@0.7", env={"COLUMNS": "250"}).stdout.decode().split())
    assert "verl 0.7.0" in older and "f9c855f7" in older and "gspo │ --agg seq-mean-token-mean" in older
    assert run_grpo("presets", "--preset", "verl@0.8", check=False).returncode == 2


@pytest.mark.parametrize("preset, ddof, form, eps", [("verl", 1, "var", 1e-8), ("openrlhf", 0, "var-floor", 1e-8), ("trl", 1, "std", 1e-4)])
def test_presets_whiten_as_their_framework(preset, ddof, form, eps):
    """verl masked_whiten: (x - mu) * rsqrt(var_unbiased + 1e-8); OpenRLHF: (x - mu) *
    rsqrt(clamp(var_biased, min=1e-8)); TRL: (x - mu) / (std_unbiased + 1e-4). Over tokens for
    REINFORCE++-baseline: r - group mean = (0.5, -0.5, 0.25, -0.25) on (2, 1, 1, 3) tokens."""
    centered = np.array([0.5, -0.5, 0.25, -0.25])
    tokens = np.repeat(centered, [2, 1, 1, 3])
    var = tokens.var(ddof=ddof)
    s = {"var": np.sqrt(var + eps), "var-floor": np.sqrt(max(var, eps)), "std": np.sqrt(var) + eps}[form]
    config = AdvantageConfig(preset=preset, estimator="reinforce-baseline")
    got = advantages([1.0, 0.0, 0.5, 0.0], list("aabb"), config, lengths=[2, 1, 1, 3])
    np.testing.assert_allclose(got, (centered - tokens.mean()) / s, rtol=1e-14)


# Resolution -----------------------------------------------------------------------------


@pytest.mark.parametrize("alias, name", list(ALIASES.items()))
def test_the_newest_release_by_its_version_is_the_same_preset(alias, name):
    assert AdvantageConfig(preset=alias).preset == name and ObjectiveConfig(preset=alias).preset == name
    assert AdvantageConfig(preset=alias, estimator="rloo").figures == AdvantageConfig(preset=name, estimator="rloo").figures


def test_every_preset_resolves_every_estimator_and_loss():
    from grpo_cli.estimators import ESTIMATORS
    from grpo_cli.objective import LOSSES

    for name in PRESETS:
        for estimator in ESTIMATORS:
            assert AdvantageConfig(preset=name, estimator=estimator).estimator == estimator
        for loss in LOSSES:
            own = {"dro_beta": 0.1} if loss == "dro" else {}  # dro's beta has no default, in verl too
            assert ObjectiveConfig(preset=name, loss=loss, **own).loss == loss


def test_a_preset_value_for_an_estimator_or_loss_comes_before_its_base_and_after_what_is_given():
    assert AdvantageConfig(preset="verl", estimator="rloo").scale == "none"
    assert AdvantageConfig(preset="verl", estimator="rloo", scale="group").scale == "group"  # given
    assert AdvantageConfig(preset="twinkle", estimator="rloo").scale == "group"  # twinkle's RLOO is scaled
    o = ObjectiveConfig(preset="twinkle", loss="cispo", epsilon=0.1)
    assert (o.agg, o.cispo_clip, o.epsilon_high) == ("token-mean", "upper", 0.1)
    # the loss's own definition (GSPO: sequence ratio, seq-mean-token-mean) comes before the base values
    assert (ObjectiveConfig(preset="twinkle", loss="gspo").ratio_level, ObjectiveConfig(preset="trl", loss="sapo").agg) == (
        "sequence",
        "seq-mean-token-mean",
    )


def test_a_preset_value_is_keyed_by_the_estimator_in_use_aliases_resolved(monkeypatch):
    import grpo_cli.config
    import grpo_cli.presets

    p = Preset("x", "X", "1", "x==1", "c", "f", {"estimator": "drgrpo", "singleton": "zero"}, {}, {"mean": {"singleton": "reward"}})
    monkeypatch.setitem(grpo_cli.presets.PRESETS, "x", p)
    monkeypatch.setattr(grpo_cli.config, "NAMES", (*grpo_cli.config.NAMES, "x"))
    assert AdvantageConfig(preset="x").singleton == "reward"  # the preset's estimator, drgrpo = mean
    assert AdvantageConfig(preset="x", estimator="unbiased").singleton == "reward"
    assert AdvantageConfig(preset="x", estimator="grpo").singleton == "zero"


def test_a_preset_value_an_estimator_or_loss_does_not_take_does_not_leak():
    c = AdvantageConfig(preset="verl", estimator="mean")
    assert (c.scale, c.std, c.eps) == ("none", "population", 0.0)
    c = AdvantageConfig(preset="verl", estimator="rloo")  # scaled options are this tool's once unscaled
    assert (c.std, c.eps) == ("population", 0.0)
    assert ObjectiveConfig(preset="verl", loss="gspo").dual_clip is None
    assert ObjectiveConfig(preset="trl").max_length is None  # dr_grpo's constant, for dr_grpo only
    assert ObjectiveConfig(preset="trl", agg="dr_grpo").max_length == 512
    assert ObjectiveConfig(preset="trl@1.9", agg="dr_grpo").max_length == 256


def test_objective_computes_with_the_preset_estimator_conventions():
    from grpo_cli.plan import default_estimator, objective_estimator

    assert (objective_estimator("rloo", "trl").scale, objective_estimator("rloo", "trl").kl_in_reward) == ("none", 0.05)
    assert default_estimator("verl@0.7").eps == 1e-6


# Estimators, per framework and release ---------------------------------------------------

R = np.array([1.0, 0.0, 0.0, 1.0, 0.5, 0.0, 0.7])
G = ["a", "a", "a", "a", "b", "b", "c"]


def leave_one_out(r: np.ndarray, groups: list) -> np.ndarray:
    """r_i - mean of the other rewards of its group (r_i for a group of one)."""
    out = r.copy()
    for key in dict.fromkeys(groups):
        rows = [i for i, g in enumerate(groups) if g == key]
        if len(rows) > 1:
            out[rows] = r[rows] - (r[rows].sum() - r[rows]) / (len(rows) - 1)
    return out


@pytest.mark.parametrize("preset", ["verl", "verl@0.7"])
def test_verl_rloo_is_never_scaled_and_keeps_a_lone_reward(preset):
    """compute_rloo_outcome_advantage (core_algos.py 0.9.1:588-637, 0.7.0:475-524, the same
    body): A = n/(n-1) (r - mean) = r - mean of the others, no std; a group of one keeps r.
    Group a [1, 0, 0, 1]: 1 - 1/3 = 2/3, 0 - 2/3; b [0.5, 0]: +-0.5; c: 0.7."""
    got = advantages(R, G, AdvantageConfig(preset=preset, estimator="rloo"))
    np.testing.assert_allclose(got, leave_one_out(R, G), rtol=1e-14)
    np.testing.assert_allclose(got, [2 / 3, -2 / 3, -2 / 3, 2 / 3, 0.5, -0.5, 0.7], rtol=1e-14)
    # rloo_vectorized: (n r - sum) / max(n - 1, 1) * [n > 1]: a group of one gets 0
    vectorized = advantages(R, G, AdvantageConfig(preset=preset, estimator="rloo", singleton="zero"))
    np.testing.assert_allclose(vectorized, [*leave_one_out(R, G)[:6], 0.0], rtol=1e-14)


@pytest.mark.parametrize("preset", ["verl", "verl@0.7"])
def test_verl_opo_grpo_unscaled_passk_and_gpg(preset):
    lengths = [3, 1, 2, 2, 4, 1, 5]
    # compute_opo_outcome_advantage: b = sum_g L r / sum_g L; a group of one: b = 0 (sum of none), A = r
    a_base, b_base = (3 * 1 + 2 * 1) / (3 + 1 + 2 + 2), (4 * 0.5) / (4 + 1)
    want = [1 - a_base, -a_base, -a_base, 1 - a_base, 0.5 - b_base, -b_base, 0.7]
    np.testing.assert_allclose(advantages(R, G, AdvantageConfig(preset=preset, estimator="opo"), lengths=lengths), want, rtol=1e-14)
    # grpo with norm_adv_by_std_in_grpo False: r - mean; a group of one has mean 0: A = r
    want = [0.5, -0.5, -0.5, 0.5, 0.25, -0.25, 0.7]
    np.testing.assert_allclose(advantages(R, G, AdvantageConfig(preset=preset, scale="none")), want, rtol=1e-14)
    # compute_grpo_passk_outcome_advantage: the first best row gets (r1 - r2) / (torch.std + 1e-6)
    r = np.array([1.0, 0.25, 0.5, 0.0])
    want = [(1.0 - 0.5) / (r.std(ddof=1) + 1e-6), 0, 0, 0]
    np.testing.assert_allclose(advantages(r, list("aaaa"), AdvantageConfig(preset=preset, estimator="passk")), want, rtol=1e-14)
    # compute_gpg_outcome_advantage: alpha (r - mean_g), alpha = rows / nonzero rewards = 6 / 3
    np.testing.assert_allclose(
        advantages(R[:6], G[:6], AdvantageConfig(preset=preset, estimator="gpg")),
        2 * np.array(want_c := [0.5, -0.5, -0.5, 0.5, 0.25, -0.25]),
        rtol=1e-14,
    )
    assert len(want_c) == 6


def test_verl_reinforce_baseline_keeps_a_lone_reward_before_whitening():
    """reinforce_plus_plus_baseline: a = r - mean_g (a group of one: mean 0, a = r), tiled over
    the row's tokens, masked_whiten: (a - mu) * rsqrt(var_ddof1 + 1e-8) over valid tokens."""
    r, groups, lengths = np.array([1.0, 0.0, 0.7]), ["a", "a", "c"], [2, 1, 3]
    centered = np.array([0.5, -0.5, 0.7])
    tokens = np.repeat(centered, lengths)
    want = (centered - tokens.mean()) / np.sqrt(tokens.var(ddof=1) + 1e-8)
    got = advantages(r, groups, AdvantageConfig(preset="verl", estimator="reinforce-baseline"), lengths=lengths)
    np.testing.assert_allclose(got, want, rtol=1e-13)


@pytest.mark.parametrize("preset", ["openrlhf", "trl", "trl@1.9"])
def test_rloo_of_openrlhf_and_trl_is_never_scaled(preset, tmp_path):
    """OpenRLHF experience_maker.py:268-270: r - (sum_g r - r) / (n - 1), no std. TRL
    rloo_trainer.py (1.16:1647-1703): R = r - beta sum_t (old - ref) (beta 0.05, k1), then the
    same baseline, never scaled. Group p: old - ref sums to 0 for row 0 and 0.2 for row 1, so
    R = (1, -0.01) and A = +-1.01 under TRL; OpenRLHF (its KL in the reward is added after the
    baseline and not reproduced) without the KL: +-1; group q, one row: 0."""
    rows = [
        {"prompt_id": "p", "reward": 1.0, "old_logprobs": [-0.5, -0.2, -0.1], "ref_logprobs": [-0.4, -0.3, -0.1]},
        {"prompt_id": "p", "reward": 0.0, "old_logprobs": [-1.0, -0.3], "ref_logprobs": [-1.2, -0.3]},
        {"prompt_id": "q", "reward": 0.5, "old_logprobs": [-0.7], "ref_logprobs": [-0.5]},
    ]
    src, out = write_jsonl_rows(tmp_path / "r.jsonl", rows), tmp_path / "out.jsonl"
    run_grpo("advantages", str(src), "--preset", preset, "--estimator", "rloo", "-q", "-o", str(out))
    got = [json.loads(line)["advantage"] for line in out.read_text().splitlines()]
    want = [1.0, -1.0, 0.0] if preset == "openrlhf" else [1.0 - -0.01, -0.01 - 1.0, 0.0]
    np.testing.assert_allclose(got, want, rtol=1e-14)


@pytest.mark.parametrize("preset", ["twinkle", "twinkle@0.1"])
def test_twinkle_rloo_is_scaled_by_the_group_std(preset):
    """Twinkle advantage/rloo.py:45-61: (r - mean of the others) / (torch.std(r_g) + 1e-8)."""
    r, groups = R[:6], G[:6]
    std = np.array([R[:4].std(ddof=1)] * 4 + [R[4:6].std(ddof=1)] * 2)
    got = advantages(r, groups, AdvantageConfig(preset=preset, estimator="rloo"))
    np.testing.assert_allclose(got, leave_one_out(r, groups) / (std + 1e-8), rtol=1e-14)


def test_twinkle_gae_lambda_and_whitening(tmp_path):
    """Twinkle 0.5.1 advantage/gae.py:52-103: reward r on the last token, gamma 1, lambda 0.95:
    delta_t = r_t + V_{t+1} - V_t (V after the last token 0), A_t = delta_t + 0.95 A_{t+1};
    then (A - mean) / (population std + 1e-8) over every valid token."""
    values = [[0.1, 0.2, 0.3], [0.0, 0.4]]
    rewards = [1.0, 0.0]
    raw = []
    for v, r in zip(values, rewards):
        a, out = 0.0, []
        for t in reversed(range(len(v))):
            nxt = v[t + 1] if t + 1 < len(v) else 0.0
            a = (r if t == len(v) - 1 else 0.0) + nxt - v[t] + 0.95 * a
            out.append(a)
        raw.append(out[::-1])
    flat = np.concatenate(raw)
    want = (flat - flat.mean()) / (flat.std() + 1e-8)
    src = write_jsonl_rows(
        tmp_path / "g.jsonl", [{"prompt_id": "p", "reward": r, "values": v, "mask": [1] * len(v)} for r, v in zip(rewards, values)]
    )
    run_grpo("advantages", str(src), "--preset", "twinkle", "--estimator", "gae", "--values-col", "values", "-q", "-o", str(tmp_path / "o.jsonl"))
    got = np.concatenate([json.loads(line)["token_advantage"] for line in (tmp_path / "o.jsonl").read_text().splitlines()])
    np.testing.assert_allclose(got, want, rtol=1e-12)


# Losses, per framework and release ------------------------------------------------------

# rho < 0.8, rho > 1.2 and, where A < 0, rho = e^1.3 > 3 (the dual clip) all occur
NEW = [[-0.1, -1.2, -0.3], [-0.5, -0.9], [-2.0, -0.4], [-0.2, -0.5]]
OLD = [[-0.3, -1.0, -0.6], [-0.1, -1.1], [-1.5, -0.6], [-1.5, -0.6]]
ADV = [1.0, -0.5, 0.8, -1.2]


def objective(preset: str, **options) -> float:
    return policy_objective(NEW, OLD, advantage_values=ADV, preset=preset, **options)


def gspo_row_losses(clamp: float) -> list[float]:
    """verl compute_policy_loss_gspo (0.9.1:1545): s_i = exp(min(mean_t(new - old), clamp)),
    L = max(-A s, -A clip(s, 0.8, 1.2)) on every token of the row (no dual clip)."""
    out = []
    for n, o, a in zip(NEW, OLD, ADV):
        s = math.exp(min(sum(x - y for x, y in zip(n, o)) / len(n), clamp))
        out.append(max(-a * s, -a * min(max(s, 0.8), 1.2)))
    return out


def test_verl_gspo_token_mean_and_verl_07_seq_mean_token_mean():
    """0.9.1 aggregates GSPO as configured (token-mean: sum_i n_i L_i / sum_i n_i); 0.7.0
    forces seq-mean-token-mean (mean_i L_i). The objective is minus the loss."""
    losses, n = gspo_row_losses(10.0), [len(row) for row in NEW]
    assert objective("verl", loss="gspo") == pytest.approx(-sum(k * x for k, x in zip(n, losses)) / sum(n), abs=1e-14)
    assert objective("verl@0.7", loss="gspo") == pytest.approx(-sum(losses) / len(losses), abs=1e-14)


def test_trl_and_openrlhf_gspo_take_no_clamp():
    """A row whose mean log-ratio is 11: verl clamps log s at 10; TRL (grpo_trainer.py
    1.16:3084-3094, dapo: token-mean) and OpenRLHF (loss.py:189-196, seq-mean-token-mean
    forced) do not. Row 1 has A < 0, so its term is -A max(s, 0.8) = 0.5 e^11."""
    new = [[-0.1, -1.2], [-0.5, -0.5]]
    old = [[-0.3, -1.0], [-11.0, -12.0]]
    adv = [1.0, -0.5]
    s0 = math.exp(((-0.1 + 0.3) + (-1.2 + 1.0)) / 2)
    l0, l1 = max(-1.0 * s0, -1.0 * min(max(s0, 0.8), 1.2)), 0.5 * math.exp(11.0)
    for preset, want in (("trl", -(2 * l0 + 2 * l1) / 4), ("openrlhf", -(l0 + l1) / 2), ("verl", -(2 * l0 + 2 * 0.5 * math.exp(10.0)) / 4)):
        got = policy_objective(new, old, advantage_values=adv, preset=preset, loss="gspo")
        assert got == pytest.approx(want, rel=1e-14), preset


@pytest.mark.parametrize("preset", ["twinkle", "twinkle@0.1"])
def test_twinkle_cispo_caps_from_above_and_averages_tokens(preset):
    """Twinkle loss/grpo.py CISPOLoss (0.5.1:412-424, 0.1:494-506): L_t = -min(rho_t, 1 + eps) A
    log pi_t (eps 0.2; no lower bound), sum over tokens / token count."""
    terms = [-min(math.exp(n - o), 1.2) * a * n for row_n, row_o, a in zip(NEW, OLD, ADV) for n, o in zip(row_n, row_o)]
    assert objective(preset, loss="cispo") == pytest.approx(-sum(terms) / len(terms), abs=1e-14)
    # row 2, token 0: rho = exp(-0.5) = 0.61 < 1 - 0.2 stays unclipped from below
    assert math.exp(NEW[2][0] - OLD[2][0]) < 0.8


@pytest.mark.parametrize("preset, constant", [("trl", 512), ("trl@1.9", 256)])
def test_trl_dr_grpo_divides_by_rows_times_max_completion_length(preset, constant):
    """TRL loss_type dr_grpo: sum of the per-token PPO losses / (rows x max_completion_length),
    512 in 1.16 (grpo_config.py:494), 256 in 1.9 (grpo_config.py:488); no log-ratio clamp."""
    terms = []
    for row_n, row_o, a in zip(NEW, OLD, ADV):
        for n, o in zip(row_n, row_o):
            rho = math.exp(n - o)
            terms.append(min(rho * a, min(max(rho, 0.8), 1.2) * a))
    assert objective(preset, agg="dr_grpo") == pytest.approx(sum(terms) / (len(NEW) * constant), abs=1e-15)


def test_openrlhf_reinforce_puts_its_default_kl_in_the_reward(tmp_path):
    """OpenRLHF 0.11.2 (experience_maker.py:205-213, :300-338; models/utils.py:131-159): the KL
    is in the reward by default, init_coef 0.01, k1 = old - ref per token; the token reward is
    -0.01 kl_t, plus r on the last token; G_t = sum_{k >= t} of them (gamma 1); then whitened over
    every valid token: (G - mu) / sqrt(max(population var, 1e-8))."""
    rows = [
        {"prompt_id": "p", "reward": 1.0, "old_logprobs": [-0.5, -0.2, -0.1], "ref_logprobs": [-0.4, -0.3, -0.3]},
        {"prompt_id": "q", "reward": 0.0, "old_logprobs": [-1.0, -0.3], "ref_logprobs": [-1.2, -0.1]},
    ]
    returns = []
    for row in rows:
        kl = [o - r for o, r in zip(row["old_logprobs"], row["ref_logprobs"])]
        step = [-0.01 * k for k in kl]
        step[-1] += row["reward"]
        returns += [sum(step[t:]) for t in range(len(step))]
    g = np.array(returns)
    want = (g - g.mean()) / math.sqrt(max(g.var(), 1e-8))
    src, out = write_jsonl_rows(tmp_path / "r.jsonl", rows), tmp_path / "o.jsonl"
    run_grpo("advantages", str(src), "--preset", "openrlhf", "--estimator", "reinforce", "-q", "-o", str(out))
    got = np.concatenate([json.loads(line)["token_advantage"] for line in out.read_text().splitlines()])
    np.testing.assert_allclose(got, want, rtol=1e-12)


# (preset, dual clip, log-ratio clamp, aggregation, SAPO's tau where A < 0), from each release's defaults
LOSS_CONVENTIONS = [
    ("verl", 3.0, 20.0, "token-mean", 1.05),  # actor.yaml: clip_ratio_c 3, loss_agg_mode token-mean; core_algos: +-20
    ("verl@0.7", 3.0, 20.0, "token-mean", 1.05),
    ("trl", None, math.inf, "token-mean", 1.05),  # loss_type dapo, no clamp, sapo_temperature_neg 1.05
    ("trl@1.9", None, math.inf, "token-mean", 1.05),
    ("openrlhf", None, 20.0, "token-mean", 1.05),  # sapo is not OpenRLHF's; its tau is unused
    ("twinkle", None, 20.0, "seq-mean-token-mean", 1.0),  # GRPOLoss: mean of row token-means; SAPOLoss tau 1/1
    ("twinkle@0.1", None, 20.0, "seq-mean-token-mean", 1.0),
]


def aggregated(terms: list[list[float]], agg: str) -> float:
    """token-mean: all tokens' sum / token count; seq-mean-token-mean: mean of the row means."""
    if agg == "token-mean":
        return sum(map(sum, terms)) / sum(map(len, terms))
    return sum(sum(row) / len(row) for row in terms) / len(terms)


@pytest.mark.parametrize("preset, dual, clamp, agg, tau_neg", LOSS_CONVENTIONS)
def test_ppo_and_sapo_of_every_preset(preset, dual, clamp, agg, tau_neg):
    """PPO (verl vanilla, TRL dapo, OpenRLHF ppo, Twinkle grpo): per token A min(rho, 1.2) for
    A > 0, A min(max(rho, 0.8), C) for A < 0 (C: the dual clip, verl only), rho = exp of the
    clamped log-ratio. SAPO (verl and TRL forced/grpo-aggregated, Twinkle): sigma(tau (rho - 1))
    4 / tau A, tau 1 where A > 0, seq-mean-token-mean."""
    ppo, sapo = [], []
    for row_n, row_o, a in zip(NEW, OLD, ADV):
        rho = [math.exp(max(-clamp, min(clamp, n - o))) for n, o in zip(row_n, row_o)]
        ppo.append([a * min(r, 1.2) if a > 0 else a * min(max(r, 0.8), dual or math.inf) for r in rho])
        tau = 1.0 if a > 0 else tau_neg
        sapo.append([a * 4 / tau / (1 + math.exp(-tau * (r - 1))) for r in rho])
    assert objective(preset, loss="ppo") == pytest.approx(aggregated(ppo, agg), abs=1e-14)
    assert objective(preset, loss="sapo") == pytest.approx(aggregated(sapo, "seq-mean-token-mean"), abs=1e-14)


@pytest.mark.parametrize("preset", ["verl", "verl@0.7"])
def test_verl_cispo_clips_both_sides_and_gpg(preset):
    """verl compute_policy_loss_cispo: -clip(rho, 0.8, 1.2) A log pi per token (two-sided,
    rho clamped at +-20); compute_policy_loss_gpg: -A log pi; both token-mean."""
    cispo = [[min(max(math.exp(n - o), 0.8), 1.2) * a * n for n, o in zip(rn, ro)] for rn, ro, a in zip(NEW, OLD, ADV)]
    gpg = [[a * n for n in rn] for rn, a in zip(NEW, ADV)]
    assert objective(preset, loss="cispo") == pytest.approx(aggregated(cispo, "token-mean"), abs=1e-14)
    assert objective(preset, loss="gpg") == pytest.approx(aggregated(gpg, "token-mean"), abs=1e-14)


def test_a_presets_kl_in_the_reward_says_how_to_leave_it_out(tmp_path):
    """TRL's RLOOTrainer puts beta 0.05 of KL in the reward by default: a file without
    reference log-probs says so, and `--kl-in-reward 0` leaves it out (the plain RLOO)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "noref.parquet"
    pq.write_table(pa.table({"prompt_id": [0, 0, 1, 1], "reward": [1.0, 0.0, 1.0, 0.5], "logprobs": [[-1.0]] * 4}), path)
    proc = run_grpo("advantages", str(path), "--preset", "trl", "--estimator", "rloo", "-q", check=False)
    assert proc.returncode == 1 and proc.stderr.decode().rstrip().endswith(
        "preset 'trl' puts the KL in the reward for estimator 'rloo' (--kl-in-reward 0.05): pass --kl-in-reward 0 to leave it out"
    )
    out = tmp_path / "out.parquet"
    run_grpo("advantages", str(path), "--preset", "trl", "--estimator", "rloo", "--kl-in-reward", "0", "-o", str(out), "-q")
    # leave-one-out, never scaled: group 0 [1, 0] -> [1, -1]; group 1 [1, 0.5] -> [0.5, -0.5]
    assert pq.read_table(out)["advantage"].to_pylist() == [1.0, -1.0, 0.5, -0.5]


@pytest.mark.parametrize("preset", ["verl", "verl@0.7"])
def test_verl_remax_takes_the_kl_in_the_reward_as_a_reward_to_go(preset, tmp_path):
    """verl (ray_trainer.py apply_kl_penalty, core_algos.py compute_remax_outcome_advantage;
    0.9.1:735-767): token rewards score - beta kld (kld = old - ref, k1, masked; the score R on the
    last valid token), returns_t = sum_{k >= t} m_k reward_k, A_t = returns_t - b m_t. So
    A_t = (R - b) - beta sum_{k >= t, valid} kld_k. beta 0.1:
    row 0 (R 1, b 0.5): kld (0.2, -0.1, 0), to go (0.1, -0.1, 0): A_t = 0.5 - 0.1 (0.1, -0.1, 0) = (0.49, 0.51, 0.5);
    row 1 (R 0.4, b 0.6), token 1 masked: kld (0.2, -, -0.3, 0.3), to go (0.2, -, 0, 0.3): A_t = (-0.22, 0, -0.2, -0.23).
    (verl's numbers, run on its formula: 0.49, 0.51, 0.5, 0 and -0.22, [masked], -0.2, -0.23.)"""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path, out = tmp_path / "remax.parquet", tmp_path / "out.parquet"
    table = {
        "prompt_id": ["a", "b"],
        "reward": [1.0, 0.4],
        "reward_baseline": [0.5, 0.6],
        "response_mask": [[1, 1, 1, 0], [1, 0, 1, 1]],
        "old_logprobs": [[-0.5, -1.0, -0.2, 0.0], [-0.1, -2.0, -0.7, -0.3]],
        "ref_logprobs": [[-0.7, -0.9, -0.2, 0.0], [-0.3, -1.5, -0.4, -0.6]],
    }
    pq.write_table(pa.table(table), path)
    run_grpo("advantages", str(path), "--preset", preset, "--estimator", "remax", "--kl-in-reward", "0.1", "-o", str(out), "-q")
    got = pq.read_table(out)["token_advantage"].to_pylist()
    np.testing.assert_allclose(got[0], [0.49, 0.51, 0.5, 0.0], rtol=1e-14)
    np.testing.assert_allclose(got[1], [-0.22, 0.0, -0.2, -0.23], rtol=1e-14)


@pytest.mark.parametrize(
    "preset, kl, given, clamp",
    [
        ("verl", "k3", {}, 10.0),
        ("verl", "k1", {}, None),
        ("verl", "abs", {}, None),
        ("verl@0.7", "k2", {}, None),
        ("verl", "k1", {"kl_clamp": 5.0}, 5.0),
    ],
)
def test_verl_clamps_only_low_var_kl(preset, kl, given, clamp):
    """verl's kl_penalty clamps low_var_kl (k3) to [-10, 10] and no other estimator (kl, abs,
    mse): the preset's clamp goes with k3 alone; a clamp given is kept whatever the estimator."""
    assert ObjectiveConfig(preset=preset, beta=0.1, kl=kl, **given).kl_clamp == clamp


def test_openrlhf_clamps_every_kl_estimator():
    assert ObjectiveConfig(preset="openrlhf", beta=0.1, kl="k2").kl_clamp == 10.0
