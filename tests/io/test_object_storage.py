"""Inputs on object storage: ``s3://`` URIs (a local S3 server, moto) read as local files are,
file by file, folder by folder and glob by glob, with the same results and the same one-line
errors; ``file://`` URIs take the same path through pyarrow's filesystems."""

import datetime
import json
import os
import signal
import socket
import subprocess
import time

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from grpo_cli import advantages_file

from ..conftest import grpo_executable, run_grpo, run_grpo_process

moto_server = pytest.importorskip("moto.server", reason="the S3 tests need moto[server] (in the test extra)")


@pytest.fixture(scope="module")
def s3_endpoint():
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def bucket(s3_endpoint, monkeypatch, steps, sample_jsonl):
    """A bucket holding the four step files under ``steps/`` (one in a sub-folder, beside a
    Spark marker), the JSON Lines sample with no suffix, and an empty object. The grpo commands
    this test starts reach it through the environment, as a user's would."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": s3_endpoint,
    }.items():
        monkeypatch.setenv(key, value)
    s3 = pafs.S3FileSystem(
        endpoint_override=s3_endpoint,
        access_key="test",
        secret_key="test",
        region="us-east-1",
        allow_bucket_creation=True,
        allow_bucket_deletion=True,
    )
    s3.create_dir("rollouts")
    for k, key in enumerate(["steps/step_0.parquet", "steps/step_1.parquet", "steps/late/step_2.parquet", "steps/step_3.parquet"]):
        pafs.copy_files(str(steps / f"step_{k}.parquet"), f"rollouts/{key}", destination_filesystem=s3)
    with s3.open_output_stream("rollouts/steps/_SUCCESS") as f:
        f.write(b"")
    pafs.copy_files(str(sample_jsonl), "rollouts/raw/rollouts", destination_filesystem=s3)
    with s3.open_output_stream("rollouts/empty.parquet") as f:
        f.write(b"")
    yield "s3://rollouts"
    s3.delete_dir("rollouts")


def _summary(*args: str) -> dict:
    return json.loads(run_grpo("advantages", *args, "--quiet", "--summary-json", "-").stdout)


def test_an_s3_folder_gives_what_the_same_files_give_locally(bucket, steps, tmp_path):
    """The folder is walked at any depth, in path order, skipping _SUCCESS: ``late/step_2``
    sorts before ``step_0``, so the local run lists the files in that order too."""
    local = [steps / "step_2.parquet", steps / "step_0.parquet", steps / "step_1.parquet", steps / "step_3.parquet"]
    run_grpo("advantages", *map(str, local), "-o", str(tmp_path / "local.parquet"))
    remote = run_grpo("advantages", f"{bucket}/steps/", "-o", str(tmp_path / "remote.parquet"))
    assert (tmp_path / "remote.parquet").read_bytes() == (tmp_path / "local.parquet").read_bytes()
    assert pq.read_table(tmp_path / "remote.parquet").num_rows == 320
    assert b"Error" not in remote.stderr


def test_s3_globs_match_one_level_or_any_depth(bucket):
    assert _summary(f"{bucket}/steps/step_*.parquet")["rows"] == 240
    assert _summary(f"{bucket}/steps/**/step_[02].parquet")["rows"] == 160


def test_output_dir_mirrors_the_s3_folders(bucket, tmp_path):
    run_grpo("advantages", f"{bucket}/steps", "--output-dir", str(tmp_path / "out"))
    written = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*.parquet"))
    assert written == ["late/step_2.parquet", "step_0.parquet", "step_1.parquet", "step_3.parquet"]
    assert pq.read_table(tmp_path / "out" / "late" / "step_2.parquet").column("advantage").length() == 80


def test_json_lines_without_a_suffix_are_recognised_on_s3(bucket, sample_jsonl):
    assert _summary(f"{bucket}/raw/rollouts") == _summary(str(sample_jsonl))


def test_python_api_reads_s3(bucket, sample_parquet):
    local = advantages_file(str(sample_parquet))
    remote = advantages_file(f"{bucket}/steps/**/*.parquet")
    assert remote["advantage"] == local["advantage"]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("{bucket}/steps/missing.parquet", "{bucket}/steps/missing.parquet: no such file"),
        ("{bucket}/empty.parquet", "{bucket}/empty.parquet: empty file"),
        ("{bucket}/nothing/*.parquet", "{bucket}/nothing/*.parquet: no files match"),
        ("nosuch://x/y.parquet", "nosuch://x/y.parquet: cannot read (Unrecognized filesystem type in URI: nosuch://x/y.parquet)"),
    ],
)
def test_object_storage_errors_are_one_line(bucket, given, message):
    proc = run_grpo("advantages", given.format(bucket=bucket), check=False)
    assert proc.returncode == 1
    assert proc.stderr.decode() == f"Error: {message.format(bucket=bucket)}\n"


def test_outputs_go_to_local_paths(bucket):
    proc = run_grpo("advantages", f"{bucket}/steps/step_0.parquet", "-o", f"{bucket}/out.parquet", check=False)
    assert proc.returncode == 2
    assert proc.stderr.decode() == "Error: --output is a URI; outputs are written to local paths (inputs may be URIs)\n"


@pytest.mark.slow  # a Ray cluster
def test_the_ray_engine_reads_s3(bucket, tmp_path):
    pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'grpo-cli[ray]'")
    run_grpo("advantages", f"{bucket}/steps/", "-o", str(tmp_path / "local.parquet"))
    # its own process: the run starts a Ray cluster, which test_ray starts as it needs
    run_grpo_process("advantages", f"{bucket}/steps/", "-o", str(tmp_path / "ray.parquet"), "--engine", "ray")
    assert (tmp_path / "ray.parquet").read_bytes() == (tmp_path / "local.parquet").read_bytes()


def test_file_uris_read_local_files(steps, tmp_path):
    run_grpo("advantages", str(steps), "-o", str(tmp_path / "path.parquet"))
    run_grpo("advantages", f"file://{steps}", "-o", str(tmp_path / "uri.parquet"))
    assert (tmp_path / "uri.parquet").read_bytes() == (tmp_path / "path.parquet").read_bytes()


@pytest.mark.parametrize(
    "given",
    [
        pytest.param("gs://no-such-bucket-here/a.parquet?retry_limit_seconds=1", marks=pytest.mark.slow),  # a second of retries
        "hdfs://namenode:8020/a.parquet",
    ],
)
def test_storage_that_cannot_be_reached_is_one_line(given):
    """No credentials or client here (GCS finds no token; HDFS no libhdfs): one line, exit 1."""
    proc = run_grpo("advantages", given, check=False)
    assert proc.returncode == 1
    [line] = proc.stderr.decode().splitlines()
    assert line.startswith(f"Error: {given}: cannot read (")


@pytest.fixture
def unreachable_gcs(monkeypatch) -> str:
    """A ``gs://`` URI whose server, on loopback, does not answer (a closed port), nor does
    the token server google's client asks first (the same port): no real network."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("GCE_METADATA_ROOT", f"127.0.0.1:{port}")
    return f"gs://rollouts/r.parquet?scheme=http&endpoint_override=127.0.0.1:{port}"


