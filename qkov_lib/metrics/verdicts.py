"""A claim checked against a run, as a word with its rule: every chapter's claim table, the verdict rules, and the
numeric tolerances of the checks that compare a computation with an exact identity or a solver.

A verdict is one of four words:

- **holds**: the run supports the claim as the chapter reads it;
- **fails**: the run contradicts it;
- **undecided**: the run cannot tell, because the 95% interval over seeds straddles the claim's threshold (or a single
  seed gives no interval);
- **not evidence**: the model did not learn the task (it does not beat its trivial baseline or majority class), so
  what it attends to says nothing about the claim.

A claim about a quantity measured over seeds is read through the 95% Student-t interval of its mean (of a paired
difference, where the claim compares two conditions of the same seeds): a claimed increase above a threshold holds if
the interval lies above it, fails if the interval lies at or below it, and is undecided otherwise. A deterministic
check (an ODE, a symbolic identity, an exact instance) holds or fails.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import pandas as pd

from ..data import authors
from .chance import interval_p, welch_p
from .official import (
    DIFFERS,
    INFORMATIVE_COLUMN,
    INFORMATIVE_RULE,
    REPRODUCES,
    TOLERANCE_WORDS,
    different_quantity,
    informative,
    other_quantities,
    tally,
    tolerance,
    welch_verdict,
    why_differs,
)
from .stats import mean_ci

HOLDS, FAILS, UNDECIDED, NOT_EVIDENCE = "holds", "fails", "undecided", "not evidence"
WORDS = (HOLDS, FAILS, UNDECIDED, NOT_EVIDENCE)
COLOURS = {HOLDS: "#1a7f37", FAILS: "#cf222e", UNDECIDED: "#9a6700", NOT_EVIDENCE: "#6e7781"}  # text on white

EXACT = 1e-10  # a relative error below this is float64 rounding: the identity holds exactly
SOLVER_SLACK = 1e-9  # a bound is met when value/bound is within the ODE solver's relative tolerance of 1
CONSERVED = 1e-8  # a quantity is conserved by gradient flow when its relative drift stays below this (RK45, 1e-10)
ODE_MATCH = 1e-6  # full-matrix gradient flow and the scalar ODE agree to the solvers' tolerance

PAPER, REVIEW, CHECK = "paper", "review", "check"  # a claim of the paper; a reviewer's test; the companion's check
KINDS = (PAPER, REVIEW, CHECK)
COLUMNS = ["id", "claim", "kind", "this run", "verdict", "rule", "authors", "estimate", "low", "high", "why"]


@dataclass(frozen=True)
class Claim:
    """One row of a claim table: a short stable id (what other chapters and the summary key on), the claim in plain
    words, what this run measured, the verdict and the rule that gave it, the number that decided it with its 95%
    interval (NaN where the check is deterministic or has no single number), what kind of claim it is (the paper's,
    a reviewer's test or corollary, or this companion's own check of a derivation) and what the authors' notebooks
    stored for it (``data.authors``)."""

    id: str
    claim: str
    measured: str
    verdict: str
    rule: str
    estimate: float = math.nan
    low: float = math.nan
    high: float = math.nan
    kind: str = PAPER
    authors: str = ""
    why: str = ""  # the reason in words where the rule's clause would blame every part (``compound.each``)

    def __post_init__(self) -> None:
        if self.verdict not in WORDS:
            raise ValueError(f"a verdict is one of {', '.join(WORDS)} (got {self.verdict!r})")
        if self.kind not in KINDS:
            raise ValueError(f"a claim's kind is one of {', '.join(KINDS)} (got {self.kind!r})")


def claim_table(claims: Iterable[Claim]) -> pd.DataFrame:
    """The chapter's claims as a table (columns ``COLUMNS``), the form every chapter saves as ``claims``."""
    return pd.DataFrame(
        [
            [c.id, c.claim, c.kind, c.measured, c.verdict, c.rule, c.authors, c.estimate, c.low, c.high, c.why]
            for c in claims
        ],
        columns=COLUMNS,
    )


