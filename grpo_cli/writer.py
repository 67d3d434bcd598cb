"""Moved to :mod:`grpo_cli.io.parquet_writer`; kept for the modules that import it from here."""

from .io.parquet_writer import CODECS, Layout

__all__ = ["CODECS", "Layout"]
