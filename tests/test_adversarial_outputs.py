"""Adversarial cases on inputs and outputs (issue 18): each was a break before its fix."""

import errno
import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from grpo_cli import advantages_file, io
from grpo_cli.errors import Interrupted, OutputError, UsageError
from grpo_cli.io.formats import jsonl

from .conftest import SAMPLE, grpo_executable, run_grpo, write_jsonl_rows

PARQUET = SAMPLE / "rollouts.parquet"
JSONL = SAMPLE / "rollouts.jsonl"


def digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def refused(proc, code: int, message: str) -> None:
    """Exit ``code`` and exactly the one line ``Error: message``."""
    assert (proc.returncode, proc.stderr.decode()) == (code, f"Error: {message}\n")


def expected_output(tmp_path, *args: str) -> bytes:
    """What `grpo advantages` writes for ``args`` to a plain file."""
    out = tmp_path / "expected" / "o.parquet"
    out.parent.mkdir(exist_ok=True)
    run_grpo("advantages", *args, "-o", str(out), "-q")
    return out.read_bytes()


def leftovers(folder) -> list[str]:
    """Temporary files and spools left anywhere below ``folder``."""
    return sorted(p.name for p in Path(folder).rglob("*") if p.name.endswith(".tmp") or p.name.startswith("grpo-"))


# 1. Every path a run writes is checked against every input and against the others first.


@pytest.mark.parametrize("via", ["path", "symlink", "hard link"])
def test_summary_json_that_is_an_input_is_refused(tmp_path, via):
    src = tmp_path / "r.parquet"
    shutil.copy(PARQUET, src)
    named = {"path": src, "symlink": tmp_path / "link.json", "hard link": tmp_path / "hard.json"}[via]
    if via == "symlink":
        named.symlink_to(src)
    elif via == "hard link":
        os.link(src, named)
    before = digest(src)
    proc = run_grpo("objective", str(src), "--summary-json", str(named), "-q", check=False)
    refused(proc, 2, f"--summary-json {str(named)!r} is an input file; choose another path")
    assert digest(src) == before and not leftovers(tmp_path)


@pytest.mark.parametrize("via", ["path", "symlink"])
def test_summary_json_that_is_the_output_is_refused(tmp_path, via):
    out = tmp_path / "o.parquet"
    summary = out if via == "path" else tmp_path / "s.json"
    if via == "symlink":
        summary.symlink_to(out)  # dangling: neither exists yet
    proc = run_grpo("objective", str(PARQUET), "-o", str(out), "--summary-json", str(summary), "-q", check=False)
    refused(proc, 2, f"output {str(out)!r} and --summary-json {str(summary)!r} are one file; write them to different paths")
    assert not out.exists() and not leftovers(tmp_path)