PERCENT = (0.0, 100.0)  # the bounds of a percentage: accuracy, ACMC, AC, MRTA, a cell's share of examples
PROBABILITY = (0.0, 1.0)  # the bounds of a probability or a share


@dataclass(frozen=True)
class Interval:
    """The mean of per-seed values and its 95% Student-t interval (low = high = mean for a single value: no
    interval)."""

    mean: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float], bounds: tuple[float, float] | None = None) -> Interval:
        """The t interval of the values' mean; for a bounded quantity (``bounds``: ``PERCENT``, ``PROBABILITY``)
        the t interval clipped to the bounds, so that an accuracy near 100% never reads '98.7 [91.7, 105.6]'.

        Why clipping: the true mean of a bounded quantity lies within its bounds, so the clipped interval
        contains it whenever the t interval does: the coverage stays exactly the t interval's 95% (a bootstrap
        interval has less with five seeds; a logit-scale interval cannot take a seed at exactly 0 or 100% and moves
        both ends). Every interval that does not reach a bound is unchanged, and so is every verdict against a
        threshold strictly inside the bounds: an interval that straddled such a threshold still straddles it and
        stays undecided. Clipping changes a verdict only for a threshold at or beyond a bound, where the bounds
        themselves decide (an accuracy is always at most 100%). A value outside the bounds is an error: the
        quantity is not the one the bounds describe."""
        v = np.asarray(values, dtype=float)
        if bounds is not None:
            lo, hi = bounds
            outside = v[(v < lo) | (v > hi)]
            if outside.size:
                raise ValueError(f"a value outside the bounds [{lo:g}, {hi:g}] of the quantity: {outside[0]!r}")
        mean, half = mean_ci(v)
        if v.size < 2:
            return cls(mean, mean, mean, 1)
        low, high = mean - half, mean + half
        if bounds is not None:
            low, high = max(low, bounds[0]), min(high, bounds[1])
        return cls(mean, low, high, int(v.size))

    @property
    def numbers(self) -> tuple[float, float, float]:
        """(estimate, low, high), the last three fields of a ``Claim``."""
        return self.mean, self.low, self.high

    def text(self, digits: int = 1, signed: bool = False) -> str:
        """'12.3 [10.1, 14.5]' (signed: '+2.3 [+0.4, +4.1]'); the mean alone for one seed. A value that rounds to
        zero is written as zero, never '-0.0'."""

        def f(x: float) -> str:
            x = 0.0 if round(x, digits) == 0 else x
            return f"{x:{'+' if signed else ''}.{digits}f}"

        return f(self.mean) if self.n < 2 else f"{f(self.mean)} [{f(self.low)}, {f(self.high)}]"


def above(interval: Interval, threshold: float) -> str:
    """A claimed value above ``threshold``: holds if the whole interval is above it, fails if the whole interval is
    at or below it, undecided if it straddles it (or there is one seed and no interval)."""
    if interval.n < 2:
        return UNDECIDED
    return HOLDS if interval.low > threshold else FAILS if interval.high <= threshold else UNDECIDED


def at_least(interval: Interval, threshold: float) -> str:
    """A claimed value of at least ``threshold``: holds if the interval is at or above it, fails if it lies below
    it, undecided otherwise."""
    if interval.n < 2:
        return UNDECIDED
    return HOLDS if interval.low >= threshold else FAILS if interval.high < threshold else UNDECIDED


def below(interval: Interval, threshold: float) -> str:
    """A claimed value below ``threshold``: holds if the whole interval is below it, fails if the whole interval is
    at or above it, undecided otherwise."""
    if interval.n < 2:
        return UNDECIDED
    return HOLDS if interval.high < threshold else FAILS if interval.low >= threshold else UNDECIDED


def at_most(interval: Interval, threshold: float) -> str:
    """A claimed value of at most ``threshold``: holds if the interval is at or below it, fails if it lies above it,
    undecided otherwise."""
    if interval.n < 2:
        return UNDECIDED
    return HOLDS if interval.high <= threshold else FAILS if interval.low > threshold else UNDECIDED


