"""Reading and writing rollouts.

- :mod:`.discovery`: the files that inputs name (files, folders, globs, hive folders, URIs, stdin).
- :mod:`.formats`: one module per file format (parquet, JSON Lines) behind one interface.
- :mod:`.memory`: Arrow data in memory (tables, record batches, datasets) as a source.
- :mod:`.source`: a :class:`Source`, every part read as one dataset; :mod:`.unify`, its schema.
- :mod:`.writes`: the paths a run writes, checked before anything is read.
- :mod:`.outputs`: every output staged and committed together; :mod:`.parquet_writer`, parquet output.
"""

from .discovery import LOCAL, STDIO, Part, expand_inputs, is_uri, stdin
from .formats import FORMATS, Format, Reader, Scan, format_from_name
from .memory import open_arrow
from .outputs import Outputs, Sink, Staged, stdout
from .parquet_writer import CODECS, Layout
from .source import Source, open_source
from .unify import conform
from .writes import Writes, resolve_output_format

__all__ = [
    "CODECS",
    "FORMATS",
    "LOCAL",
    "STDIO",
    "Format",
    "Layout",
    "Outputs",
    "Part",
    "Reader",
    "Scan",
    "Sink",
    "Source",
    "Staged",
    "Writes",
    "conform",
    "expand_inputs",
    "format_from_name",
    "is_uri",
    "open_arrow",
    "open_source",
    "resolve_output_format",
    "stdin",
    "stdout",
]
