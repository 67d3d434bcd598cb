"""Input and output formats: one module each, found here, behind one interface (:class:`Format`).

Adding a format is one new module in this folder (and its test): it defines a subclass of
:class:`Format` and an instance of it named ``FORMAT``. Nothing else names a format: the
``input_format`` and ``output_format`` choices, the suffixes a folder walk takes, the
detection of a file without a known suffix and the writing of outputs all come from here.
"""

from __future__ import annotations

import importlib
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Protocol, TypeVar

import pyarrow as pa

from ...errors import InputError, UsageError
from ...plugins import modules

if TYPE_CHECKING:
    from ..discovery import Part
    from ..parquet_writer import Layout

UNSUPPORTED = {".csv": "CSV", ".tsv": "TSV"}  # formats we name rather than misread (until a module here reads them)
PICKLED = (".pt", ".pth", ".pkl", ".pickle")  # torch.save / pickle (verl's DataProto.save_to_disk): never unpickled, it runs code
DATAPROTO_RECIPE = (
    "python -c \"from verl import DataProto; import pyarrow as pa, pyarrow.parquet as pq; b = DataProto.load_from_disk('IN.pt'); "
    "pq.write_table(pa.table({**{k: v.tolist() for k, v in b.batch.items()}, **{k: list(v) for k, v in b.non_tensor_batch.items()}}), 'OUT.parquet')\""
)
SNIFF_BYTES = 4096  # enough to see past blank lines to a JSON Lines file's first brace

T = TypeVar("T")


@dataclass(frozen=True)
class Scan:
    """What one file holds, learnt once (a parquet footer, a JSON Lines first pass): its
    columns as stored, its rows, the rows of each piece it is stored in (parquet: row groups;
    JSON Lines: the file), its uncompressed bytes, and for the parquet writer to follow, the
    codec of its first column and its largest row group (None where the format has none)."""

    schema: pa.Schema
    rows: int
    pieces: tuple[int, ...]
    nbytes: int
    codec: str | None = None
    row_group_rows: int | None = None


class Writer(Protocol):
    """Writes record batches to one file; :meth:`close` finishes it."""

    def write_batch(self, batch: pa.RecordBatch) -> None: ...

    def close(self) -> None: ...


class Reader(ABC):
    """How the parts of a :class:`~grpo_cli.io.Source` are read. ``name`` says what they are
    in messages (``not a readable parquet file``) and ``piece`` what progress counts."""

    name: str
    piece: str = "files"

    @property
    def kind(self) -> str:
        """What one part is, in messages."""
        return f"{self.name} file"

    @abstractmethod
    def scan(self, part: Part) -> Scan:
        """What ``part`` holds (see :class:`Scan`)."""

    def scans(self, parts: list[Part]) -> list[Scan]:
        """Each part's :class:`Scan`, in order."""
        return [self.guarded(part, partial(self.scan, part)) for part in parts]

    @abstractmethod
    def read(self, part: Part, columns: pa.Schema) -> pa.Table:
        """The stored ``columns`` of every row of ``part``, as one table."""

    @abstractmethod
    def batches(self, part: Part, batch_rows: int, columns: pa.Schema, threads: int = 1) -> Iterator[pa.RecordBatch]:
        """The stored ``columns`` of ``part``, in order, at most ``batch_rows`` rows a batch;
        a format that can read on several threads uses up to ``threads``."""

    def guarded(self, part: Part, read: Callable[[], T]) -> T:
        """``read()``, a file that pyarrow cannot read in one line naming it."""
        try:
            return read()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
            raise InputError(f"{part.name}: not a readable {self.kind} ({first_line(exc)})") from None

    def guarded_batches(self, part: Part, batches: Callable[[], Iterator[pa.RecordBatch]]) -> Iterator[pa.RecordBatch]:
        """The batches of the iterator that ``batches()`` makes, each read :meth:`guarded`."""
        found = self.guarded(part, batches)
        while (batch := self.guarded(part, lambda: next(found, None))) is not None:
            yield batch