# REPRODUCES, DIFFERS (``official``): whether the `official` profile gives back an authors' number
REPRODUCTION_RULE = (
    "reproduces: the authors' stored number lies inside this book's 95% interval over seeds under the official "
    f"profile (a number the authors stored for one seed: inside that interval widened by {TOLERANCE_WORDS}, since "
    "one seed's value scatters around the mean); differs: it lies outside; "
    "undecided: the official profile has not been run, its run departs from the official profile's settings (an "
    "override, or a size scaled down: not the authors' experiment), its models did not learn the task (not "
    "evidence), it has one seed (no interval), or the authors stored no number"
)


SINGLE_RUN_TOLERANCE = 0.10  # two single runs (one seed each side): within this share of the authors' number
SINGLE_RUN_RULE = (
    "two single runs (the authors' one run against this book's one seed under official): reproduces "
    f"when within {SINGLE_RUN_TOLERANCE:.0%} of the authors' number, else differs"
)


def reproduces(
    authors: float | None,
    official: Interval | None,
    authors_seeds: int,
    unit: str = "%",
    evidence: bool = True,
    single_runs: bool = False,
) -> str:
    """Whether this book under the ``official`` profile (the authors' setup) gives back a number the authors'
    notebooks stored (``REPRODUCTION_RULE``): ``authors`` (None: nothing stored), the mean over ``authors_seeds``
    seeds, against ``official``, this build's 95% interval over seeds (None: not run); ``evidence`` False when
    the official models did not learn the task. A number over several seeds reproduces when it lies inside the
    interval; a single seed's number when it lies inside the interval widened by ``official.tolerance``
    (one seed scatters around the mean by more than the mean's interval does). With ``single_runs``, a number of
    one authors' run against one official seed (no interval on either side) is compared within
    ``SINGLE_RUN_TOLERANCE`` of the authors' number (``SINGLE_RUN_RULE``)."""
    if authors is None or official is None or not evidence or math.isnan(authors):
        return UNDECIDED
    if official.n == 1 and authors_seeds == 1 and single_runs:
        return REPRODUCES if abs(official.mean - authors) <= SINGLE_RUN_TOLERANCE * abs(authors) else DIFFERS
    if official.n < 2:
        return UNDECIDED
    slack = tolerance(authors, unit) if authors_seeds == 1 else 0.0
    return REPRODUCES if official.low - slack <= authors <= official.high + slack else DIFFERS


COLOURS |= {REPRODUCES: COLOURS[HOLDS], DIFFERS: COLOURS[FAILS]}  # the reproduction words, coloured alike (``word``)
PRINTED_RULE = (
    "a number without seeds on either side (an ODE's solution): reproduces when this book's, rounded to "
    "the digits the authors printed, is theirs, else differs"
)


def as_printed(authors: float | None, ours: float | None) -> str:
    """Whether a number without seeds on either side (an ODE's solution, deterministic) gives back the number the
    authors printed (``PRINTED_RULE``): within half a unit of its last printed digit (0.149: 0.1485 to 0.1495);
    undecided when either is missing."""
    if authors is None or ours is None or math.isnan(authors) or math.isnan(ours):
        return UNDECIDED
    exponent = Decimal(repr(authors)).as_tuple().exponent
    if not isinstance(exponent, int):  # 'n', 'N' or 'F': a NaN (excluded above) or an infinity
        raise ValueError(f"the authors' printed number {authors!r} is not finite; it has no last digit")
    half = 0.5 * 10.0**exponent
    return REPRODUCES if abs(ours - authors) <= half * (1 + 1e-9) else DIFFERS


OFFICIAL_COLUMN = "this book under official"
VERDICT_COLUMN = "official gives the authors' number back?"


