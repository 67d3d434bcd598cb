"""grpo-cli: group-relative advantages and clipped policy objectives on rollout files.

The names below are imported on first use, so the ``grpo`` command loads only what its
command needs; each command's file function (``advantages_file``, ...) is its module's (see
:mod:`grpo_cli.commands`).
"""

from importlib import import_module

from . import commands

_HOMES = {
    "api": ("GRPOAdvantage", "RLOOAdvantage", "advantages", "normalize_group", "policy_objective"),
    "config": ("AdvantageConfig",),
    "errors": ("ColumnNotFoundError", "GrpoError", "InputError", "UnknownOptionError", "UsageError"),
    **{f"commands.{name}": (f"{name}_file",) for name in commands.names() if name not in commands.WITHOUT_INPUT},
    "filters": ("FilterConfig",),
    "frames": ("annotate_advantages", "annotate_objective"),
    "mismatch": ("MismatchConfig",),
    "objective.config": ("ObjectiveConfig",),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}

__all__ = sorted(_HOME)


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module 'grpo_cli' has no attribute {name!r}")
    return getattr(import_module(f".{_HOME[name]}", __name__), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
