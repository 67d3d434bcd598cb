"""`grpo compare`: a hand-built case with a sign flip, the spec syntax, the written columns."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_cli import compare_file
from grpo_cli.compare import parse_estimators, spearman
from grpo_cli.errors import GrpoError, UsageError

from ..conftest import run_grpo


@pytest.fixture
def rollouts(tmp_path):
    # one group, rewards 0, 1, 0.4 with 8, 1, 1 valid tokens: the mean baseline is 1.4/3 = 0.4667,
    # opo's length-weighted one (0*8 + 1 + 0.4) / 10 = 0.14, so the third row flips sign
    path = tmp_path / "r.parquet"
    pq.write_table(pa.table({"prompt_id": ["p"] * 3, "reward": [0.0, 1.0, 0.4], "response_mask": [[1] * 8, [1], [1]]}), path)
    return path


def test_sign_flips_rank_correlation_and_most_affected_groups(rollouts, tmp_path):
    out = tmp_path / "o.parquet"
    f = compare_file(str(rollouts), str(out), estimators="mean,opo")
    assert f["sign_flips"] == {"mean / opo": pytest.approx(1 / 3)}
    assert f["rank_correlation"] == {"mean / opo": pytest.approx(1.0)}
    assert f["most_affected_groups"] == [{"group": "p", "rows": 3, "max_abs_difference": pytest.approx(1.4 / 3 - 0.14)}]
    written = pq.read_table(out)
    np.testing.assert_allclose(written["advantage_mean"].to_pylist(), [-1.4 / 3, 1 - 1.4 / 3, 0.4 - 1.4 / 3])
    np.testing.assert_allclose(written["advantage_opo"].to_pylist(), [-0.14, 0.86, 0.26])
    assert f["estimators"]["opo"]["max"] == pytest.approx(0.86) and f["config"]["opo"]["estimator"] == "opo"


def test_spec_syntax_and_errors():
    specs = parse_estimators("grpo:std=sample,eps=1e-6,scale=batch,verl")
    assert [label for label, _ in specs] == ["grpo:std=sample,eps=1e-6,scale=batch", "verl"]
    assert specs[0][1].scale == "batch"
    assert specs[0][1].eps == 1e-6 and specs[1][1].eps == 1e-6 and specs[1][1].std == "sample"
    assert spearman(np.array([1.0, 1.0]), np.array([0.0, 1.0])) is None
    for text, words in (
        ("grpo", "two or more"),
        ("grpo,grpo", "names one twice"),
        ("eps=1,grpo", "starts with an option"),
        ("grpo,gae", "one per token"),
        ("grpo:bogus=1,rloo", "bogus"),
    ):
        with pytest.raises(Exception, match=words):
            parse_estimators(text)
    with pytest.raises(UsageError):
        parse_estimators("grpo,,rloo")


def test_spec_values_are_parsed_as_their_options_take_them():
    """Several numbers are separated by spaces (a comma starts the next part); a value an
    option cannot take is one line naming the estimator and the option, never an internal error."""
    specs = dict(parse_estimators("grpo:reward_weights=1 0.5,reward_clip=-1 1,whiten=true,rloo:reward_weights=2"))
    assert specs["grpo:reward_weights=1 0.5,reward_clip=-1 1,whiten=true"].reward_weights == (1.0, 0.5)
    assert specs["grpo:reward_weights=1 0.5,reward_clip=-1 1,whiten=true"].reward_clip == (-1.0, 1.0)
    assert specs["rloo:reward_weights=2"].reward_weights == (2.0,)
    for text, message in (
        ("grpo:eps=abc,rloo", "estimator 'grpo': `eps` takes a number (found 'abc')"),
        ("grpo:whiten=yes,rloo", "estimator 'grpo': `whiten` takes true or false (found 'yes')"),
        ("grpo:reward_clip=1,rloo", "`reward_clip` takes LO,HI (two numbers; found '1')"),
        ("grpo:estimator=rloo,rloo", "estimator 'grpo': `estimator` is its name in `estimators`; drop `estimator=rloo`"),
        ("grpo:bogus=1,rloo", "estimator 'grpo' has no option `bogus`"),
    ):
        with pytest.raises(UsageError) as raised:
            parse_estimators(text)
        assert str(raised.value).startswith(message), text


def test_cli_json_and_columns(sample_parquet, tmp_path):
    proc = run_grpo("compare", str(sample_parquet), "--estimators", "grpo,rloo:std=sample", "--json", "--top", "2")
    figures = json.loads(proc.stdout)
    assert list(figures["estimators"]) == ["grpo", "rloo:std=sample"] and len(figures["most_affected_groups"]) == 2
    assert proc.stderr.decode() == ""
    out = tmp_path / "c.parquet"
    run_grpo("compare", str(sample_parquet), "--estimators", "grpo,mean", "-o", str(out), "-q")
    names = pq.read_table(out).schema.names
    assert names[-2:] == ["advantage_grpo", "advantage_mean"]
    proc = run_grpo("compare", str(sample_parquet), "--estimators", "grpo", check=False)
    assert proc.returncode == 2 and "two or more" in proc.stderr.decode()


def test_a_trainers_own_advantage_column_is_compared_as_an_estimator(tmp_path):
    """TRL logs its advantages: `column:advantage` sets them beside this tool's, in one command."""
    path = tmp_path / "trl.parquet"
    # TRL's GRPO: (r - mean) / (sample std + 1e-4); group 0 [1, 0]: std 0.7071, group 1 [1, 0.5]: std 0.3536
    logged = [0.5 / (0.5**0.5 + 1e-4), -0.5 / (0.5**0.5 + 1e-4), 0.25 / (0.125**0.5 + 1e-4), -0.25 / (0.125**0.5 + 1e-4)]
    pq.write_table(pa.table({"prompt_id": [0, 0, 1, 1], "reward": [1.0, 0.0, 1.0, 0.5], "advantage": logged}), path)
    f = compare_file(str(path), str(tmp_path / "o.parquet"), estimators="column:advantage,trl")
    assert f["config"]["column:advantage"] == {"column": "advantage"}
    assert f["rank_correlation"] == {"column:advantage / trl": pytest.approx(1.0)} and f["sign_flips"] == {"column:advantage / trl": 0.0}
    written = pq.read_table(tmp_path / "o.parquet")
    np.testing.assert_allclose(written["advantage_trl"].to_numpy(), logged, rtol=1e-12)
    assert written["advantage_column_advantage"].to_pylist() == logged
    for text, message in (("column:nope,grpo", "no column 'nope' for advantage"), ("column:x=1,grpo", "column:NAME")):
        with pytest.raises(GrpoError, match=message):
            compare_file(str(path), estimators=text)