def test_summary_json_that_is_a_file_of_output_dir_is_refused(steps, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    proc = run_grpo("advantages", str(steps), "--output-dir", str(out), "--summary-json", str(out / "step_2.parquet"), check=False)
    refused(
        proc,
        2,
        f"output {str(out / 'step_2.parquet')!r} and --summary-json {str(out / 'step_2.parquet')!r} are one file; write them to different paths",
    )
    assert list(out.iterdir()) == []


def test_summary_json_inside_a_folder_input_is_refused(steps):
    proc = run_grpo("advantages", str(steps), "--summary-json", str(steps / "s.json"), check=False)
    refused(
        proc,
        2,
        f"--summary-json {str(steps / 's.json')!r} is inside input folder {str(steps)!r}, whose sub-folders are "
        "read too: a later run would read it as input; write it outside",
    )
    assert sorted(p.name for p in steps.iterdir()) == [f"step_{k}.parquet" for k in range(4)]


def test_summary_json_that_is_a_uri_or_a_folder_is_refused(tmp_path):
    proc = run_grpo("advantages", str(PARQUET), "--summary-json", "s3://bucket/s.json", check=False)
    refused(proc, 2, "--summary-json is a URI; outputs are written to local paths (inputs may be URIs)")
    proc = run_grpo("advantages", str(PARQUET), "--summary-json", str(tmp_path), check=False)
    refused(proc, 2, f"--summary-json {str(tmp_path)!r} is a directory")


def test_the_file_api_writes_and_checks_the_summary_json(tmp_path):
    src = tmp_path / "r.parquet"
    shutil.copy(PARQUET, src)
    figures = advantages_file(str(src), str(tmp_path / "o.parquet"), summary_json=str(tmp_path / "s.json"))
    assert json.loads((tmp_path / "s.json").read_text()) == json.loads(json.dumps(figures))
    with pytest.raises(UsageError, match=r"^`summary_json` '.*r\.parquet' is an input file; choose another path$"):
        advantages_file(str(src), summary_json=str(src))
    with pytest.raises(UsageError, match=r"^the rows and the summary JSON cannot both go to stdout"):
        advantages_file(str(src), "-", summary_json="-")


# 2. A device or FIFO given as -o is written through, never replaced.


def test_output_to_a_fifo_is_written_through(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    proc = run_grpo("advantages", str(PARQUET), "-o", str(fifo), "--output-format", "parquet", "-q", check=False)
    reader.join(10)
    assert proc.returncode == 0, proc.stderr.decode()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a regular file"
    assert received == [expected_output(tmp_path, str(PARQUET))]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["expected", "pipe"]


def device_twin(folder: Path, real: str) -> Path:
    """A private twin of the device ``real`` (same major and minor) in ``folder``, so that a
    regression that replaces its target replaces only the twin. Skips where mknod is refused."""
    twin = folder / Path(real).name
    try:
        os.mknod(twin, 0o666 | stat.S_IFCHR, os.stat(real).st_rdev)
    except PermissionError:
        pytest.skip("mknod is not permitted here")
    return twin


def test_output_to_a_character_device_is_written_through(tmp_path):
    """The twin of /dev/null first: only if it survives is the real /dev/null written to."""
    twin = device_twin(tmp_path, "/dev/null")
    run_grpo("advantages", str(PARQUET), "-o", str(twin), "--output-format", "parquet", "-q")
    assert stat.S_ISCHR(os.lstat(twin).st_mode), "the device was replaced by a regular file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]
    run_grpo("advantages", str(PARQUET), "-o", "/dev/null", "--output-format", "parquet", "-q")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_rows_and_summary_json_may_both_go_to_one_character_device(tmp_path):
    """`-o /dev/null --summary-json /dev/null` destroys nothing: each is written through (a
    regular file named twice is still refused, above). The twin of /dev/null first."""
    twin = device_twin(tmp_path, "/dev/null")
    for device in (str(twin), "/dev/null"):
        proc = run_grpo("advantages", str(PARQUET), "-o", device, "--output-format", "parquet", "--summary-json", device, check=False)
        assert proc.returncode == 0 and proc.stdout == b"", proc.stderr.decode()
        assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]


# 3. All outputs are prepared first and committed together, each atomically.


def test_summary_json_in_a_missing_folder_is_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "o.parquet"
    proc = run_grpo("advantages", str(PARQUET), "-o", str(out), "--summary-json", str(tmp_path / "missing" / "s.json"), check=False)
    refused(proc, 2, f"--summary-json folder {str(tmp_path / 'missing')!r} does not exist")
    assert list(tmp_path.iterdir()) == []


def test_a_summary_json_that_cannot_be_written_leaves_no_output(tmp_path):
    full = device_twin(tmp_path, "/dev/full")
    out = tmp_path / "o.parquet"
    proc = run_grpo("advantages", str(PARQUET), "-o", str(out), "--summary-json", str(full), check=False)
    refused(proc, 1, f"{full}: cannot write (No space left on device); nothing was written")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full"]


def test_an_output_that_cannot_be_written_leaves_no_summary_json(tmp_path):
    full = device_twin(tmp_path, "/dev/full")
    proc = run_grpo(
        "advantages", str(PARQUET), "-o", str(full), "--output-format", "parquet", "--summary-json", str(tmp_path / "s.json"), check=False
    )
    refused(proc, 1, f"{full}: cannot write (No space left on device); nothing was written")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full"]
    assert stat.S_ISCHR(os.lstat(full).st_mode)


def test_a_full_disk_while_writing_the_summary_json_leaves_nothing(tmp_path, monkeypatch):
    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(OutputError, match=r"s\.json: cannot write \(No space left on device\); nothing was written$"):
        advantages_file(str(PARQUET), str(tmp_path / "o.parquet"), summary_json=str(tmp_path / "s.json"))
    assert list(tmp_path.iterdir()) == []


# 4. An interrupt says what is true; none leaves a temporary file.


@pytest.mark.slow  # a process per case, signalled
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_interrupt_while_copying_to_stdout_says_the_output_is_incomplete(tmp_path, sig, code):
    spool = tmp_path / "tmp"
    spool.mkdir()
    proc = subprocess.Popen(
        [grpo_executable(), "advantages", str(JSONL), "-o", "-", "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(spool)},
    )
    first = os.read(proc.stdout.fileno(), 4096)  # rows arrive only once the copy has begun
    assert first.startswith(b"{")
    proc.send_signal(sig)  # the copy is blocked on the full pipe: 700 KB do not fit in it
    rest, err = proc.communicate(timeout=60)
    assert (proc.returncode, err.decode()) == (
        code,
        f"Error: interrupted by {signal.Signals(sig).name} while copying to stdout; the output is incomplete\n",
    )
    assert 0 < len(first + rest) < JSONL.stat().st_size
    assert list(spool.iterdir()) == []


def test_interrupt_just_after_the_temporary_file_is_made_leaves_nothing(tmp_path, monkeypatch):
    """The window between creating the temporary file and recording its name: a signal there
    used to leave the file behind."""
    real_open = os.open

    def open_then_interrupted(path, flags, *args, **kwargs):
        fd = real_open(path, flags, *args, **kwargs)
        if str(path).endswith(".tmp"):
            os.close(fd)
            raise Interrupted("SIGINT", 130)
        return fd

    monkeypatch.setattr(os, "open", open_then_interrupted)
    with pytest.raises(Interrupted, match="^interrupted by SIGINT; no output written$"):
        advantages_file(str(PARQUET), str(tmp_path / "o.parquet"))
    assert list(tmp_path.iterdir()) == []


# 5. -o through a symlink: the temporary file goes beside the file it points to.


@pytest.fixture
def other_filesystem(tmp_path):
    if not os.path.isdir("/dev/shm") or os.stat("/dev/shm").st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs /dev/shm on another filesystem than the tests' temporary folder")
    folder = Path(tempfile.mkdtemp(dir="/dev/shm", prefix="grpo-test-"))
    yield folder
    shutil.rmtree(folder)


@pytest.mark.parametrize("exists", [True, False])
def test_output_through_a_symlink_to_another_filesystem(tmp_path, other_filesystem, exists):
    target = other_filesystem / "o.parquet"
    if exists:
        target.write_bytes(b"old")
    link = tmp_path / "link.parquet"
    link.symlink_to(target)
    run_grpo("advantages", str(PARQUET), "-o", str(link), "-q")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == expected_output(tmp_path, str(PARQUET))
    assert sorted(p.name for p in other_filesystem.iterdir()) == ["o.parquet"]


# 6. Every file of several inputs must have rows.


def test_an_empty_parquet_file_among_several_is_refused(steps):
    empty = steps / "step_9.parquet"
    pq.write_table(pq.read_table(steps / "step_0.parquet").slice(0, 0), empty)
    proc = run_grpo("advantages", str(steps), check=False)
    refused(proc, 1, f"{empty}: no rows")


def test_a_whitespace_only_json_lines_file_among_several_is_refused(tmp_path):
    a = write_jsonl_rows(tmp_path / "a.jsonl", [{"prompt_id": "p", "reward": 1.0}, {"prompt_id": "p", "reward": 0.0}])
    blank = tmp_path / "b.jsonl"
    blank.write_text(" \n\t\n\n")
    proc = run_grpo("advantages", str(a), str(blank), check=False)
    refused(proc, 1, f"{blank}: no rows")


# 7. Pipes and FIFOs as inputs are spooled, as stdin is.


def test_a_named_fifo_input_is_read(tmp_path):
    fifo = tmp_path / "rollouts"
    os.mkfifo(fifo)

    def feed():
        try:
            with open(fifo, "wb") as f:
                f.write(PARQUET.read_bytes())
        except BrokenPipeError:
            pass

    threading.Thread(target=feed, daemon=True).start()
    out = tmp_path / "o.parquet"
    proc = run_grpo("advantages", str(fifo), "-o", str(out), "-q", check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    assert out.read_bytes() == expected_output(tmp_path, str(PARQUET))


@pytest.mark.slow  # a shell and a process per case
@pytest.mark.parametrize("sample", [PARQUET, JSONL])
def test_process_substitution_input_is_read(tmp_path, sample):
    out = tmp_path / "o.parquet"
    shell = f"'{grpo_executable()}' advantages <(cat '{sample}') -o '{out}' -q"
    proc = subprocess.run(["bash", "-c", shell], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    assert out.read_bytes() == expected_output(tmp_path, str(sample))


def test_an_empty_pipe_is_refused(tmp_path):
    proc = subprocess.run(["bash", "-c", f"'{grpo_executable()}' advantages <(true)"], capture_output=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr.decode().endswith(": empty input\n"), proc.stderr.decode()


# 8. A closed stdin or stdout is named as such.


def closed(shell: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f"'{grpo_executable()}' {shell}"], capture_output=True, timeout=120)


def test_closed_stdin_is_one_clear_line():
    refused(closed("advantages - <&-"), 1, "<stdin>: not open (stdin is closed); pipe the rollouts in, or name the file")


@pytest.mark.parametrize(
    "args", [f"advantages '{JSONL}' -o - >&-", f"advantages '{PARQUET}' --summary-json - -q >&-", f"inspect '{PARQUET}' --json >&-"]
)
def test_closed_stdout_is_one_clear_line(args):
    refused(closed(args), 1, "<stdout>: not open (stdout is closed); redirect it, or write to a file")


@pytest.mark.slow  # twelve processes
@pytest.mark.parametrize("args", ["presets", "--version", "--help", "presets --preset verl"])
def test_what_only_prints_to_stdout_says_when_it_cannot(args):
    """`grpo presets`, `--version`, `--help` (issue 43, class 14): a full disk and a closed
    stdout are one line and exit 1 (never a traceback, never a silent 0); a reader that leaves
    (`| head`) ends the run quietly with 141, as the data commands do."""
    refused(closed(f"{args} > /dev/full"), 1, "<stdout>: cannot write (No space left on device)")
    refused(closed(f"{args} >&-"), 1, "<stdout>: cannot write (stdout is closed)")
    proc = subprocess.run(["bash", "-c", f"'{grpo_executable()}' {args} | (exec 0<&-); echo ${{PIPESTATUS[0]}}"], capture_output=True, timeout=120)
    assert proc.stdout.decode().strip() in ("0", "141") and proc.stderr == b""


# 9. Written paths are checked as soon as the inputs are listed, before any is read.


def never_read(*args, **kwargs):
    raise AssertionError("an input was read before the written paths were checked")


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_written_paths_are_checked_before_any_input_is_read(tmp_path, monkeypatch, suffix):
    """A JSON Lines input is scanned in full (here it would fail on its last line), a parquet
    footer read: the clash with --summary-json is refused first, with no input opened."""
    src = tmp_path / f"r.{suffix}"
    if suffix == "jsonl":
        src.write_text(JSONL.read_text() + '{"prompt_id": "late", "reward": "not a number"}\n')
    else:
        shutil.copy(PARQUET, src)
    before = digest(src)
    for module, name in ((io.Part, "open"), (pq, "read_metadata"), (pq, "ParquetFile"), (jsonl, "scan")):
        monkeypatch.setattr(module, name, never_read)
    with pytest.raises(UsageError, match=r"^`summary_json` '.*r\.(jsonl|parquet)' is an input file; choose another path$"):
        advantages_file(str(src), summary_json=str(src))
    assert digest(src) == before


def test_a_fifo_input_is_not_read_before_the_written_paths_are_checked(tmp_path):
    """Nothing ever writes into the FIFO: reading it would block until the timeout."""
    fifo = tmp_path / "rollouts"
    os.mkfifo(fifo)
    proc = subprocess.run(
        [grpo_executable(), "advantages", str(fifo), "--input-format", "parquet", "--summary-json", str(fifo)], capture_output=True, timeout=60
    )
    refused(proc, 2, f"--summary-json {str(fifo)!r} is an input file; choose another path")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.parametrize("flag", ["-o", "--summary-json"])
def test_the_file_stdin_is_read_from_is_an_input(tmp_path, flag):
    """`grpo advantages - -o r.parquet < r.parquet` replaced its own input (the check came after
    stdin was spooled, against the spool)."""
    src = tmp_path / "r.parquet"
    shutil.copy(PARQUET, src)
    before = digest(src)
    with open(src, "rb") as rows:
        proc = subprocess.run([grpo_executable(), "advantages", "-", flag, str(src)], stdin=rows, capture_output=True, timeout=120)
    what = "output" if flag == "-o" else "--summary-json"
    refused(proc, 2, f"{what} {str(src)!r} is an input file; choose another path")
    assert digest(src) == before and sorted(p.name for p in tmp_path.iterdir()) == ["r.parquet"]


# 10. An interrupt after the outputs were committed says so.

# the CLI with its table renderer replaced by one that is interrupted, as a ^C while the table is drawn
INTERRUPTED_RENDER = (
    "import os, signal, sys\nfrom grpo_cli import cli\nfrom grpo_cli.commands import advantages\n"
    "sig = getattr(signal, sys.argv.pop(1))\n"
    "advantages.render = lambda figures, console: os.kill(os.getpid(), sig)\ncli.app(prog_name='grpo')"
)


@pytest.mark.slow  # a process per case, signalled
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.parametrize("written", [True, False])
def test_interrupt_while_printing_the_summary_says_the_outputs_are_complete(tmp_path, sig, code, written):
    """The signal arrives while the table is drawn on stderr, once every output was committed:
    the message claimed nothing about them."""
    outputs = ["-o", str(tmp_path / "o.parquet"), "--summary-json", str(tmp_path / "s.json")] if written else []
    proc = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_RENDER, signal.Signals(sig).name, "advantages", str(PARQUET), *outputs], capture_output=True, timeout=120
    )
    done = "every output was written completely, only the summary is cut short" if written else "the summary is cut short"
    refused(proc, code, f"interrupted by {signal.Signals(sig).name} while printing the summary; {done}")
    if written:
        assert (tmp_path / "o.parquet").read_bytes() == expected_output(tmp_path, str(PARQUET))
        assert json.loads((tmp_path / "s.json").read_text())["rows"] == 320
    assert sorted(p.name for p in tmp_path.iterdir()) == (["expected", "o.parquet", "s.json"] if written else [])


def test_an_output_symlink_loop_and_json_into_a_full_disk_are_one_line(tmp_path):
    """Issue 43, class 13: each was an internal error."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    refused(closed(f"advantages '{PARQUET}' -o '{tmp_path / 'a'}' -q"), 2, f"output '{tmp_path / 'a'}' is a symlink loop; write it elsewhere")
    refused(closed(f"inspect '{PARQUET}' --json > /dev/full"), 1, "<stdout>: cannot write (No space left on device)")


@pytest.mark.parametrize("rows, summary", [("-", "/dev/stdout"), ("/dev/stdout", "-"), ("/dev/fd/1", "-"), ("-", "/proc/self/fd/1")])
def test_two_names_for_stdout_are_refused(tmp_path, rows, summary):
    """Issue 43, class 1: `-o - --summary-json /dev/stdout > out.txt` kept only the summary.
    Any path that is the process's stdout counts as stdout: two outputs there are refused."""
    out = tmp_path / "out.txt"
    proc = closed(f"advantages '{PARQUET}' -o {rows} --output-format jsonl --summary-json {summary} -q > '{out}'")
    refused(proc, 2, "the rows and the summary JSON cannot both go to stdout; write --summary-json to a file")
    assert out.read_bytes() == b""


def test_a_dangling_output_symlink_names_the_folder_it_points_into(tmp_path):
    """Issue 43, class 18: it was reported as "folder '.' does not exist"."""
    (tmp_path / "out.parquet").symlink_to(tmp_path / "gone" / "x.parquet")
    proc = closed(f"advantages '{PARQUET}' -o '{tmp_path / 'out.parquet'}' -q")
    refused(proc, 2, f"output folder '{tmp_path / 'gone'}' does not exist (where the symlink '{tmp_path / 'out.parquet'}' points)")
