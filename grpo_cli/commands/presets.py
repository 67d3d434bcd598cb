"""The option values each --preset sets, and the framework source they were read from.

Explicit options override a preset; options a preset does not set keep their defaults.
"""

from ..presets import PRESETS

OPTIONS = ()
EXAMPLES = """\
Examples:
  grpo presets
  COLUMNS=120 grpo presets > presets.txt
"""


def main() -> None:
    from rich.console import Console

    from ..report import render_presets
    render_presets(PRESETS, Console())
