"""Where the rows are: local paths or URIs that pyarrow's filesystems understand (``s3://``,
``gs://``, ``hdfs://``, ``file://``), with the credentials of the user's environment. An input
is a file, a folder (its rollout files at any depth), a glob, or ``-`` for stdin; each file is
a :class:`Part`. Stdin, pipes and FIFOs are spooled to a temporary file first, because a run
reads its input twice and a parquet footer sits at the end of the stream.

A ``gs://`` call retries for :data:`GCS_RETRY_SECONDS` (Google's client library would retry
for 15 minutes) unless the URI's ``retry_limit_seconds`` says otherwise. Object storage is
listed on a thread of its own, so SIGINT and SIGTERM stop the run while pyarrow waits.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import stat
import re
import shutil
import sys
import threading
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath
from typing import BinaryIO, Callable, TypeVar
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.fs as pafs

from ..errors import InputError
from .formats import SUFFIXES, first_line, format_from_name

STDIO = "-"
GLOB_CHARS = frozenset("*?[")
SKIPPED_PREFIXES = (".", "_")  # names a folder walk skips: hidden files, Spark's _SUCCESS and _temporary/
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"  # the folder value Hive and Spark write for null
LOCAL = pafs.LocalFileSystem()
DIGITS = re.compile(r"(\d+)")  # split by it, a name alternates text and runs of digits
GCS_RETRY_SECONDS = 30  # how long a gs:// call retries by default; the URI's `retry_limit_seconds` sets it

T = TypeVar("T")


def is_uri(given: str) -> bool:
    """Whether ``given`` names a file by URI (``s3://bucket/key``) rather than a local path."""
    return "://" in given


@dataclass(frozen=True)
class Part:
    """One file of a source: the name messages use, where it is (a path on ``filesystem``),
    and its path below the folder it was found in (a folder input, a glob's fixed leading
    folders, or a named file's own folder): hive partitions and `output_dir` sub-paths come
    from ``relative``. Data in memory is a part with no ``filesystem``."""

    name: str
    path: str
    relative: PurePath
    filesystem: pafs.FileSystem | None

    @property
    def local(self) -> bool:
        return isinstance(self.filesystem, pafs.LocalFileSystem)

    @property
    def files(self) -> pafs.FileSystem:
        """The filesystem the part is a file of (data in memory has none)."""
        if self.filesystem is None:
            raise ValueError(f"{self.name} is data in memory, not a file")
        return self.filesystem

    def open(self):
        """The file as a binary stream."""
        return self.files.open_input_stream(self.path)

    @property
    def partition_values(self) -> dict[str, str | None]:
        """The ``key=value`` folders of ``relative`` (values URL-decoded; Hive's null is None)."""
        values: dict[str, str | None] = {}
        for folder in self.relative.parent.parts:
            key, equals, value = folder.partition("=")
            if key and equals:
                values[key] = None if value == HIVE_NULL else unquote(value)
        return values


def expand_inputs(inputs: list[str]) -> list[Part]:
    """The files that ``inputs`` name (local paths or URIs), each input's in natural order of
    its path (:func:`natural`): a file as given; a folder's rollout files at any depth (see
    :func:`_walk`); a glob pattern's matches (``**`` matches any depth of folders). Each must
    be a readable, non-empty file."""
    return [part for given in inputs for part in _expand(given)]


def _expand(given: str) -> list[Part]:
    head, query = given.partition("?")[0::2] if is_uri(given) else (given, "")
    names = head.split("/")
    wild = next((k for k, name in enumerate(names) if GLOB_CHARS & set(name)), None)
    if wild is not None and (is_uri(given) or not os.path.exists(given)):  # a local file may have [ in its name
        fixed = "/".join(names[:wild]) or ("/" if head.startswith("/") else "")
        filesystem, base = _filesystem(f"{fixed}?{query}" if query else fixed)
        found = _guarded(given, lambda: _glob(filesystem, base or ".", names[wild:]))
        if not found:
            raise InputError(f"{given}: no files match")
        return _parts(fixed, found, filesystem)
    filesystem, path = _filesystem(given)
    info = _guarded(given, lambda: filesystem.get_file_info(path))
    if info.type == pafs.FileType.Directory:
        found = _guarded(given, lambda: _walk(filesystem, path))
        if not found:
            raise InputError(f"{given}: is a directory with no {', '.join(SUFFIXES)} files")
        return _parts(head, found, filesystem)
    part = Part(given, path, PurePath(PurePath(path).name), filesystem)
    _check_readable(part, info)
    return [part]


def _parts(fixed: str, found: dict[PurePath, pafs.FileInfo], filesystem: pafs.FileSystem) -> list[Part]:
    """The files ``found`` below the input folder ``fixed``, each checked readable."""
    parts = [Part(_joined(fixed, relative), info.path, relative, filesystem) for relative, info in found.items()]
    for part, info in zip(parts, found.values()):
        _check_readable(part, info)
    return parts


def _filesystem(given: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem that holds ``given`` and its path there (a local path is itself)."""
    if not is_uri(given):
        return LOCAL, given
    return _guarded(given, lambda: pafs.FileSystem.from_uri(_retry_bounded(given)))


def _retry_bounded(uri: str) -> str:
    """``uri``; a ``gs://`` one that does not set ``retry_limit_seconds`` with it set to
    :data:`GCS_RETRY_SECONDS`.

    >>> _retry_bounded("gs://bucket/r.parquet"), _retry_bounded("gs://bucket/r.parquet?retry_limit_seconds=600")
    ('gs://bucket/r.parquet?retry_limit_seconds=30', 'gs://bucket/r.parquet?retry_limit_seconds=600')
    """
    scheme, _, rest = uri.partition("://")
    query = rest.partition("?")[2]
    if scheme.lower() not in ("gs", "gcs") or any(option.partition("=")[0] == "retry_limit_seconds" for option in query.split("&")):
        return uri
    return f"{uri}{'&' if query else '?'}retry_limit_seconds={GCS_RETRY_SECONDS}"


def _guarded(given: str, call: Callable[[], T]) -> T:
    """``call()``, a filesystem failing (no credentials, no such bucket, no answer) in one
    line; for a URI, on a thread of its own (:func:`_waited`)."""
    try:
        return _waited(call) if is_uri(given) else call()
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{given}: cannot read ({first_line(exc)})") from None


def _waited(call: Callable[[], T]) -> T:
    """``call()`` on a daemon thread, waited for by this one: pyarrow does not return to
    Python while it retries, and a signal's handler runs only here (its exception leaves the
    thread behind, which does not keep the process alive)."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # handed to the waiting thread
            outcome.append((False, exc))

    thread = threading.Thread(target=run, name="grpo-listing", daemon=True)
    thread.start()
    thread.join()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def _joined(fixed: str, relative: PurePath) -> str:
    """The name of the file at ``relative`` below the input folder ``fixed``, written as it was."""
    if is_uri(fixed):
        return f"{fixed.rstrip('/')}/{relative.as_posix()}"
    return str(Path(fixed) / relative)


def _listing(filesystem: pafs.FileSystem, folder: str, *, recursive: bool = False) -> dict[PurePath, pafs.FileInfo]:
    """What ``folder`` holds (at any depth if ``recursive``), by path below it."""
    if recursive and isinstance(filesystem, pafs.LocalFileSystem):
        return _local_walk(folder)
    infos = filesystem.get_file_info(pafs.FileSelector(folder, recursive=recursive, allow_not_found=True))
    return {PurePath(PurePosixPath(info.path).relative_to(PurePosixPath(folder))): info for info in infos}


def _local_walk(folder: str) -> dict[PurePath, pafs.FileInfo]:
    """A local folder at any depth, symlinks followed, each real folder entered once: a link
    back into it (``loop -> .``) adds nothing, so a cycle ends. A file reached by two paths (a
    link to a file of the folder) is refused: it would be read twice."""
    found: dict[PurePath, pafs.FileInfo] = {}
    entered: set[tuple[int, int]] = set()
    files: dict[tuple[int, int], PurePath] = {}
    stack = [PurePath()]
    while stack:
        below = stack.pop()
        here = os.path.join(folder, below)
        st = os.stat(here)
        if (st.st_dev, st.st_ino) in entered:
            continue
        entered.add((st.st_dev, st.st_ino))
        with os.scandir(here) as entries:
            for entry in entries:
                path, q = entry.path, below / entry.name
                try:
                    info = os.stat(path)
                except OSError:  # a dangling link: not a file of the folder
                    continue
                if stat.S_ISDIR(info.st_mode):
                    found[q] = pafs.FileInfo(path, pafs.FileType.Directory)
                    stack.append(q)
                elif stat.S_ISREG(info.st_mode):
                    key = (info.st_dev, info.st_ino)
                    if key in files and format_from_name(q.name):
                        raise InputError(
                            f"{os.path.join(folder, files[key])} and {path} are one file (a link): a folder is read once; remove the link"
                        )
                    files.setdefault(key, q)
                    found[q] = pafs.FileInfo(path, pafs.FileType.File, size=info.st_size)
    return found


def _walk(filesystem: pafs.FileSystem, folder: str) -> dict[PurePath, pafs.FileInfo]:
    """The rollout files below ``folder`` at any depth, by path below it, in natural order. A name that
    starts with . or _ (hidden files, Spark's _SUCCESS and _temporary/) is skipped, and so is
    everything below it."""
    found = _listing(filesystem, folder, recursive=True)
    return {
        q: found[q]
        for q in sorted(found, key=natural)
        if found[q].type == pafs.FileType.File and format_from_name(q.name) and not any(name.startswith(SKIPPED_PREFIXES) for name in q.parts)
    }


def _glob(filesystem: pafs.FileSystem, folder: str, pattern: list[str]) -> dict[PurePath, pafs.FileInfo]:
    """The files below ``folder`` whose path below it matches ``pattern``, by that path, in natural order.

    Each name of ``pattern`` matches one folder level (``*``, ``?``, ``[...]``), ``**`` any
    depth of folders; as in the shell, a wildcard matches a name starting with . only if it
    starts with . too, and ``**`` does not enter hidden folders."""
    found = {PurePath(): pafs.FileInfo(folder, pafs.FileType.Directory)}
    for name in pattern:
        folders = [q for q, info in found.items() if info.type == pafs.FileType.Directory]
        if name == "**":
            found = {q: found[q] for q in folders} | {
                q / r: info
                for q in folders
                for r, info in _listing(filesystem, found[q].path, recursive=True).items()
                if not any(part.startswith(".") for part in r.parts)
            }
        else:
            found = {
                q / r: info
                for q in folders
                for r, info in _listing(filesystem, found[q].path).items()
                if fnmatch.fnmatchcase(r.name, name) and (name.startswith(".") or not r.name.startswith("."))
            }
    return {q: found[q] for q in sorted(found, key=natural) if found[q].type == pafs.FileType.File}


def natural(path: PurePath) -> tuple:
    """The order files are read in: by folder, then name, the runs of digits in each compared
    as numbers (``rank2`` before ``rank10``, ``9.jsonl`` before ``10.jsonl``; as ``ls -v``),
    ties (``01`` and ``1``) by the plain names.

    >>> [p.name for p in sorted(map(PurePath, ["rank10.jsonl", "rank2.jsonl", "rank1.jsonl"]), key=natural)]
    ['rank1.jsonl', 'rank2.jsonl', 'rank10.jsonl']
    """
    return tuple((tuple(int(run) if run.isdigit() else run for run in DIGITS.split(name)), name) for name in path.parts)


def _check_readable(part: Part, info: pafs.FileInfo) -> None:
    """A file that exists, is not a folder, is readable (on the local filesystem, ``file://``
    included, checked here; elsewhere when read) and is not empty."""
    if info.type == pafs.FileType.NotFound:
        raise InputError(f"{part.name}: no such file")
    if info.type == pafs.FileType.Directory:
        raise InputError(f"{part.name}: is a directory, expected a file")
    if part.local and not os.access(info.path, os.R_OK):
        raise InputError(f"{part.name}: permission denied")
    if info.size == 0:
        raise InputError(f"{part.name}: empty file")


def spooled(spools: contextlib.ExitStack, part: Part) -> Part:
    """``part`` (stdin, a pipe or a FIFO) copied to a temporary file that ``spools`` removes:
    both passes need the data, and a parquet footer sits at the end of the stream."""
    import tempfile  # here, not at the top: a run on named files makes no temporary file

    spool = spools.enter_context(tempfile.NamedTemporaryFile(prefix="grpo-spool-"))
    try:
        with contextlib.nullcontext(stdin()) if part.path == STDIO else open(part.path, "rb") as stream:
            shutil.copyfileobj(stream, spool)
        spool.flush()
    except OSError as exc:
        raise InputError(f"{part.name}: cannot read ({exc.strerror or exc})") from None
    if spool.tell() == 0:
        raise InputError(f"{part.name}: empty input")
    return Part(part.name, spool.name, part.relative, LOCAL)


def stdin() -> BinaryIO:
    """Binary stdin; a closed one (``<&-``: Python found no descriptor 0 at start) is refused."""
    if sys.stdin is None:
        raise InputError("<stdin>: not open (stdin is closed); pipe the rollouts in, or name the file")
    return sys.stdin.buffer


def is_special(path: str) -> bool:
    """Whether ``path`` is a pipe, a FIFO, a device or a socket (after symlinks): read once,
    in order, as an input; written into, never replaced, as an output."""
    return os.path.exists(path) and not (os.path.isfile(path) or os.path.isdir(path))
