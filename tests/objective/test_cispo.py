"""CISPO: the clipped ratio, held constant, weights the log-prob."""

from .references import clip, ratios


# the slow reference (tests/objective/references.py)
def reference(new, old, adv, config) -> float:
    return sum(clip(r, config) * a * n for r, a, n in zip(ratios(new, old, config), adv, new))


REFERENCES = {"cispo": reference}
