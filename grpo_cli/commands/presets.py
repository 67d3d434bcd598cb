"""The option values each --preset sets, and the framework release they were read from.

Without --preset: one table, the base values of every preset, its framework, version and source.
With --preset NAME: what that preset sets for each estimator and each loss, what the framework
ships and the options that reproduce it, and what no option reproduces yet, with the reason.
Explicit options override a preset; options a preset does not set keep their defaults.
"""

import inspect
from typing import Any

from .. import options as o
from ..errors import UsageError
from ..process import drop_stdout
from ..presets import PRESETS, lookup

OPTIONS = (o.PRESET.told("Show what this preset sets for every estimator and loss, and what its framework ships."),)
EXAMPLES = """\
Examples:

  grpo presets

  grpo presets --preset verl@0.7

  COLUMNS=120 grpo presets > presets.txt
"""


NEEDS = "needs"  # a loss the preset cannot resolve alone: what it needs given


def settings(name: str) -> dict[str, dict[str, dict[str, Any]]]:
    """What preset ``name`` resolves to for each estimator and each loss: the options whose
    value the preset (or the loss's own definition) sets, as the configuration resolves them."""
    from .. import estimators
    from ..config import AdvantageConfig
    from ..objective import LOSSES
    from ..objective.config import ObjectiveConfig

    preset = lookup(name)
    out: dict[str, dict[str, dict[str, Any]]] = {"estimator": {}, "loss": {}}
    for estimator, spec in estimators.ESTIMATORS.items():
        specific, base = preset.values("advantage", estimator)
        config = AdvantageConfig(preset=preset.name, estimator=estimator)
        skip = ({"std", "eps"} if config.scale == "none" else set()) | (set() if spec.grouped and spec.sums is None else {"singleton"})
        out["estimator"][estimator] = _shown(config.figures, {k: v for k, v in {**base, **specific}.items() if k not in skip})
    for loss, defined in LOSSES.items():
        specific, base = preset.values("objective", loss)
        chosen = {**base, **dict(defined.defaults), **specific}
        if "epsilon" in chosen:  # the figures give each side
            chosen |= {side: chosen.get(side, chosen["epsilon"]) for side in ("epsilon_low", "epsilon_high")}
        try:
            out["loss"][loss] = _shown(ObjectiveConfig(preset=preset.name, loss=loss).figures, chosen)
        except UsageError as needs:  # a loss with an option only its user gives (dro's beta)
            out["loss"][loss] = {NEEDS: str(needs)}
    return out


def _shown(figures: dict, chosen: dict) -> dict[str, Any]:
    """The resolved ``figures`` that hold the value ``chosen`` for them (the others do not apply, or were given)."""
    return {k: v for k, v in figures.items() if k in chosen and k not in ("estimator", "loss") and v is not None and v == chosen[k]}


def shown_text(values: dict[str, Any]) -> str:
    """The options as they are typed (``-``: none; or what the loss needs given)."""
    from ..report import fmt

    if NEEDS in values:
        return values[NEEDS].replace("`", "")

    return " ".join(f"--{k.replace('_', '-')} {fmt(v)}" for k, v in values.items()) or "-"


def _render_all(console) -> None:
    """One row per option, one column per preset ("-": this tool's default); then each
    preset's framework, version and source."""
    from rich.table import Table

    from ..report import fmt

    t = Table(title="grpo presets", title_justify="left")
    t.add_column("option", style="bold", overflow="fold")
    for name in PRESETS:
        t.add_column(name, overflow="fold")
    t.add_row("framework", *(p.framework for p in PRESETS.values()))
    t.add_row("version", *(p.version for p in PRESETS.values()))
    for part in ("advantage", "objective"):
        for option in dict.fromkeys(k for p in PRESETS.values() for k in getattr(p, part)):
            values = [getattr(p, part).get(option, "-") for p in PRESETS.values()]
            t.add_row(f"--{option.replace('_', '-')}", *("off" if v is None else fmt(v) for v in values))
    console.print(t)
    for p in PRESETS.values():
        console.print(f"{p.name}: {p.framework} {p.version}, read from {p.source}.", markup=False, highlight=False)
    console.print("grpo presets --preset NAME: what NAME sets for each estimator and loss.", markup=False, highlight=False)


def _render_one(name: str, console) -> None:
    from rich.table import Table

    preset = lookup(name)
    console.print(f"{preset.name}: {preset.framework} {preset.version}, read from {preset.source}.", markup=False, highlight=False)
    for kind, values in settings(name).items():
        t = Table(title=f"--preset {preset.name} --{kind} NAME", title_justify="left")
        t.add_column(kind, style="bold")
        t.add_column("what the preset sets", overflow="fold")
        for key, shown in values.items():
            t.add_row(key, shown_text(shown))
        console.print(t)
    t = Table(title=f"what {preset.framework} {preset.version} ships", title_justify="left")
    t.add_column("name", overflow="fold")
    t.add_column(f"--preset {preset.name} and", overflow="fold")
    for key, form in preset.ships.items():
        t.add_row(key, form)
    for key, why in preset.missing.items():
        t.add_row(key, f"not reproduced: {why}")
    console.print(t)


def main(**given: Any) -> None:
    from rich.console import Console

    class Stdout(Console):
        def on_broken_pipe(self) -> None:  # the reader left (`grpo presets | head`): quiet, 141, as the data commands
            drop_stdout()
            raise SystemExit(141)

    name = o.values(OPTIONS, given).get("preset")
    if name is None:
        _render_all(Stdout())
    else:
        _render_one(name, Stdout())


main.__signature__ = inspect.Signature([option.parameter for option in OPTIONS])  # type: ignore[attr-defined]
main.__annotations__ = {option.name: option.parameter.annotation for option in OPTIONS}
