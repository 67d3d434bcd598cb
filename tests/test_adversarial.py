"""Adversarial cases (issue 18): each was a break before its fix."""

import decimal
import json
import math
import re
import warnings

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from grpo_cli import advantages_file, policy_objective
from grpo_cli.errors import GrpoError, InputError
from grpo_cli.io import Outputs, Sink
from grpo_cli.io.formats import jsonl

from .conftest import examples, run_grpo, write_jsonl_rows


def refused(proc, code: int, message: str) -> None:
    """The run exited ``code`` with exactly ``Error: message`` on stderr and nothing on stdout."""
    assert (proc.returncode, proc.stderr.decode()) == (code, f"Error: {message}\n")
    assert proc.stdout == b""


def leftovers(folder) -> list[str]:
    """Names in ``folder`` besides the inputs a test wrote (``in.*``)."""
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("in."))


def strict_json(text: str):
    """JSON as the standard has it: NaN and Infinity are refused."""

    def refuse(token):
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def jsonl_rows(path) -> list[dict]:
    """The rows of a JSON Lines file: lines end at "\\n" only (a string may hold U+0085 or
    U+2028, which ``str.splitlines`` would also split at)."""
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n") or not text
    return [strict_json(line) for line in text.split("\n")[:-1]]


def k3(d: float) -> float:
    """KL k3 of a log-ratio d: exp(-d) + d - 1."""
    return math.exp(-d) + d - 1


# 1. --round


def test_round_is_bounded_to_what_float64_holds(tmp_path):
    src = write_jsonl_rows(tmp_path / "in.jsonl", [{"prompt_id": "a", "reward": r} for r in (1.0, 0.0)])
    refused(
        run_grpo("advantages", str(src), "-o", str(tmp_path / "out.jsonl"), "--round", "309", check=False),
        2,
        "--round must be in [0, 308] (found 309)",
    )
    assert leftovers(tmp_path) == []
    run_grpo("advantages", str(src), "-o", str(tmp_path / "out.jsonl"), "--round", "308", "-q")
    assert [row["advantage"] for row in jsonl_rows(tmp_path / "out.jsonl")] == [1.0, -1.0]


def test_round_keeps_advantages_whose_scaled_value_overflows(tmp_path):
    """A = +-1e306 rounded to 4 decimals: 1e306 * 10^4 overflows, and 1e306 has no decimals."""
    src = write_jsonl_rows(tmp_path / "in.jsonl", [{"prompt_id": "a", "reward": r} for r in (1e306, -1e306, 0.123456)])
    run_grpo("advantages", str(src), "--estimator", "mean", "-o", str(tmp_path / "out.jsonl"), "--round", "4", "-q")
    mean = (1e306 - 1e306 + 0.123456) / 3
    expected = [round(r - mean, 4) for r in (1e306, -1e306, 0.123456)]
    assert [row["advantage"] for row in jsonl_rows(tmp_path / "out.jsonl")] == expected


# 2. integers beyond 2^53 in JSON Lines


@pytest.mark.parametrize("chunk_bytes", [1 << 20, 64])  # the fraction in the same chunk, or in a later one
def test_an_integer_beyond_2_53_among_fractions_is_refused(tmp_path, monkeypatch, chunk_bytes):
    monkeypatch.setattr(jsonl, "CHUNK_BYTES", chunk_bytes)
    lines = [
        '{"prompt_id": "a", "reward": 1, "seed": 3}',
        '{"prompt_id": "a", "reward": 0, "seed": 9007199254740993}',
        '{"prompt_id": "b", "reward": 1, "seed": 2.5}',
        '{"prompt_id": "b", "reward": 0, "seed": 4}',
    ]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    message = (
        f"{tmp_path / 'in.jsonl'}: line 2: column 'seed' holds the integer 9007199254740993, which float64 would round "
        "(the column holds fractions too, or the integer is beyond int64); write such numbers as JSON strings"
    )
    with pytest.raises(GrpoError, match=f"^{re.escape(message)}$"):
        advantages_file(str(tmp_path / "in.jsonl"), str(tmp_path / "out.jsonl"))
    assert leftovers(tmp_path) == []
    lines[1] = lines[1].replace("9007199254740993", "9007199254740992")  # 2^53 itself is exact: float64 it is
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    advantages_file(str(tmp_path / "in.jsonl"), str(tmp_path / "out.jsonl"))
    assert [row["seed"] for row in jsonl_rows(tmp_path / "out.jsonl")] == [3.0, 9007199254740992.0, 2.5, 4.0]


