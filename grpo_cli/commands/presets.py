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


def _render(presets: dict, console) -> None:
    """What each preset sets: one row per option, one column per preset ("-": this tool's
    default), then where each was read and what it does not model."""
    from rich.table import Table

    from ..report import fmt

    t = Table(title="grpo presets", title_justify="left")
    t.add_column("option", style="bold")
    for name in presets:
        t.add_column(name, overflow="fold")
    for part in ("advantage", "objective"):
        for option in dict.fromkeys(k for p in presets.values() for k in getattr(p, part)):
            values = [getattr(p, part).get(option, "-") for p in presets.values()]
            t.add_row(f"--{option.replace('_', '-')}", *("off" if v is None else fmt(v) for v in values))
    console.print(t)
    for p in presets.values():
        console.print(f"{p.name}: read from {p.source}." + (f" Not modelled: {p.differs}." if p.differs else ""), markup=False, highlight=False)


def main() -> None:
    from rich.console import Console

    _render(PRESETS, Console())
