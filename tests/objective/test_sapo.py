"""SAPO: a soft, sigmoid gate on the ratio in place of the clip."""

import math

from .references import ratios


# the slow reference (tests/objective/references.py)
def reference(new, old, adv, config) -> float:
    def gate(r, tau):
        return 1 / (1 + math.exp(-tau * (r - 1))) * 4 / tau

    return sum(gate(r, config.tau_pos if a > 0 else config.tau_neg) * a for r, a in zip(ratios(new, old, config), adv))


REFERENCES = {"sapo": reference}
