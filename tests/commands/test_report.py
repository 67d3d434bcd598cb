"""`grpo report`: every figure's numbers are those `grpo inspect`, `compare`, `mismatch` and
`objective` compute on the same file (per step, on that step's rows), the sections follow the
columns, the page is self-contained and escaped, and a real browser renders it."""

import inspect
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from grpo_cli import advantages_file, compare_file, inspect_file, mismatch_file, objective_file, report_file
from grpo_cli.summaries import described, histogram

from ..conftest import SAMPLE, run_grpo

pytest.importorskip("matplotlib", reason="grpo report draws with matplotlib: pip install 'grpo-cli[report]'")

EVIL = "<script>alert('x')</script> & co"  # a prompt id the page must show as text


def steps_file(path, steps: int = 3, prompts: int = 4, k: int = 4, seed: int = 0) -> str:
    """Rollouts of ``steps`` training steps, ``prompts`` groups of ``k`` each, with new, old
    and rollout log-probs (the policy drifting more each step) and one group of equal rewards
    per step; one prompt id is HTML."""
    rng = np.random.default_rng(seed)
    rows = steps * prompts * k
    lengths = rng.integers(1, 40, rows)
    step = np.repeat(np.arange(1, steps + 1), prompts * k)
    reward = rng.integers(0, 2, rows).astype(float)
    reward[np.arange(rows) // k % prompts == 0] = 1.0  # the first group of each step: no signal
    group = np.arange(rows) // k % prompts
    ids = [EVIL if g == 1 else f"s{s}-p{g}" for s, g in zip(step, group)]
    ids = [f"{i} (step {s})" if i == EVIL and s > 1 else i for i, s in zip(ids, step)]

    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]), pa.int32())
    base = rng.normal(1.0, 0.5, lengths.sum())

    def lists(scale: np.ndarray) -> pa.Array:  # log-probs |base + noise| below 0, the noise of each row's scale
        return pa.ListArray.from_arrays(offsets, pa.array(-np.abs(base + rng.normal(0.0, 1.0, len(base)) * np.repeat(scale, lengths))))

    table = pa.table(
        {
            "step": step,
            "prompt_id": ids,
            "reward": reward,
            "old_logprobs": lists(np.zeros(rows)),
            "logprobs": lists(0.1 * step),
            "rollout_logprobs": lists(0.02 * step + (group == 1)),  # the HTML id's rows are the worst
        }
    )
    pq.write_table(table, path)
    return str(path)


@pytest.fixture(scope="module")
def stepped(tmp_path_factory):
    return steps_file(tmp_path_factory.mktemp("report") / "steps.parquet")


@pytest.fixture(scope="module")
def reported(stepped):
    """The report of the stepped file (its step column is the batch column, as for every command) and its page."""
    page = Path(stepped).with_name("r.html")
    return report_file(stepped, output=str(page), estimators="grpo,rloo,mean"), page.read_text()


def test_every_section_is_the_commands_figures(stepped, reported):
    r, page = reported
    assert r["sections"] == ["file", "rewards", "advantages", "lengths", "mismatch", "objective"]
    assert r["inspect"] == inspect_file(stepped)
    assert r["compare"] == compare_file(stepped, estimators="grpo,rloo,mean")
    assert r["mismatch"] == mismatch_file(stepped)
    assert r["objective"] == objective_file(stepped, rollout_logprobs_col="none")  # the sampler's figures: the mismatch section's
    assert all(f'<section id="{s}">' in page for s in r["sections"])


def test_figures_do_not_depend_on_batch_size_or_threads(stepped, reported, tmp_path):
    cut = report_file(stepped, output=str(tmp_path / "b.html"), estimators="grpo,rloo,mean", batch_rows=5, threads=1)
    assert {**cut, "page": None} == {**reported[0], "page": None}
    assert (tmp_path / "b.html").read_text() == reported[1]


def test_figures_drawn_in_processes_or_here_make_the_same_page(stepped, reported, tmp_path, monkeypatch):
    """Several workers draw in forked processes (on Linux); where no process can start, the
    figures are drawn here, one after another: the page is the same."""
    from concurrent.futures.process import BrokenProcessPool

    from grpo_cli import html_report

    if sys.platform == "linux":
        drawn = []
        monkeypatch.setattr(html_report, "ProcessPoolExecutor", lambda workers, **_: drawn.append(workers) or pytest.fail("no pool"))
        with pytest.raises(pytest.fail.Exception):
            report_file(stepped, output=str(tmp_path / "p.html"), estimators="grpo,rloo,mean", threads=3)
        assert drawn == [3]  # a pool of as many processes as threads (fewer than the figures)

    def broken(*_, **__):
        raise BrokenProcessPool("a worker died")

    monkeypatch.setattr(html_report, "ProcessPoolExecutor", broken)
    report_file(stepped, output=str(tmp_path / "here.html"), estimators="grpo,rloo,mean", threads=4)
    assert (tmp_path / "here.html").read_text() == reported[1]


