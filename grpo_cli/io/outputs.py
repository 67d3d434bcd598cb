"""Outputs, all or nothing: every file a run writes goes to a temporary file first, and all
are moved into place together only when the whole run succeeded (:class:`Outputs`)."""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
import sys
from pathlib import Path
from typing import BinaryIO, Iterator

import pyarrow as pa

from ..errors import RECEIVED, Interrupted, OutputError
from ..process import ClosedStdout
from . import formats
from .discovery import STDIO, is_special
from .formats import Writer
from .parquet_writer import Layout

COPY_BYTES = 1 << 20  # bytes per write when copying into stdout, a device or a FIFO


def stdout() -> BinaryIO:
    """Binary stdout; a closed one (``>&-``: Python found no descriptor 1 at start) is refused."""
    if sys.stdout is None or isinstance(sys.stdout, ClosedStdout):
        raise OutputError("<stdout>: not open (stdout is closed); redirect it, or write to a file")
    return sys.stdout.buffer


class Staged:
    """One output on its way to ``target`` (``-``: stdout), written to a temporary file first.

    A regular file (or a new one) gets its temporary file beside it (beside the file a symlink
    points to), and :meth:`commit` renames it into place: atomic, and a symlink stays, pointing
    at the new file. Stdout, a device or a FIFO gets it in the temporary folder, and
    :meth:`commit` copies it in, as ``cp`` does: such a target is never replaced. :meth:`discard`
    removes the temporary file and the folders made for the target. Given ``outputs``, it is
    held there before its temporary file exists, so an interrupt at any point leaves none.
    Given ``into``, a temporary file that another process staged (a Ray task's output, which
    the driver staged), it writes there, from its start, and makes nothing.
    """

    def __init__(self, target: str, outputs: Outputs | None = None, into: Path | None = None):
        self.target = target
        self.place: Path | None = None  # what the rename replaces; None: copied in
        self.tmp: Path | None = None
        self.made: list[Path] = []  # folders made for the target, deepest first
        self.copied = 0  # bytes copied in so far
        if outputs is not None:
            outputs.add(self)
        try:
            with self._os_errors():
                if into is None:
                    self._make()
                else:
                    self.tmp = into
                    if os.path.getsize(into):  # a retried task's bytes; an empty file is not truncated (see Format.writer)
                        os.truncate(into, 0)
                self._open()
        except BaseException:
            self.discard()
            raise

    def _make(self) -> None:
        """Make the target's folders and the temporary file, its name recorded before it exists."""
        if self.target == STDIO or is_special(self.target):
            import tempfile

            folder = Path(tempfile.gettempdir())
        else:
            self.place = Path(os.path.realpath(self.target))
            folder = self.place.parent
            self.made = _make_folders(folder)
        self.tmp = folder / f".{Path(self.target).name}.{os.urandom(6).hex()}.tmp"  # not `secrets`: it imports hashlib
        os.close(os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))

    def _open(self) -> None:
        """Open the temporary file for writing (a :class:`Sink` does)."""

    @property
    def shown(self) -> str:
        """The target as messages name it."""
        return "<stdout>" if self.target == STDIO else self.target

    @contextlib.contextmanager
    def _os_errors(self) -> Iterator[None]:
        """A failing write (disk full, no permission) becomes one clear :class:`OutputError`;
        a closed pipe stays a BrokenPipeError, which the CLI ends quietly."""
        try:
            yield
        except BrokenPipeError:
            raise
        except OSError as exc:
            done = "the output is incomplete" if self.copied else "nothing was written"
            raise OutputError(f"{self.shown}: cannot write ({exc.strerror or exc}); {done}") from None

    @property
    def temporary(self) -> Path:
        """The temporary file (named as soon as the output is made)."""
        assert self.tmp is not None
        return self.tmp

    def write_text(self, text: str) -> None:
        with self._os_errors():
            self.temporary.write_text(text)

    def close(self) -> None:
        """Finish the temporary file (the target is untouched until :meth:`commit`)."""

    def commit(self) -> None:
        """Move the finished temporary file into place (see the class)."""
        self.close()
        with self._os_errors():
            if self.place is None:
                self._copy_in()
            else:
                # the temporary file is private (0600): it gets the mode of the file it replaces,
                # else the one a plain open() would give
                try:
                    mode = stat.S_IMODE(os.stat(self.place).st_mode)
                except FileNotFoundError:
                    umask = os.umask(0)
                    os.umask(umask)
                    mode = 0o666 & ~umask
                os.chmod(self.temporary, mode)
                os.replace(self.temporary, self.place)
        self.made = []

    def _copy_in(self) -> None:
        """Copy the temporary file into stdout, the device or the FIFO; an interrupt once the
        copy has begun says that the output is incomplete."""
        into = stdout().fileno() if self.target == STDIO else self.target
        with open(self.temporary, "rb") as finished, open(into, "wb", buffering=0, closefd=self.target != STDIO) as out:
            try:
                while chunk := finished.read(COPY_BYTES):
                    view = memoryview(chunk)
                    while view:
                        written = out.write(view)
                        self.copied += written
                        view = view[written:]
            except Interrupted as exc:
                where = "stdout" if self.target == STDIO else self.target
                raise exc.saying(f" while copying to {where}; the output is incomplete") from None

    def discard(self) -> None:
        """Remove the temporary file and the folders made for the target (if still empty)."""
        with contextlib.suppress(Exception):
            self.close()
        if self.tmp is not None:
            self.tmp.unlink(missing_ok=True)
        for folder in self.made:
            with contextlib.suppress(OSError):
                folder.rmdir()


