"""grpo-cli: group-relative advantages and clipped policy objectives on rollout files."""

from .api import GRPOAdvantage, RLOOAdvantage, advantages, normalize_group
from .config import AdvantageConfig
from .engines.local import advantages_file
from .errors import ColumnNotFoundError, GrpoError, InputError, UsageError

__all__ = [
    "AdvantageConfig",
    "ColumnNotFoundError",
    "GRPOAdvantage",
    "GrpoError",
    "InputError",
    "RLOOAdvantage",
    "UsageError",
    "advantages",
    "advantages_file",
    "normalize_group",
]
