"""Chance is not a difference: how likely a stored number's 'differs' is under chance alone, and which of a book's
'differs' survive Holm's correction for the number of stored numbers compared (family-wise 5%).

Each verdict on the authors' number is a test at 5%: with 45 comparisons, about two would read 'differs' by chance
for a perfect reproduction. Each 'differs' carries the p-value of its own rule (``interval_p``: the authors' number
outside this book's 95% interval, widened by a slack; ``welch_p``: the Welch interval of the difference wholly
beyond the tolerance), and the mark under the authors' code counts a 'differs' only where Holm's step-down procedure
keeps it over the informative numbers compared (``beyond_chance``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

ALPHA = 0.05  # the family-wise error rate of the mark's 'differs'
HOLM_WORDS = (
    "a number that differs counts only where the difference survives Holm's correction for the number of "
    "informative stored numbers compared (family-wise 5%): a difference that chance alone would often give, over "
    "so many comparisons, is not counted"
)


def _two_sided(excess: float, se: float, dof: float) -> float:
    """The p-value of a difference ``excess`` beyond the band, in standard errors on ``dof`` degrees of freedom."""
    if se == 0 or not math.isfinite(se):
        return 0.0 if excess > 0 else 1.0
    return float(min(1.0, 2 * stats.t.sf(excess / se, dof)))


def interval_p(theirs: float, mean: float, low: float, high: float, n: int, slack: float = 0.0) -> float:
    """The p-value of the interval rule (the authors' number ``theirs`` outside this book's 95% interval over ``n``
    seeds, widened by ``slack``): below 0.05 exactly where the rule says 'differs'. The standard error is read from
    the interval's wider half (a percentage's interval may be clipped at 0 or 100 on one side)."""
    if n < 2:
        return 1.0
    se = max(high - mean, mean - low) / float(stats.t.ppf(0.975, n - 1))
    return _two_sided(abs(mean - theirs) - slack, se, n - 1)


def welch_p(ours: Sequence[float], theirs: Sequence[float], tolerance: float) -> float:
    """The p-value of the Welch rule (the 95% Welch interval of the difference of means wholly beyond
    ``tolerance``): below 0.05 exactly where the rule says 'differs'."""
    a, b = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    excess = abs(float(a.mean() - b.mean())) - tolerance
    if va + vb == 0:
        return 0.0 if excess > 0 else 1.0
    dof = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    return _two_sided(excess, math.sqrt(va + vb), dof)


def beyond_chance(p_values: Sequence[float], compared: int, alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down procedure: for each of the 'differs' with these p-values, whether it stands among the
    ``compared`` tests of the family (every informative number compared, the ones that reproduce included)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    kept = [False] * len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] > alpha / max(compared - rank, 1):
            break
        kept[i] = True
    return kept
