"""Engines run kernels over an input's record batches; the math lives in :mod:`.kernels`.

An engine offers three primitives (:class:`Engine`: read columns, map a kernel over the
batches, write a pass) and decides where batches are read, computed and written:
:class:`LocalEngine` streams them in this process on a few threads, :class:`~.ray.RayEngine`
in Ray tasks. The commands are built from the primitives (:mod:`grpo_cli.passes`, the
commands' plans), so every engine runs the same kernels and merges the same partial
summaries in row order: its numbers are the local engine's.
"""

from __future__ import annotations

from ..errors import UsageError
from .base import Engine, Mapped, Progress
from .local import LocalEngine

ENGINES = ("local", "ray")


def make_engine(engine: str = "local", ray_address: str | None = None, **options) -> Engine:
    """The engine named ``engine`` with ``options`` (``threads``, ``batch_rows``, ``progress``);
    ``ray`` connects to ``ray_address`` (default: ``RAY_ADDRESS`` if set, else a local Ray)."""
    if engine == "local":
        if ray_address is not None:
            raise UsageError("`ray_address` applies to `engine` 'ray'; pass `engine` 'ray', or drop it")
        return LocalEngine(**options)
    if engine == "ray":
        from .ray import RayEngine  # imports Ray, an optional extra

        return RayEngine(address=ray_address, **options)
    raise UsageError(f"unknown `engine` {engine!r} (valid: {', '.join(ENGINES)})")


__all__ = ["ENGINES", "Engine", "LocalEngine", "Mapped", "Progress", "make_engine"]
