"""Policy objectives on flat token buffers. Pure: numpy arrays in, arrays out.

The modules: :mod:`.ratio` (token or sequence log-ratios), :mod:`.losses` (the loss
registry; one module per loss, e.g. :mod:`.ppo`), :mod:`.aggregation` (how token terms become
one number) and :mod:`.terms` (all of it composed per row). They use rows of tokens
(:mod:`grpo_cli.tokens`) and the KL estimators (:mod:`grpo_cli.kl`), which the advantages use
too. Adding a loss is one module with one registered function, plus its import below and its
slow reference in ``tests/objective/references.py``.
"""

from . import ppo, sapo, cispo, gmpo, gpg  # noqa: F401, I001  (each loss registers itself; this order is the listing order)
from .aggregation import AGGREGATIONS, ALIASES, Totals, aggregate
from .losses import LOSSES, Flag, Loss, LossInputs, SignedFactors
from .ratio import RATIO_LEVELS
from .terms import block_terms, row_terms

__all__ = [
    "AGGREGATIONS", "ALIASES", "LOSSES", "RATIO_LEVELS", "Flag", "Loss", "LossInputs", "SignedFactors",
    "Totals", "aggregate", "block_terms", "row_terms",
]
