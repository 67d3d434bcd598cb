"""grpo-cli: group-relative advantages and clipped policy objectives on rollout files."""

from .api import GRPOAdvantage, RLOOAdvantage, advantages, normalize_group, policy_objective
from .config import AdvantageConfig, FilterConfig, MismatchConfig, ObjectiveConfig
from .errors import ColumnNotFoundError, GrpoError, InputError, UnknownOptionError, UsageError
from .files import advantages_file, compare_file, filter_file, inspect_file, mismatch_file, objective_file
from .frames import annotate_advantages, annotate_objective

__all__ = [
    "AdvantageConfig",
    "ColumnNotFoundError",
    "FilterConfig",
    "GRPOAdvantage",
    "GrpoError",
    "InputError",
    "MismatchConfig",
    "ObjectiveConfig",
    "RLOOAdvantage",
    "UnknownOptionError",
    "UsageError",
    "advantages",
    "advantages_file",
    "annotate_advantages",
    "annotate_objective",
    "compare_file",
    "filter_file",
    "inspect_file",
    "mismatch_file",
    "normalize_group",
    "objective_file",
    "policy_objective",
]