class Sink(Staged):
    """Writes record batches, in format ``fmt``, to a staged output (see :class:`Staged`);
    parquet as ``layout`` says (:mod:`grpo_cli.io.parquet_writer`), encoded on up to
    ``threads`` threads."""

    def __init__(
        self,
        target: str,
        fmt: str,
        schema: pa.Schema,
        layout: Layout = Layout(),
        outputs: Outputs | None = None,
        threads: int = 1,
        into: Path | None = None,
    ):
        self.format = fmt
        self.threads = threads
        self.schema = schema
        self.layout = layout
        self.rows = 0
        self._writer: Writer | None = None
        super().__init__(target, outputs, into)

    def _open(self) -> None:
        self._writer = formats.named(self.format).writer(str(self.tmp), self.target, self.schema, self.layout, self.threads)

    def write(self, batch: pa.RecordBatch) -> None:
        assert self._writer is not None  # opened when the sink was made
        with self._os_errors():
            self._writer.write_batch(batch)
        self.rows += batch.num_rows

    def close(self) -> None:
        writer, self._writer = self._writer, None
        with self._os_errors():
            if writer is not None:
                writer.close()


class Outputs:
    """Every file a run writes, committed together. Each is staged first (:class:`Staged`,
    :class:`Sink`); :meth:`commit` copies the streamed ones in first (stdout, devices, FIFOs:
    a full disk or a closed pipe can stop them half-way), then renames the others into place,
    so a copy that fails leaves every file target as it was.

    Use as a context manager: leaving it removes every temporary file, and an interrupt that
    came before the commit began says that no output was written.
    """

    def __init__(self) -> None:
        self.staged: list[Staged] = []
        self.committing = False

    def add(self, staged: Staged) -> None:
        self.staged.append(staged)

    def commit(self) -> None:
        if RECEIVED:  # a signal the run went on past (Python swallowed its exception): nothing is committed
            raise RECEIVED[0]
        self.committing = True  # from here on, an interrupt never says that nothing was written
        for done, staged in enumerate(sorted(self.staged, key=lambda s: s.place is not None)):
            try:
                staged.commit()
            except Interrupted as exc:
                if done:
                    raise exc.saying(" while moving the outputs into place; the output is incomplete") from None
                raise

    def __enter__(self) -> Outputs:
        self.committing = False
        return self

    def __exit__(self, kind, exc, traceback) -> None:
        staged, self.staged = self.staged, []
        for s in reversed(staged):  # the last first: the folders an earlier one made are empty by then
            s.discard()
        if isinstance(exc, Interrupted) and not self.committing:
            raise exc.saying("; no output written") from None


def _make_folders(folder: Path) -> list[Path]:
    """Make ``folder`` and its missing parents; return those made, deepest first."""
    missing = list(itertools.takewhile(lambda f: not f.exists(), (folder, *folder.parents)))
    for f in reversed(missing):
        f.mkdir(exist_ok=True)
    return missing