def beside_official(
    table: pd.DataFrame,
    keys: Sequence[str],
    official: Mapping[str, Interval] | None,
    text: Callable[[Interval], str] | Mapping[str, Callable[[Interval], str]],
    single_runs: bool = False,
    printed: bool = False,
    evidence: bool = True,
    samples: Mapping[str, Sequence[float]] | None = None,
    different: Mapping[str, str] | None = None,
    others: Mapping[str, Sequence[str]] | None = None,
) -> pd.DataFrame:
    """A table of the paper, the authors' notebooks and this run (``authors.three_way`` over ``keys``) with this
    book under ``official`` (``official``: key -> its interval over seeds; None: not run; a key it lacks: not run),
    whether each stored number is informative (``official.informative``) and, per key, whether it gives the
    authors' number back (``reproduces``; ``printed``: numbers without seeds, ``as_printed``; where the authors
    printed each seed's number and ``samples`` holds this book's per-seed values under official, both spreads,
    ``official.welch_verdict``). ``text`` writes an interval: one function for every key, or one per key (a
    mapping: keys of different units or digits); ``evidence`` False when no verdict may be drawn from the official
    run (its guard: its models did not learn, or it is not the authors' experiment), so every verdict is
    undecided. ``different``: key -> why this book under official measures another quantity than the authors'
    stored one (``official.different_quantity``): not informative, and undecided. ``others``: key -> the keys of
    the same number under the other condition, where they are not '<stem>.baseline|faster' (``informative``)."""
    different = different or {}
    chance: dict[str, float] = {}  # key -> the p-value of its 'differs' (``metrics.chance``; 0: deterministic)

    def verdict(key: str) -> str:
        if key in different:
            return UNDECIDED
        theirs, seeds, unit = authors.number(key)
        ours = official.get(key) if official is not None else None
        if printed:
            return as_printed(theirs, None if ours is None or not evidence else ours.mean)
        spread, mine = authors.per_seed(key), (samples or {}).get(key)
        if evidence and spread is not None and mine is not None and len(mine) > 1:
            word = welch_verdict(mine, spread, unit)
            if word == DIFFERS:
                chance[key] = welch_p(mine, spread, tolerance(float(np.mean(spread)), unit))
            return word
        word = reproduces(theirs, ours, seeds, unit, evidence=evidence, single_runs=single_runs)
        if word == DIFFERS and theirs is not None and ours is not None:
            slack = tolerance(theirs, unit) if seeds == 1 else 0.0
            chance[key] = interval_p(theirs, ours.mean, ours.low, ours.high, ours.n, slack) if ours.n > 1 else 0.0
        return word

    def shown(key: str, interval: Interval) -> str:
        return (text[key] if isinstance(text, Mapping) else text)(interval)

    out = table.assign(
        **{
            OFFICIAL_COLUMN: [
                shown(k, official[k]) if official is not None and k in official else "not run" for k in keys
            ],
            INFORMATIVE_COLUMN: [
                different_quantity(different[k])
                if k in different
                else informative(k, official, (others or {}).get(k, ()))
                for k in keys
            ],
            VERDICT_COLUMN: [verdict(k) for k in keys],
        }
    )
    out.attrs["keys"] = list(keys)  # which stored number each row is (``tally_line`` names those that differ)
    out.attrs["p"] = chance  # the p-value of each 'differs' (the summary's mark weighs them against chance)
    out.attrs["different"] = {k: different[k] for k in keys if k in different}  # and those measured another way
    return out


def every(words: Iterable[str]) -> str:
    """A claim made of parts that must all hold: holds if every part holds, fails if any part fails, else
    undecided."""
    words = list(words)
    return HOLDS if all(w == HOLDS for w in words) else FAILS if FAILS in words else UNDECIDED


def check(holds: bool) -> str:
    """A deterministic check's word."""
    return HOLDS if holds else FAILS


def weakest(parts: Sequence[Interval], claimed_up: bool = True) -> Interval:
    """Of several intervals checked against the same threshold, the one that decides: the lowest for a claimed
    increase, the highest for a claimed decrease."""
    return min(parts, key=lambda i: i.low) if claimed_up else max(parts, key=lambda i: i.high)