class Format(Reader):
    """A file format: how its files are recognised (``suffixes``, :meth:`sniff`), read (see
    :class:`Reader`) and written (:meth:`writer`). ``name`` is its ``input_format`` and
    ``output_format`` value and the suffix of the files ``output_dir`` writes in it;
    ``title`` names it in messages; ``order`` places it among the formats (in choices and
    messages); a ``binary`` format is not written to a terminal."""

    title: str
    suffixes: tuple[str, ...]
    order: int = 100
    binary: bool = False

    @abstractmethod
    def sniff(self, head: bytes) -> bool:
        """Whether a file that begins with ``head`` (up to :data:`SNIFF_BYTES`) is in this format."""

    @abstractmethod
    def writer(self, path: str, target: str, schema: pa.Schema, layout: Layout, threads: int) -> Writer:
        """A writer of rows with ``schema`` to the empty file ``path`` (on its way to ``target``,
        as messages name it); parquet as ``layout`` says, on up to ``threads`` threads. It opens
        ``path`` to append, not to truncate: ext4 writes to disk, before ``close`` returns, a file
        that was truncated to empty (its ``auto_da_alloc``)."""


def _discovered() -> dict[str, Format]:
    """The ``FORMAT`` of each module in this package, by name, in their ``order``."""
    found = [importlib.import_module(f"{__name__}.{path.stem}").FORMAT for path in modules(os.path.dirname(__file__))]
    return {fmt.name: fmt for fmt in sorted(found, key=lambda fmt: (fmt.order, fmt.name))}


BY_NAME = _discovered()
FORMATS = tuple(BY_NAME)
SUFFIXES = {suffix: fmt.name for fmt in BY_NAME.values() for suffix in fmt.suffixes}


def named(name: str) -> Format:
    """The format called ``name``."""
    return BY_NAME[name]


def check_name(name: str | None, parameter: str) -> None:
    """Refuse a format name that no format has, given as ``parameter``."""
    if name is not None and name not in BY_NAME:
        raise UsageError(f"unknown `{parameter}` {name!r} (valid: {', '.join(FORMATS)})")


def format_from_name(path: str) -> str | None:
    """The name of the format whose suffix ``path`` has, else None."""
    return SUFFIXES.get(Path(path).suffix.lower())


def titles() -> str:
    """The formats' titles, as messages list them (``parquet or JSON Lines``)."""
    names = [fmt.title for fmt in BY_NAME.values()]
    return " or ".join(names) if len(names) <= 2 else f"{', '.join(names[:-1])} or {names[-1]}"


def detect(part: Part) -> str:
    """A file's format from its suffix, else from its first bytes (formats we do not read are
    named, not misread)."""
    suffix = Path(part.name).suffix.lower()
    if suffix in SUFFIXES:
        return SUFFIXES[suffix]
    if suffix in UNSUPPORTED:
        raise InputError(
            f"{part.name}: {UNSUPPORTED[suffix]} is not supported; convert it to {titles()} (or pass `input_format` if it holds one of them)"
        )
    with part.open() as f:
        head = f.read(SNIFF_BYTES)
    if suffix in PICKLED or head[:1] == b"\x80":  # a pickle's protocol byte
        raise InputError(
            f"{part.name}: a pickled torch or Python file (verl's DataProto) is not read (unpickling runs its code); convert it once: {DATAPROTO_RECIPE}"
        )
    found = next((fmt.name for fmt in BY_NAME.values() if fmt.sniff(head)), None)
    if found is None:
        neither = "neither " + " nor ".join(fmt.title for fmt in BY_NAME.values())
        raise InputError(f"{part.name}: {neither} (it begins {head[:24]!r}); pass `input_format` if it is one")
    return found


def first_line(exc: Exception) -> str:
    """The first line of an exception's message (its type's name if it has none)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
