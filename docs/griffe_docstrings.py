"""A griffe extension for the API reference: docstrings as markdown (see ``markdown_of`` in
``hooks.py``), their doctest examples as ``pycon`` code blocks."""

from __future__ import annotations

import sys
from pathlib import Path

import griffe

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hooks import markdown_of  # noqa: E402


def fenced(text: str) -> str:
    """Each run of doctest lines (``>>>`` and the lines up to the next blank one) fenced."""
    out, inside = [], False
    for line in text.splitlines():
        if line.lstrip().startswith(">>>") and not inside:
            out.append("```pycon")
            inside = True
        elif inside and not line.strip():
            out.append("```")
            inside = False
        out.append(line)
    return "\n".join(out + (["```"] if inside else []))


class Docstrings(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fenced(markdown_of(obj.docstring.value))