def test_gcs_retries_are_bounded_by_default(unreachable_gcs):
    """Issue 43, class 12: an unreachable ``gs://`` input was retried for about 15 minutes
    (google's client's default). By default a call retries for 30 s; the URI's
    ``retry_limit_seconds`` sets it."""
    from grpo_cli.io.discovery import _filesystem

    for uri, seconds in (("gs://rollouts/r.parquet", 30), ("gs://rollouts/r.parquet?retry_limit_seconds=600", 600)):
        filesystem, path = _filesystem(uri)
        assert path == "rollouts/r.parquet" and filesystem.__reduce__()[1][0]["retry_time_limit"] == datetime.timedelta(seconds=seconds)
    given = f"{unreachable_gcs}&retry_limit_seconds=1"
    start = time.monotonic()
    proc = run_grpo("advantages", given, check=False)
    [line] = proc.stderr.decode().splitlines()
    assert proc.returncode == 1 and line.startswith(f"Error: {given}: cannot read (") and "Retry policy exhausted" in line
    assert time.monotonic() - start < 15


@pytest.mark.slow  # a process per signal, seconds each
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_gcs_input_while_it_retries(unreachable_gcs, signum):
    """Issue 43, class 12: SIGINT and SIGTERM were ignored while pyarrow retried (only SIGKILL
    stopped it). Object storage is listed on a thread of its own; the run stops at once."""
    proc = subprocess.Popen([grpo_executable(), "advantages", unreachable_gcs], stderr=subprocess.PIPE, env=os.environ)
    try:
        time.sleep(5)  # started, and retrying (for 30 s)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signum and err.decode() == f"Error: interrupted by {signum.name}; no output written\n"