def test_an_integer_beyond_int64_is_refused(tmp_path):
    (tmp_path / "in.jsonl").write_text('{"prompt_id": "a", "reward": 1, "seed": 18446744073709551615}\n{"prompt_id": "a", "reward": 0, "seed": 1}\n')
    refused(
        run_grpo("advantages", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out.jsonl"), check=False),
        1,
        f"{tmp_path / 'in.jsonl'}: line 1: column 'seed' holds the integer 18446744073709551615, which float64 would round "
        "(the column holds fractions too, or the integer is beyond int64); write such numbers as JSON strings",
    )
    assert leftovers(tmp_path) == []


# 3. date-like strings


def test_date_like_strings_stay_strings(tmp_path):
    lines = [
        f'{{"prompt_id": "{d}", "reward": {r}, "at": {{"when": "{d} 10:00:00"}}}}'
        for d, r in (("2024-01-01", 1.0), ("2024-01-01", 0.0), ("2024-01-02", 0.5), ("2024-01-02", 0.25))
    ]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    run_grpo("advantages", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out.jsonl"), "-q")
    out = (tmp_path / "out.jsonl").read_text().splitlines()
    assert [line[: line.index(',"advantage"')] + "}" for line in out] == [line.replace(": ", ":").replace(", ", ",") for line in lines]
    assert [strict_json(line)["advantage"] for line in out] == [1.0, -1.0, 1.0, -1.0]


def test_a_first_chunk_of_date_like_ids_is_read(tmp_path, monkeypatch):
    """The first chunk holds only date-like ids, a later one other strings: one string column."""
    monkeypatch.setattr(jsonl, "CHUNK_BYTES", 128)
    rows = [{"prompt_id": f"2024-01-0{1 + i // 2}", "reward": i % 2} for i in range(6)] + [{"prompt_id": "p", "reward": r} for r in (0, 1)]
    write_jsonl_rows(tmp_path / "in.jsonl", rows)
    advantages_file(str(tmp_path / "in.jsonl"), str(tmp_path / "out.jsonl"))
    assert [row["prompt_id"] for row in jsonl_rows(tmp_path / "out.jsonl")] == [r["prompt_id"] for r in rows]


# 4. NaN inside nested columns


NESTED_NAN = {
    "struct": pa.array([{"x": 1.0}, {"x": float("nan")}]),
    "list of lists": pa.array([[[1.0]], [[2.0, float("inf")]]]),
    "large list of lists": pa.array([[[1.0]], [[float("nan")]]], pa.large_list(pa.large_list(pa.float64()))),
    "fixed-size list": pa.FixedSizeListArray.from_arrays(pa.array([1.0, 2.0, float("nan"), 3.0]), 2),
    "map": pa.array([[("k", 1.0)], [("k", float("-inf"))]], pa.map_(pa.string(), pa.float64())),
    "list of structs of float32": pa.array([[{"y": 1.0}], [{"y": float("nan")}]], pa.list_(pa.struct([("y", pa.float32())]))),
    "list view": pa.array([[1.0], [2.0, float("nan")]], pa.list_view(pa.float64())),
}


@pytest.mark.parametrize("kind", NESTED_NAN)
def test_nan_inside_nested_columns_is_refused_in_jsonl(tmp_path, kind):
    pq.write_table(pa.table({"prompt_id": ["a", "a"], "reward": [1.0, 0.0], "nested": NESTED_NAN[kind]}), tmp_path / "in.parquet")
    out = tmp_path / "out.jsonl"
    refused(
        run_grpo("advantages", str(tmp_path / "in.parquet"), "-o", str(out), check=False),
        1,
        f"{out}: row 1: column 'nested' holds NaN or infinity, which JSON Lines cannot hold; write parquet instead",
    )
    assert leftovers(tmp_path) == []


# 5. rewards near the top of float64


HUGE = 1e200


def huge_rows(scale: float) -> list[dict]:
    rewards = ((1.0, [0.0, 0.5]), (-1.0, [0.25]), (3.0, [0.75, -1.0]))
    return [{"prompt_id": "a", "reward": r * scale, "old_logprobs": [-0.1] * len(v), "values": [x * scale for x in v]} for r, v in rewards]


@pytest.mark.parametrize(
    "args",
    [
        ["--estimator", "mean", "--whiten"],
        ["--estimator", "reinforce"],
        ["--estimator", "gae"],
        ["--estimator", "reinforce-baseline"],
        ["--estimator", "gpg", "--whiten"],
    ],
)
def test_huge_rewards_give_the_advantages_of_small_ones(tmp_path, args):
    """Advantages are invariant under scaling the rewards (and values), eps aside: 1e200 gives
    what 1 gives, with no numpy warning (the whitening's variance overflowed to inf)."""
    out = {}
    for name, scale in (("huge", HUGE), ("small", 1.0)):
        src = write_jsonl_rows(tmp_path / f"in.{name}.jsonl", huge_rows(scale))
        proc = run_grpo(
            "advantages",
            str(src),
            *args,
            "--whiten-eps",
            "0",
            "-o",
            str(tmp_path / f"{name}.jsonl"),
            "--summary-json",
            str(tmp_path / f"{name}.json"),
            "-q",
        )
        assert proc.stderr == b""
        out[name] = pl.read_ndjson(tmp_path / f"{name}.jsonl")
        out[f"{name} figures"] = strict_json((tmp_path / f"{name}.json").read_text())["advantage"]
    column = "advantage" if "advantage" in out["small"].columns else "token_advantage"
    small, huge = (out[k][column].explode().to_numpy() if column == "token_advantage" else out[k][column].to_numpy() for k in ("small", "huge"))
    assert np.abs(small).max() > 0.5
    np.testing.assert_allclose(huge, small, rtol=1e-12, atol=1e-15)
    for stat in ("mean", "std", "min", "max"):
        assert out["huge figures"][stat] == pytest.approx(out["small figures"][stat], rel=1e-12, abs=1e-15)


M = 1.7e308  # within a factor of 2 of float64's largest (1.798e308)


@pytest.mark.parametrize(
    "args, rows, expected",
    [
        # A = +-M: the whitening std sqrt(2) M is beyond float64 (every A' was 0)
        (["--estimator", "mean"], [{"prompt_id": "a", "reward": r} for r in (M, -M)], [0.7071067811865476, -0.7071067811865476]),
        # A = r - 0: mu = -M/2, so A - mu = 1.5 M is beyond float64 (A' was -inf)
        (["--estimator", "remax"], [{"prompt_id": "a", "reward": r, "reward_baseline": 0.0} for r in (M, -M, -M, -M)], [1.5, -0.5, -0.5, -0.5]),
        # per token: the same over the tokens of two rows
        (
            ["--estimator", "reinforce"],
            [{"reward": r, "old_logprobs": [-0.1]} for r in (M, -M)],
            [[0.7071067811865476], [-0.7071067811865476]],
        ),  # always whitens
    ],
)
def test_whitening_values_near_the_largest_float64_is_exact(tmp_path, args, rows, expected):
    src = write_jsonl_rows(tmp_path / "in.jsonl", rows)
    proc = run_grpo(
        "advantages",
        str(src),
        *args,
        *([] if "reinforce" in args else ["--whiten"]),
        "--whiten-eps",
        "0",
        "-o",
        str(tmp_path / "out.jsonl"),
        "--summary-json",
        str(tmp_path / "s.json"),
        "-q",
    )
    assert proc.stderr == b""
    column = "token_advantage" if "reinforce" in args else "advantage"
    flat = np.ravel(expected)
    assert np.ravel([row[column] for row in jsonl_rows(tmp_path / "out.jsonl")]).tolist() == pytest.approx(flat.tolist(), rel=1e-15)
    figures = strict_json((tmp_path / "s.json").read_text())["advantage"]
    assert [figures[k] for k in ("min", "max")] == pytest.approx([flat.min(), flat.max()], rel=1e-15)
    assert figures["mean"] == pytest.approx(0.0, abs=1e-15)


def test_group_std_of_huge_rewards_filters_right(tmp_path):
    """std of {1e200, -1e200, 3e200} is 1.63e200, not inf: the group is kept by std<1e300."""
    src = write_jsonl_rows(tmp_path / "in.jsonl", [{"prompt_id": "a", "reward": r * HUGE} for r in (1.0, -1.0, 3.0)])
    proc = run_grpo("filter", str(src), "--keep-if", "std<1e300", "-o", str(tmp_path / "out.jsonl"), "-q")
    assert proc.stderr == b""
    assert [row["reward"] for row in jsonl_rows(tmp_path / "out.jsonl")] == [1e200, -1e200, 3e200]


# 6. the objective's figures are finite; every numeric option is range-checked


def test_kl_of_a_far_log_ratio_is_taken_on_the_clamped_log_ratio(tmp_path):
    """new - old = -800: the ratio and k3 both use the log-ratio clamped to -20 (k3 = e^20 - 21)."""
    rows = [
        {"prompt_id": "a", "reward": 1, "logprobs": [-800.1, -0.1], "old_logprobs": [-0.1, -0.1]},
        {"prompt_id": "a", "reward": 0, "logprobs": [-0.2], "old_logprobs": [-0.1]},
    ]
    src = write_jsonl_rows(tmp_path / "in.jsonl", rows)
    proc = run_grpo("objective", str(src), "-o", str(tmp_path / "out.jsonl"), "--summary-json", str(tmp_path / "s.json"), "-q")
    assert proc.stderr == b""
    d = -0.2 - -0.1
    figures = strict_json((tmp_path / "s.json").read_text())
    assert figures["kl_old"] == pytest.approx((k3(-20.0) + 0.0 + k3(d)) / 3, rel=1e-12)
    assert figures["clamped_tokens"] == 1
    written = jsonl_rows(tmp_path / "out.jsonl")
    assert [row["kl_old"] for row in written] == pytest.approx([(k3(-20.0) + 0.0) / 2, k3(d)], rel=1e-12)


def test_kl_to_a_far_reference_is_finite(tmp_path):
    """new - ref = -800 with the default beta 0: the objective was NaN (0 * inf)."""
    rows = [
        {"prompt_id": "a", "reward": 1, "logprobs": [-800.1], "old_logprobs": [-800.1], "ref_logprobs": [-0.1]},
        {"prompt_id": "a", "reward": 0, "logprobs": [-0.2], "old_logprobs": [-0.2], "ref_logprobs": [-0.2]},
    ]
    src = write_jsonl_rows(tmp_path / "in.jsonl", rows)
    for beta, objective in (("0", 0.0), ("0.5", -0.5 * k3(-20.0) / 2)):
        proc = run_grpo("objective", str(src), "--beta", beta, "--summary-json", str(tmp_path / "s.json"), "-q")
        assert proc.stderr == b""
        figures = strict_json((tmp_path / "s.json").read_text())
        assert figures["kl_ref"] == pytest.approx(k3(-20.0) / 2, rel=1e-12)
        assert figures["objective"] == pytest.approx(objective, rel=1e-12)


def test_an_objective_beyond_float64_is_refused_naming_its_row(tmp_path):
    rows = [{"prompt_id": "a", "advantage": a, "logprobs": [-0.1, -0.1], "old_logprobs": [-0.2, -0.2]} for a in (1.0, 1e308)]
    src = write_jsonl_rows(tmp_path / "in.jsonl", rows)
    refused(
        run_grpo("objective", str(src), "-o", str(tmp_path / "out.jsonl"), check=False),
        1,
        f"{src}: row 1 (prompt id 'a'): its objective sum is beyond float64; rescale the advantages, or lower --logratio-clamp",
    )
    assert leftovers(tmp_path) == []


def test_the_api_objective_refuses_a_row_beyond_float64_as_the_cli_does():
    new, old = [[-0.1, -0.1], [-0.1, -0.1]], [[-0.2, -0.2], [-0.2, -0.2]]
    with pytest.raises(
        InputError,
        match=r"^log-probs: row 1: its objective sum is beyond float64; rescale the advantages, "
        r"or lower `logratio_clamp`$",
    ):
        policy_objective(new, old, advantage_values=[1.0, 1e308])
    with pytest.raises(InputError, match=r"^log-probs: row 0: column 'advantage_values' is null or NaN$"):  # it was "beyond float64"
        policy_objective(new, old, advantage_values=[float("nan"), 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        figures = policy_objective([[-0.1], [-0.1]], [[-0.2], [-0.2]], advantage_values=[1e308, 1e308], details=True)
    assert (figures["objective"], figures["loss"], figures["surrogate"]) == (None, None, None)


def test_a_summary_total_beyond_float64_is_null(tmp_path):
    """Each row's objective is finite, their sum is not: the figures that need it are null."""
    rows = [{"prompt_id": "a", "advantage": 1e308, "logprobs": [-0.1], "old_logprobs": [-0.2]} for _ in range(2)]
    src = write_jsonl_rows(tmp_path / "in.jsonl", rows)
    proc = run_grpo("objective", str(src), "--summary-json", str(tmp_path / "s.json"))
    assert "Warning" not in proc.stderr.decode()
    figures = strict_json((tmp_path / "s.json").read_text())
    assert (figures["objective"], figures["loss"], figures["surrogate"]) == (None, None, None)
    assert figures["ratio"]["mean"] == pytest.approx(math.exp(0.1), rel=1e-12)
    assert "objective           │ null" in proc.stderr.decode()


def test_mismatch_figures_beyond_float64_are_null(tmp_path):
    """With the clamp at its largest, a weight e^709 squared is beyond float64: the chi-square
    and effective sample size that need it are null (they were NaN: invalid JSON)."""
    rows = [
        {"prompt_id": "a", "old_logprobs": [-0.1, -0.1], "rollout_logprobs": [-800.0, -0.1]},
        {"prompt_id": "a", "old_logprobs": [-0.2], "rollout_logprobs": [-0.1]},
    ]
    src = write_jsonl_rows(tmp_path / "in.jsonl", rows)
    proc = run_grpo("mismatch", str(src), "--logratio-clamp", "709", "--json")
    assert proc.stderr == b""
    figures = strict_json(proc.stdout.decode())
    assert (figures["chi2_token"], figures["chi2_seq"], figures["ess_token"], figures["ess_seq"]) == (
        None,
        None,
        {"count": None, "share": None},
        {"count": None, "share": None},
    )
    lr = -0.2 - -0.1
    assert figures["kl_k3"] == pytest.approx((math.expm1(709.0) - 709.0 + math.expm1(lr) - lr) / 3, rel=1e-12)


OPTION_RANGES = [
    ("objective", ["--logratio-clamp", "inf"], "--logratio-clamp must be in (0, 709] (found inf)"),
    ("objective", ["--logratio-clamp", "710"], "--logratio-clamp must be in (0, 709] (found 710.0)"),
    ("objective", ["--beta", "inf"], "--beta must be >= 0 and finite (found inf)"),
    ("objective", ["--epsilon-high", "inf"], "--epsilon-high must be > 0 and finite (found inf)"),
    ("objective", ["--dual-clip", "inf"], "--dual-clip must be > 1 and finite (found inf)"),
    ("objective", ["--delta", "inf"], "--delta must be > 1 and finite (found inf)"),
    ("objective", ["--loss", "sapo", "--tau-pos", "inf"], "--tau-pos must be > 0 and finite (found inf)"),
    ("objective", ["--is", "token", "--is-cap", "inf"], "--is-cap must be > 0 and finite (found inf)"),
    ("advantages", ["--eps", "inf"], "--eps must be >= 0 and finite (found inf)"),
    ("advantages", ["--whiten", "--whiten-eps", "inf"], "--whiten-eps must be >= 0 and finite (found inf)"),
    ("advantages", ["--kl-in-reward", "inf"], "--kl-in-reward must be >= 0 and finite (found inf)"),
    ("mismatch", ["--is-cap", "inf"], "--is-cap must be > 0 and finite (found inf)"),
    ("mismatch", ["--logratio-clamp", "inf"], "--logratio-clamp must be in (0, 709] (found inf)"),
    ("filter", ["--overlong-buffer", "2", "--max-length", "4", "--overlong-factor", "inf"], "--overlong-factor must be >= 0 and finite (found inf)"),
]


@pytest.mark.parametrize("command, args, message", OPTION_RANGES, ids=[" ".join(a) for _, a, _ in OPTION_RANGES])
def test_numeric_options_are_range_checked(tmp_path, command, args, message):
    src = write_jsonl_rows(tmp_path / "in.jsonl", [{"prompt_id": "a", "reward": 1.0, "logprobs": [-0.1], "old_logprobs": [-0.2]}])
    refused(run_grpo(command, str(src), *args, "-o", str(tmp_path / "out.jsonl"), check=False), 2, message)
    assert leftovers(tmp_path) == []


# 7. deep nesting


def nested_line(depth: int, reward: int) -> str:
    """A row whose column ``x`` nests lists so that the row is ``depth`` levels deep (the row's
    own object is level 1)."""
    return f'{{"prompt_id": "a", "reward": {reward}, "x": {"[" * (depth - 1)}1{"]" * (depth - 1)}}}'


@pytest.mark.parametrize("depth", [65, 10_000, 20_000])
@pytest.mark.parametrize("output", [True, False])
def test_deep_nesting_is_refused_before_parsing(tmp_path, depth, output):
    (tmp_path / "in.jsonl").write_text(nested_line(3, 1) + "\n" + nested_line(depth, 0) + "\n")
    args = ["-o", str(tmp_path / "out.jsonl")] if output else []
    refused(
        run_grpo("advantages", str(tmp_path / "in.jsonl"), *args, check=False),
        1,
        f"{tmp_path / 'in.jsonl'}: line 2: nested deeper than 64 levels, the most JSON Lines input may nest",
    )
    assert leftovers(tmp_path) == []


def test_nesting_up_to_the_limit_and_brackets_in_strings_are_read(tmp_path):
    lines = [nested_line(64, 1), '{"prompt_id": "a", "reward": 0, "x": null, "text": "\\"' + "[{" * 5000 + '"}']
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    run_grpo("advantages", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out.jsonl"), "-q")
    written = jsonl_rows(tmp_path / "out.jsonl")
    assert written[1]["text"] == '"' + "[{" * 5000 and [row["advantage"] for row in written] == [1.0, -1.0]
    x = written[0]["x"]
    for _ in range(62):
        (x,) = x
    assert x == [1]


# 8. binary columns


def test_binary_columns_are_written_to_jsonl_as_base64(tmp_path):
    table = pa.table(
        {
            "prompt_id": ["a", "a"],
            "reward": [1.0, 0.0],
            "blob": pa.array([b"\x00\xff", None]),
            "large": pa.array([b"ab", b""], pa.large_binary()),
            "fixed": pa.array([b"ab", b"cd"], pa.binary(2)),
            "nested": pa.array([{"x": b"\x01", "y": [b"z"]}, {"x": None, "y": []}]),
            "by_key": pa.array([[("k", b"v")], []], pa.map_(pa.string(), pa.binary())),
        }
    )
    pq.write_table(table, tmp_path / "in.parquet")
    proc = run_grpo("advantages", str(tmp_path / "in.parquet"), "-o", str(tmp_path / "out.jsonl"), "-q")
    assert proc.stderr == b""
    assert jsonl_rows(tmp_path / "out.jsonl") == [
        {
            "prompt_id": "a",
            "reward": 1.0,
            "blob": "AP8=",
            "large": "YWI=",
            "fixed": "YWI=",
            "nested": {"x": "AQ==", "y": ["eg=="]},
            "by_key": {"k": "dg=="},
            "advantage": 1.0,
        },
        {
            "prompt_id": "a",
            "reward": 0.0,
            "blob": None,
            "large": "",
            "fixed": "Y2Q=",
            "nested": {"x": None, "y": []},
            "by_key": {},
            "advantage": -1.0,
        },
    ]


def test_every_type_parquet_holds_is_written_to_jsonl(tmp_path):
    """decimal256 panicked inside polars' JSON writer (a BaseException: a traceback), list views
    and UUIDs failed: decimals are their exact digits as text, as decimal128's already were
    (JSON readers parse numbers as float64); list views are lists; an extension type is its
    storage (a UUID its 16 bytes, as base64)."""
    uuid = pa.ExtensionArray.from_storage(pa.uuid(), pa.array([bytes(range(16)), None], pa.binary(16)))
    table = pa.table(
        {
            "prompt_id": ["a", "a"],
            "reward": [1.0, 0.0],
            "wide": pa.array([decimal.Decimal("1234567890123456789012345678901234567890.12"), None], pa.decimal256(50, 2)),
            "narrow": pa.array([decimal.Decimal("1.20"), decimal.Decimal("-0.05")], pa.decimal128(5, 2)),
            "view": pa.array([[1, 2], None], pa.list_view(pa.int64())),
            "large_view": pa.array([[0.5], []], pa.large_list_view(pa.float32())),
            "id": uuid,
            "nested": pa.array(
                [{"d": decimal.Decimal("3.5"), "v": [[7]]}, {"d": None, "v": [[]]}],
                pa.struct([("d", pa.decimal256(40, 1)), ("v", pa.list_(pa.list_view(pa.int64())))]),
            ),
        }
    )
    pq.write_table(table, tmp_path / "in.parquet")
    assert pq.read_schema(tmp_path / "in.parquet").equals(table.schema, check_metadata=False)
    proc = run_grpo("advantages", str(tmp_path / "in.parquet"), "-o", str(tmp_path / "out.jsonl"), "-q", check=False)
    assert (proc.returncode, proc.stderr) == (0, b"")
    assert jsonl_rows(tmp_path / "out.jsonl") == [
        {
            "prompt_id": "a",
            "reward": 1.0,
            "wide": "1234567890123456789012345678901234567890.12",
            "narrow": "1.20",
            "view": [1, 2],
            "large_view": [0.5],
            "id": "AAECAwQFBgcICQoLDA0ODw==",
            "nested": {"d": "3.5", "v": [[7]]},
            "advantage": 1.0,
        },
        {
            "prompt_id": "a",
            "reward": 0.0,
            "wide": None,
            "narrow": "-0.05",
            "view": None,
            "large_view": [],
            "id": None,
            "nested": {"d": None, "v": [[]]},
            "advantage": -1.0,
        },
    ]


def test_intervals_are_written_to_jsonl_as_their_three_fields(tmp_path):
    """month_day_nano panicked inside polars' JSON writer. No input holds one (parquet cannot:
    pyarrow refuses to write it), so the writer is given one directly."""
    values = pa.array([pa.MonthDayNano([1, -2, 3_000_000_000]), None, pa.MonthDayNano([0, 0, -1])], pa.month_day_nano_interval())
    batch = pa.record_batch({"head": values.slice(0, 2), "tail": values.slice(1), "nested": pa.array([[v] for v in values.slice(1).to_pylist()])})
    with Outputs() as outputs:
        sink = Sink(str(tmp_path / "out.jsonl"), "jsonl", batch.schema, outputs=outputs)
        sink.write(batch)
        outputs.commit()
    last = {"months": 0, "days": 0, "nanoseconds": -1}
    assert jsonl_rows(tmp_path / "out.jsonl") == [
        {"head": {"months": 1, "days": -2, "nanoseconds": 3_000_000_000}, "tail": None, "nested": [None]},
        {"head": None, "tail": last, "nested": [last]},
    ]


# 9. integer rewards and advantages beyond 2^53


@pytest.mark.parametrize("value, kind", [(2**53 + 1, pa.int64()), (2**63 - 1, pa.int64()), (2**64 - 1, pa.uint64()), (-(2**63), pa.int64())])
def test_integer_rewards_beyond_2_53_are_refused_naming_the_row(tmp_path, value, kind):
    pq.write_table(pa.table({"prompt_id": ["a", "b"], "reward": pa.array([0, value], kind)}), tmp_path / "in.parquet")
    refused(
        run_grpo("advantages", str(tmp_path / "in.parquet"), check=False),
        1,
        f"{tmp_path / 'in.parquet'}: row 1 (prompt id 'b'): column 'reward' holds the integer {value}, "
        "which float64 would round; rescale it to at most 2^53",
    )


def test_integer_rewards_and_advantages_beyond_2_53_in_jsonl_are_refused(tmp_path):
    src = write_jsonl_rows(
        tmp_path / "in.jsonl",
        [{"prompt_id": "a", "reward": 9007199254740993, "advantage": 9007199254740993, "logprobs": [-0.1], "old_logprobs": [-0.2]}],
    )
    for command, column in (("advantages", "reward"), ("objective", "advantage")):
        refused(
            run_grpo(command, str(src), check=False),
            1,
            f"{src}: row 0 (prompt id 'a'): column '{column}' holds the integer 9007199254740993, "
            "which float64 would round; rescale it to at most 2^53",
        )


def test_an_integer_reward_beyond_2_53_in_one_file_among_float_files_is_refused_naming_its_row(tmp_path):
    """The files' rewards unify to float64: the cast named the file, not the row."""
    pq.write_table(pa.table({"prompt_id": ["a", "a"], "reward": [1.0, 0.5]}), tmp_path / "in.0.parquet")
    pq.write_table(pa.table({"prompt_id": ["b", "c", "c"], "reward": pa.array([0, 2**53 + 1, 3], pa.int64())}), tmp_path / "in.1.parquet")
    for command in (["advantages"], ["filter", "--drop-zero-variance"]):
        refused(
            run_grpo(*command, str(tmp_path / "in.0.parquet"), str(tmp_path / "in.1.parquet"), check=False),
            1,
            f"{tmp_path / 'in.1.parquet'}: row 1 (prompt id 'c'): column 'reward' holds the integer {2**53 + 1}, "
            "which float64 would round; rescale it to at most 2^53",
        )


def test_a_passed_through_integer_beyond_2_53_among_float_files_is_refused_naming_its_row(tmp_path):
    """One output holds the column as float64: the written row is named, the one `grpo filter` keeps too."""
    pq.write_table(pa.table({"prompt_id": ["a", "a"], "reward": [1.0, 0.5], "seed": [0.5, 1.0]}), tmp_path / "in.0.parquet")
    pq.write_table(
        pa.table({"prompt_id": ["b", "b", "c", "c"], "reward": [1.0, 1.0, 0.0, 1.0], "seed": pa.array([1, 2, 3, 2**53 + 1])}),
        tmp_path / "in.1.parquet",
    )
    inputs = [str(tmp_path / "in.0.parquet"), str(tmp_path / "in.1.parquet")]
    for command in (["advantages"], ["filter", "--drop-zero-variance"]):
        refused(
            run_grpo(*command, *inputs, "-o", str(tmp_path / "out.parquet"), check=False),
            1,
            f"{tmp_path / 'in.1.parquet'}: row 3 (prompt id 'c'): column 'seed' holds the integer {2**53 + 1}, "
            "which float64 would round; rescale it to at most 2^53",
        )
        assert leftovers(tmp_path) == []


# 10. in-flight work: tests/test_parallel.py, test_ordered_map_holds_at_most_its_calls_in_flight_plus_one_items[1000]


# every guarantee at once, on random values


def date_like():
    return st.dates().map(lambda d: json.dumps(d.isoformat())) | st.datetimes().map(lambda d: json.dumps(str(d)))


def deep(depth: int) -> str:
    """A value that makes its row ``depth`` levels deep."""
    return "[" * (depth - 1) + "0" + "]" * (depth - 1)


VALUES = {  # each draws the raw JSON text of a pass-through value
    "integer": st.integers(-(2**65), 2**65).map(str),
    "number": st.one_of(st.integers(-(2**60), 2**60).map(str), st.floats().map(json.dumps)),
    "date-like": date_like(),
    "deep": st.integers(60, 70).map(deep),
    "nested": st.tuples(st.floats(), st.floats(-1e6, 1e6)).map(lambda f: json.dumps({"a": {"b": f[0]}, "c": [[f[1]]]})),
    "non-finite": st.sampled_from(["NaN", "Infinity", "-Infinity"]).map(lambda v: f'{{"a": {{"b": 0.5}}, "c": [[{v}]]}}'),
    "text": st.text(max_size=6).map(json.dumps),
}


@st.composite
def pass_through(draw) -> list[str]:
    """One column's values on six rows: mostly of one kind, sometimes one of another."""
    values = draw(st.lists(VALUES[draw(st.sampled_from(sorted(VALUES)))], min_size=6, max_size=6))
    if draw(st.booleans()):
        values[draw(st.integers(0, 5))] = draw(st.one_of(*VALUES.values()))
    return values


def same(a, b) -> bool:
    """Equal JSON values, ints and floats compared by exact value (1 == 1.0, 2^53 + 1 != 2^53)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return type(a) is type(b) and a == b or isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == b


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pass_through())
@example(values=['""'] * 5 + ['"\\u0085"'])  # written raw: a line separator only to str.splitlines
def test_random_values_round_trip_or_are_refused_in_one_line(tmp_path, values):
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [f'{{"prompt_id": {k // 3}, "reward": {k % 3}, "x": {v}}}' for k, v in enumerate(values)]
    src.write_text("\n".join(lines) + "\n")
    out.unlink(missing_ok=True)
    try:
        advantages_file(str(src), str(out))
    except GrpoError as exc:
        assert exc.exit_code in (1, 2) and "\n" not in str(exc) and str(exc).startswith((str(src), str(out)))
        assert leftovers(tmp_path) == []
        return
    written = jsonl_rows(out)
    assert [row["advantage"] for row in written] == [-1.224744871391589, 0.0, 1.224744871391589] * 2
    for line, row in zip(lines, written):
        assert same(row["x"], json.loads(line)["x"]), (line, row)
    assert leftovers(tmp_path) == ["out.jsonl"]