def test_per_step_figures_are_the_commands_on_each_steps_rows(stepped, reported, tmp_path):
    """The step column is the batch column (`--by step`): each batch's rewards are `grpo
    advantages`'s figures of that batch, its clip fraction `grpo objective`'s on its rows."""
    r = reported[0]
    by, clip = r["by"], r["clip_frac_by"]
    assert by["column"] == clip["column"] == "step" and clip["batches"] == [b["batch"] for b in by["batches"]] == [1, 2, 3]
    quantiles = [b["reward_quantiles"] for b in by["batches"]]
    assert [{k: v for k, v in b.items() if k != "reward_quantiles"} for b in by["batches"]] == [
        {k: v for k, v in b.items() if k != "advantage"} for b in advantages_file(stepped)["by"]["batches"]
    ]
    table = pq.read_table(stepped)
    for n, step in enumerate(clip["batches"]):
        rows = table.filter(pc.equal(table["step"], step))
        assert list(quantiles[n].values()) == np.quantile(rows["reward"].to_numpy(), [0.1, 0.25, 0.5, 0.75, 0.9], method="inverted_cdf").tolist()
        pq.write_table(rows, part := str(tmp_path / f"step{step}.parquet"))
        o = objective_file(part)
        assert clip["tokens"][n] == o["tokens"] and {name: shares[n] for name, shares in clip["clip_frac"].items()} == o["clip_frac"]
    assert by["batches"][0]["zero_variance_groups"]["share"] == 0.25  # one group of four without signal in each step


def test_histograms_are_those_of_the_commands_columns(stepped, reported, tmp_path):
    r = reported[0]
    compare_file(stepped, str(tmp_path / "c.parquet"), estimators="grpo,rloo")
    objective_file(stepped, str(tmp_path / "o.parquet"))
    written = pq.read_table(tmp_path / "c.parquet")
    for label in ("grpo", "rloo"):
        assert r["advantage_histograms"][label] == histogram(*described(written[f"advantage_{label}"].to_numpy(), histogram=True))
    assert r["ratio_histogram"] == histogram(*described(pq.read_table(tmp_path / "o.parquet")["ratio_mean"].to_numpy(), histogram=True))
    assert sum(b["rows"] for b in r["reward_by_length"]) == r["inspect"]["rows"]


def test_sections_follow_the_columns(tmp_path):
    path = tmp_path / "rewards.parquet"
    pq.write_table(pa.table({"prompt_id": ["a", "a", "b", "b"], "reward": [1.0, 0.0, 0.5, 0.5]}), path)
    r = report_file(str(path), output=str(tmp_path / "r.html"))
    assert r["sections"] == ["file", "rewards", "advantages"]
    assert "mismatch" not in r and "objective" not in r
    r = report_file(str(SAMPLE / "rollouts.parquet"), str(tmp_path / "s.html"))  # the page is the second positional, as other commands' output
    assert r["sections"] == ["file", "rewards", "advantages", "lengths", "objective"]
    assert list(inspect.signature(report_file).parameters)[:2] == ["input", "output"]


def test_the_page_is_self_contained_and_escaped(reported):
    page = reported[1]
    assert not re.search(r"(src|href)=\"(?!data:|#)", page) and "<link" not in page and "<script" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; co" in page  # a worst row, named by its prompt id
    assert re.findall(r'src="data:image/(svg\+xml|png);base64,', page) and "data:image/png" not in page


def test_more_than_5000_points_are_drawn_as_png(tmp_path):
    path = tmp_path / "many.parquet"
    rows = 5002
    pq.write_table(pa.table({"reward": np.arange(rows) % 2 * 1.0, "logprobs": [[-1.0] * (1 + i % 3) for i in range(rows)]}), path)
    report_file(str(path), output=str(tmp_path / "r.html"), num_generations=2)
    assert page_images(tmp_path / "r.html").count("png") == 1  # the reward against length scatter


def page_images(path) -> list[str]:
    return re.findall(r'src="data:image/(svg\+xml|png);base64,', path.read_text())


def test_the_cli_writes_the_page_and_the_summary_json(stepped, tmp_path):
    out, summary = tmp_path / "r.html", tmp_path / "r.json"
    ran = run_grpo("report", stepped, "--by", "step", "-o", str(out), "--summary-json", str(summary))
    assert ran.stderr.decode().strip() == f"grpo report: {out} (file, rewards, advantages, lengths, mismatch, objective)"
    figures = json.loads(summary.read_text())
    assert figures["page"] == str(out) and figures["by"]["column"] == "step" and out.read_text().startswith("<!DOCTYPE html>")


