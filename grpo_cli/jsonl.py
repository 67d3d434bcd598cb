"""Moved to :mod:`grpo_cli.io.formats.jsonl`; this name is that module (kept for the modules that
import it from here)."""

import sys

from .io.formats import jsonl

sys.modules[__name__] = jsonl