def rule(claimed: str, quantity: str, threshold: str, paired: bool = False) -> str:
    """The rule beside an interval verdict, in words: ``claimed`` is 'above', 'at least', 'below' or 'at most'."""
    what = f"the 95% interval over seeds of {'the paired difference in ' if paired else ''}{quantity}"
    side = {
        "above": ("lies above", "lies at or below"),
        "at least": ("lies at or above", "lies below"),
        "below": ("lies below", "lies at or above"),
        "at most": ("lies at or below", "lies above"),
    }[claimed]
    return (
        f"holds if {what} {side[0]} {threshold}; fails if it {side[1]} {threshold}; undecided if it straddles "
        f"{threshold} or the run has one seed (no interval)"
    )


def not_evidence(table: pd.DataFrame, reason: str) -> pd.DataFrame:
    """Every claim of ``table`` marked 'not evidence', with the reason (the model did not learn the task) first in
    its rule."""
    return table.assign(verdict=NOT_EVIDENCE, rule=f"not evidence: {reason}; otherwise " + table["rule"])


CLAIM_COLUMNS = (
    ("claim", "claim"),
    ("this run", "this run (mean and 95% interval over seeds)"),
    ("rule", "how the verdict is read"),
)


def reason(verdict: str, rule_text: str) -> str:
    """The clause of a rule that gave ``verdict`` ('holds if X; fails if Y; undecided if Z' -> 'X' for holds), or the
    whole rule where it has no such clause."""
    if verdict == NOT_EVIDENCE:
        return rule_text.split("; otherwise", 1)[0].removeprefix("not evidence: ")
    parts = rule_text.split("; ")
    subject = parts[0].removeprefix("holds if ").split(" lies ")[0]
    for part in parts:
        if part.startswith(f"{verdict} if "):
            clause = part.removeprefix(f"{verdict} if ")
            return subject + clause.removeprefix("it") if clause.startswith("it ") else clause
    if verdict == FAILS and rule_text.startswith("holds if "):
        return "not so: " + rule_text.removeprefix("holds if ")
    return rule_text


def counts(verdicts: Iterable[str]) -> dict[str, int]:
    """How many claims have each word, in the order of ``WORDS``."""
    verdicts = list(verdicts)
    return {w: verdicts.count(w) for w in WORDS}


def tally_line(table: pd.DataFrame, after: str = "") -> str:
    """A comparison table's tally for a page, in Markdown (``official.tally``): 'Under official: reproduces k of n
    informative (d differ, u undecided; m compared), of N stored numbers', the informative rule and ``after`` (the
    page's own rule or note); then, each as a paragraph, the quantities official measures another way and why
    official differs from each number it differs from, one item each."""
    told = tally(list(table[VERDICT_COLUMN]), list(table[INFORMATIVE_COLUMN]))
    keys = table.attrs.get("keys", [])
    names = [f"{authors.table().loc[k, 'condition']}, {authors.table().loc[k, 'quantity']}" for k in keys]
    why = why_differs(keys, list(table[VERDICT_COLUMN]), names)
    other = other_quantities(table.attrs.get("different", {}))
    parts = [f"Under `official`: {told}, of {len(table)} stored numbers; {INFORMATIVE_RULE}. {after}".strip()]
    parts += [other] if other else []
    parts += ["Why official differs where it does:\n\n" + "\n".join(f"- {w}." for w in why)] if why else []
    return "\n\n".join(parts)


REPLICATED, NOT_REPLICATED = "[Re]", "[¬Re]"  # ReScience's marks: a replication, a failed one
REPLICATION_RULE = (
    "the report is marked [Re] (a successful replication) if none of the paper's headline claims fails and more "
    "than half of them hold in this build; otherwise it is marked [¬Re]"
)


def replication(verdicts: Iterable[str]) -> str:
    """ReScience's mark for the headline verdicts (``REPLICATION_RULE``): [Re] if none fails and more than half
    hold, else [¬Re]; an undecided or not-evidence claim counts as not holding. An empty list is refused."""
    words = list(verdicts)
    unknown = sorted(set(words) - set(WORDS))
    if not words or unknown:
        raise ValueError(
            f"replication needs the headline verdicts, each one of {', '.join(WORDS)}; got {unknown or 'none'}"
        )
    words_counted = counts(words)
    return REPLICATED if words_counted[FAILS] == 0 and 2 * words_counted[HOLDS] > len(words) else NOT_REPLICATED
