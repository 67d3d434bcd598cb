"""Engines run a plan over its input; the math lives in :mod:`.kernels`.

An engine decides where batches are read, computed and written: :class:`LocalEngine`
streams record batches in this process on a few threads. Another engine (e.g. one on a
cluster) implements the same two methods with the same kernels and partial summaries, so its
numbers are the local engine's.
"""

from __future__ import annotations

from ..errors import UsageError
from .base import Engine, Progress
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


__all__ = ["ENGINES", "Engine", "LocalEngine", "Progress", "make_engine"]
