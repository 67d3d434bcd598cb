"""GMPO: the geometric mean of the clipped token ratios."""

import math

from .references import ratios


# the slow reference (tests/objective/references.py)
def reference(new, old, adv, config) -> float:
    d = [math.log(r) for r in ratios(new, old, config)]
    up = math.exp(sum(min(x, config.epsilon_high) for x in d) / len(d)) if d else 1.0
    down = math.exp(sum(max(x, -config.epsilon_low) for x in d) / len(d)) if d else 1.0
    return sum(a * (up if a > 0 else down) for a in adv)


REFERENCES = {"gmpo": reference}
