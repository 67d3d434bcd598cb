"""The paths a run writes, checked before any input is read: no input, folder or other output
is overwritten, and each is written in a format it can name."""

from __future__ import annotations

import errno
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path, PurePath

from ..errors import UsageError
from . import formats
from .discovery import STDIO, Part, is_uri, stdin
from .formats import format_from_name
from .outputs import stdout


def resolve_output_format(target: str, explicit: str | None, input_format: str) -> str:
    """The output format: ``explicit``, else the target's suffix, else the input's format.
    A binary format (parquet) is not written to a terminal (as ``gzip`` refuses to)."""
    fmt: str | None
    if explicit is not None:
        fmt = explicit
    elif target == STDIO:
        fmt = input_format
    else:
        fmt = format_from_name(target)
    if fmt is None:
        raise UsageError(f"cannot tell the format of {target!r} from its name; pass `output_format`")
    if target == STDIO and formats.named(fmt).binary and sys.stdout.isatty():
        text = next(f.name for f in formats.BY_NAME.values() if not f.binary)
        raise UsageError(f"{fmt} is binary and stdout is a terminal; redirect or pipe it, or pass `output_format` {text}")
    return fmt


@dataclass(frozen=True)
class Writes:
    """Every path a run writes, as given: the annotated rows to ``output`` (``-``: stdout), or
    one file per input into ``output_dir`` (in ``output_format``, if given); the figures to
    ``summary_json``. :func:`open_source` checks them (:meth:`check`) as soon as the inputs are
    listed, before any of them is read."""

    output: str | None = None
    output_dir: str | None = None
    output_format: str | None = None
    summary_json: str | None = None

    def targets(self, parts: list[Part]) -> list[str]:
        """Where the rows go: ``[output]``, or one file per part under ``output_dir`` at its path
        below its folder or glob (:attr:`Part.relative`), with the suffix of ``output_format``
        if that differs; none without either. Names and options decide, never what a file holds."""
        if self.output_dir is None:
            return [self.output] if self.output is not None else []
        return [str(Path(self.output_dir) / _renamed(part.relative, self.output_format)) for part in parts]

    def check(self, parts: list[Part], folders: tuple[Path, ...]) -> None:
        """Refuse what the run cannot write, given the input files as listed (``parts``, not
        yet read; ``-``: stdin) and the folder inputs: a URI, a missing folder, an unknown
        format, an ``output_dir`` that is a file (or given with stdin), two inputs written to
        one file, and each path that :func:`_check_written` refuses."""
        if self.output is not None and self.output_dir is not None:
            raise UsageError("pass either `output` or `output_dir`, not both")
        given = {"output": self.output, "output_dir": self.output_dir, "summary_json": self.summary_json}
        uri = next((name for name, path in given.items() if path and is_uri(path)), None)
        if uri is not None:
            raise UsageError(f"`{uri}` is a URI; outputs are written to local paths (inputs may be URIs)")
        formats.check_name(self.output_format, "output_format")
        if STDIO in (self.output, self.summary_json):
            stdout()  # refused if closed
        for what, path in (("output", self.output), ("`output_dir`", self.output_dir), ("`summary_json`", self.summary_json)):
            if path not in (None, STDIO):
                _check_no_loop(what, path)
        for what, path in (("output", self.output), ("`summary_json`", self.summary_json)):
            if path not in (None, STDIO) and not Path(path).resolve().parent.is_dir():
                link = f" (where the symlink {path!r} points)" if Path(path).is_symlink() else ""
                raise UsageError(f"{what} folder {str(Path(path).resolve().parent if link else Path(path).parent)!r} does not exist{link}")
        targets = self.targets(parts)
        if self.output_dir is not None:
            if any(part.path == STDIO for part in parts):
                raise UsageError("`output_dir` needs named input files, not stdin")
            if Path(self.output_dir).exists() and not Path(self.output_dir).is_dir():
                raise UsageError(f"`output_dir` {self.output_dir!r} is a file, not a folder")
            _check_distinct(parts, targets)
        written = [("output", target) for target in targets]
        if self.summary_json is not None:
            written.append(("`summary_json`", self.summary_json))
        _check_written(parts, folders, written)


def _check_written(parts: list[Part], folders: tuple[Path, ...], written: list[tuple[str, str]]) -> None:
    """Refuse a path the run writes (``(what, path)``) that is an input file (also through a
    symlink or a hard link, or the file stdin reads), a folder, or inside a folder input (a
    later run on it would read it as input); and two that are one file, or both stdout. A
    character device (``/dev/null``, a terminal) is written through, never replaced: it may be
    named twice, and be read too."""
    inputs = {_identity(part.path) for part in parts if part.local}
    seen: dict[object, tuple[str, str]] = {}
    out = _stdout_identity()
    for what, path in written:
        device = _is_device(path)
        key = (out or path) if path == STDIO else _identity(path)
        if key in inputs and not device:
            raise UsageError(f"{what} {path!r} is an input file; choose another path")
        if path != STDIO:
            _check_target(what, path, folders)
        if key in seen and not device:
            if STDIO in (path, seen[key][1]) or key == out:  # `-`, /dev/stdout, /dev/fd/1: one stdout
                raise UsageError("the rows and the summary JSON cannot both go to stdout; write `summary_json` to a file")
            raise UsageError(f"{seen[key][0]} {seen[key][1]!r} and {what} {path!r} are one file; write them to different paths")
        seen[key] = (what, path)


def _stdout_identity() -> object | None:
    """The device and inode of what descriptor 1 writes to (a file, a pipe), so that
    ``/dev/stdout``, ``/dev/fd/1`` and ``-`` are one output; ``None`` if it is closed."""
    try:
        found = os.fstat(1)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _check_no_loop(what: str, path: str) -> None:
    """Refuse a path whose symlinks point at each other (nothing could be written there)."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UsageError(f"{what} {path!r} is a symlink loop; write it elsewhere") from None


def _check_target(what: str, path: str, folders: tuple[Path, ...]) -> None:
    t = Path(path)
    if t.is_dir():
        hint = " (for one output per input, use `output_dir`)" if what == "output" else ""
        raise UsageError(f"{what} {path!r} is a directory{hint}")
    folder = next((f for f in folders if t.resolve().is_relative_to(f.resolve())), None)
    if folder is not None:
        raise UsageError(
            f"{what} {path!r} is inside input folder {str(folder)!r}, whose sub-folders are read too: "
            "a later run would read it as input; write it outside"
        )


def _identity(path: str) -> object:
    """What makes two paths one file: its device and inode if it exists (``-``: those of what
    stdin reads), else where it resolves to."""
    try:
        found = os.fstat(stdin().fileno()) if path == STDIO else os.stat(path)
    except OSError:
        return os.path.realpath(path)
    return found.st_dev, found.st_ino


def _is_device(path: str) -> bool:
    """Whether ``path`` (not stdout) is a character device (``/dev/null``, a terminal), after symlinks."""
    try:
        return path != STDIO and stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False


def _check_distinct(parts: list[Part], targets: list[str]) -> None:
    """Two inputs must not be written to one output file."""
    writer: dict[str, Part] = {}
    for part, target in zip(parts, targets):
        first = writer.setdefault(target, part)
        if first is not part:
            raise UsageError(
                f"`output_dir` would write both {first.name} and {part.name} to {target}; run them separately, or pass the folder that holds both"
            )


def _renamed(path: PurePath, fmt: str | None) -> PurePath:
    """``path`` with the suffix of format ``fmt`` if it has another (``None``: as it is)."""
    return path if fmt is None or format_from_name(path.name) == fmt else path.with_name(f"{path.stem}.{fmt}")
