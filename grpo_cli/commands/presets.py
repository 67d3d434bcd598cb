"""`grpo presets`: the option values each --preset sets."""

from ..presets import PRESETS
from . import registered

PRESETS_EXAMPLES = """\
Examples:

  grpo presets

  COLUMNS=120 grpo presets > presets.txt
"""


@registered("presets", PRESETS_EXAMPLES)
def presets() -> None:
    """Explicit options override a preset; options a preset does not set keep their defaults."""
    from rich.console import Console

    from ..report import render_presets
    render_presets(PRESETS, Console())
