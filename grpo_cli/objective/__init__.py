"""Policy objectives on flat token buffers. Pure: numpy arrays in, arrays out.

The modules: :mod:`.ratio` (token or sequence log-ratios), :mod:`.losses` (the loss
registry; one module per loss, e.g. :mod:`.ppo`), :mod:`.aggregation` (how token terms become
one number) and :mod:`.terms` (all of it composed per row). They use rows of tokens
(:mod:`grpo_cli.tokens`) and the KL estimators (:mod:`grpo_cli.kl`), which the advantages use
too. Adding a loss is one module with one registered function (found by
:func:`grpo_cli.plugins.import_registering`; listed by name), and its test, which holds its
slow reference (``REFERENCES`` in ``tests/objective/test_<module>.py``).
"""

from ..plugins import import_registering
from .aggregation import AGGREGATIONS, ALIASES, Totals, aggregate
from .losses import LOSSES, Flag, Loss, LossInputs, SignedFactors
from .ratio import RATIO_LEVELS
from .terms import block_terms, row_terms

import_registering(__name__, __path__[0], "@loss(", LOSSES)

__all__ = [
    "AGGREGATIONS",
    "ALIASES",
    "LOSSES",
    "RATIO_LEVELS",
    "Flag",
    "Loss",
    "LossInputs",
    "SignedFactors",
    "Totals",
    "aggregate",
    "block_terms",
    "row_terms",
]