def test_without_matplotlib_it_says_which_extra_to_install(stepped, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    ran = run_grpo("report", stepped, "-o", str(tmp_path / "r.html"), check=False)
    assert ran.returncode == 1 and not (tmp_path / "r.html").exists()
    assert ran.stderr.decode() == "Error: `grpo report` draws its figures with matplotlib, which is not installed: pip install 'grpo-cli[report]'\n"


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "Error: `grpo report` writes one HTML page; pass --output (-o report.html)"),
        (["--estimators", "grpo", "-o", "r.html"], "Error: --estimators needs two or more to compare (found 'grpo')"),
    ],
)
def test_errors(stepped, tmp_path, args, message):
    ran = run_grpo("report", stepped, *[str(tmp_path / a) if a == "r.html" else a for a in args], check=False)
    assert ran.returncode != 0 and ran.stderr.decode().strip() == message


@pytest.mark.parametrize("option", [["--by", "x"], ["--by-file"], ["--estimators", "grpo,rloo"]])
def test_an_option_the_input_cannot_use_is_refused(tmp_path, option):
    path = tmp_path / "x.parquet"
    pq.write_table(pa.table({"x": [1, 2], "logprobs": [[-1.0], [-2.0]]}), path)
    ran = run_grpo("report", str(path), *option, "-o", str(tmp_path / "r.html"), check=False)
    flag = option[0]
    assert ran.returncode == 2
    assert ran.stderr.decode() == f"Error: {flag} applies to the rewards, and the input has no reward column; pass --reward-col, or drop {flag}\n"


CHROMIUM = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)), None)
PROBE = """<script>
window.onerror = (m) => { document.title = "error: " + m; };
addEventListener("load", () => {
  const images = [...document.images];
  document.body.insertAdjacentHTML("beforeend", "<pre id=probe>" + JSON.stringify({
    overflow: document.documentElement.scrollWidth - innerWidth,
    sections: [...document.querySelectorAll("section")].map(s => s.id),
    images: images.length,
    broken: images.filter(i => !i.complete || i.naturalWidth === 0).length,
    title: document.title,
  }) + "</pre>");
});
</script>"""


def chromium(*args: str) -> subprocess.CompletedProcess:
    assert CHROMIUM is not None
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=5000"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, timeout=120)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no headless browser installed (Debian: apt-get install chromium)")
@pytest.mark.parametrize("width", [1280, 390])
def test_a_browser_renders_every_section(stepped, tmp_path, width):
    """Chromium opens the page at 1280 and 390 px: no script error, every section and image
    there, nothing wider than the window, and a screenshot that is not blank."""
    out = tmp_path / "r.html"
    figures = report_file(stepped, output=str(out))
    probed = tmp_path / "probed.html"
    probed.write_text(out.read_text().replace("</head>", PROBE + "</head>"))
    dom = chromium(f"--window-size={width},900", "--dump-dom", probe_url := probed.as_uri()).stdout.decode()
    found = json.loads(re.search(r'<pre id="probe">(.*?)</pre>', dom, flags=re.S).group(1))
    assert found["title"].startswith("grpo report"), (probe_url, found)
    assert found["sections"] == figures["sections"] == ["file", "rewards", "advantages", "lengths", "mismatch", "objective"]
    assert found["images"] == len(page_images(out)) and found["broken"] == 0
    assert found["overflow"] <= 0, f"the page is {found['overflow']} px wider than a {width} px window"
    shot = tmp_path / f"shot{width}.png"
    chromium(f"--window-size={width},2400", f"--screenshot={shot}", out.as_uri())
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[1] == width and pixels[..., :3].std() > 0.05, "the screenshot is blank"


def test_batch_names_are_plain_text_and_the_callers_matplotlib_is_left_alone(tmp_path):
    import matplotlib

    path = tmp_path / "dollars.parquet"
    steps = [s for s in ["$a", "b$$", "<d>"] for _ in range(4)]
    pq.write_table(pa.table({"step": steps, "prompt_id": [f"p{i // 2}" for i in range(12)], "reward": [0.0, 1.0] * 6}), path)
    before = (matplotlib.get_backend(), dict(matplotlib.rcParams))
    r = report_file(str(path), output=str(tmp_path / "r.html"))
    assert [b["batch"] for b in r["by"]["batches"]] == ["$a", "b$$", "<d>"]  # no mathtext error on the ticks
    assert "<td>&lt;d&gt;</td>" in (tmp_path / "r.html").read_text()
    assert (matplotlib.get_backend(), dict(matplotlib.rcParams)) == before
