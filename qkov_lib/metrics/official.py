"""One guard for every comparison with the authors' stored numbers: whether a run under the ``official`` profile is
the authors' experiment (its parameters are the official profile's, at the authors' sizes) and whether its models
learned the task. A chapter page and the summary both read an official run through ``official_unit`` and draw a
reproduction verdict only where its ``Guard`` is ``comparable``; otherwise every verdict reads *undecided* and the
page says why (``Guard.note``)."""

from __future__ import annotations

import functools
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from ..core.chapter import as_dict, name_of, resolve
from ..data import authors
from .chance import HOLM_WORDS, beyond_chance

OFFICIAL = "official"  # the profile of the authors' setup
AUTHORS_SCALE: dict[str, dict[str, Any]] = {  # per chapter, the sizes of the authors' run its `official` profile
    # scales down to fit a CPU (None: every question): an official run at other sizes is not their experiment
    "squad": {"max_train": None, "max_test": None, "epochs": 100}
}
REPRODUCES, DIFFERS, UNDECIDED_WORD = "reproduces", "differs", "undecided"  # as ``verdicts`` spells them
NOT_CHECKED = "its parameters were not recorded, so they cannot be checked against the official profile's"


def authors_parameters(module: types.ModuleType) -> dict[str, Any]:
    """The parameters of the authors' experiment for a chapter module: its ``official`` profile's, with the sizes
    that profile scales down set back to the authors' (``AUTHORS_SCALE``)."""
    return as_dict(resolve(module, OFFICIAL)[1]) | AUTHORS_SCALE.get(name_of(module), {})


def _value(value: Any) -> str:
    """A parameter's value in words: 'all' for None, thousands separated for an integer."""
    if value is None:
        return "all"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else repr(value)


def departures(module: types.ModuleType, parameters: Mapping[str, Any] | None) -> tuple[str, ...]:
    """How a run of ``module`` with ``parameters`` (``Chapter.params``, or a unit's metadata) departs from the
    authors' experiment (``authors_parameters``), one phrase per parameter ('epochs 1 (theirs: 30)'): any override
    of the official profile, every size it scales down, and every parameter the run did not record (a unit written
    before that parameter existed ran without it: 'init not recorded (theirs: 'xavier')'); one phrase saying so when
    the parameters are unknown."""
    if parameters is None:
        return (NOT_CHECKED,)
    return tuple(
        f"{name} {_value(parameters[name])} (theirs: {_value(full)})"
        if name in parameters
        else f"{name} not recorded (theirs: {_value(full)})"
        for name, full in authors_parameters(module).items()
        if name not in parameters or _plain(parameters[name]) != _plain(full)
    )


def _plain(value: Any) -> Any:
    """A value as its metadata reads back (tuples as lists), so that a run's and a unit's compare alike."""
    return [_plain(v) for v in value] if isinstance(value, (tuple, list)) else value


@dataclass(frozen=True)
class Guard:
    """Whether an official run may be set against the authors' numbers: how it departs from their experiment
    (``departures``; empty: it is theirs) and why its models are not evidence ('' : they learned the task)."""

    departures: tuple[str, ...] = ()
    not_learned: str = ""

    @property
    def comparable(self) -> bool:
        """Its models learned and it is the authors' experiment: a reproduction verdict may be drawn."""
        return not self.departures and not self.not_learned

    def learned(self, why_not: str) -> Guard:
        """This guard with a chapter's not-learned reason ('' where its models learned)."""
        return replace(self, not_learned=why_not) if why_not else self

    @property
    def reason(self) -> str:
        """Why no verdict is drawn, in a short phrase ('' where one is)."""
        parts = []
        if self.departures:
            parts.append("not the authors' experiment: " + ", ".join(self.departures))
        if self.not_learned:
            parts.append(f"not evidence: {self.not_learned}")
        return "; ".join(parts)

    def note(self, command: str = "") -> str:
        """What a page says below its table beside the authors' numbers when no verdict is drawn ('' otherwise):
        why, and the command that runs the authors' experiment."""
        if self.comparable:
            return ""
        rerun = f" `{command}` runs the authors' experiment." if command and self.departures else ""
        return (
            f"No reproduction verdict is drawn from the official run read here ({self.reason}): every verdict reads "
            f"*undecided*.{rerun}"
        )


@dataclass(frozen=True)
class OfficialUnit:
    """A chapter's run under ``official``: its tables and its guard (the departures; a chapter adds whether its
    models learned, ``Guard.learned``)."""

    tables: Mapping[str, pd.DataFrame]
    guard: Guard


def full_size_command(module: types.ModuleType) -> str:
    """The command that runs a chapter's official profile at the authors' sizes (``AUTHORS_SCALE``)."""
    name = name_of(module)
    sizes = " ".join(f"-p {k} {v}" for k, v in AUTHORS_SCALE.get(name, {}).items())
    return f"python -m qkov_lib reproduce --profile {OFFICIAL} --only {name} {sizes}".strip()


# ---- which stored numbers can tell the authors' experiment from another, and how many of them come back ----

NEAR_BOUND = 1.0  # a share within this many points of 0% or 100%: any model whose mass lies elsewhere reaches it
INFORMATIVE, INFORMATIVE_COLUMN = "yes", "informative?"
INFORMATIVE_RULE = (
    "a stored number is informative when it can tell the authors' experiment from another: not when nothing is "
    f"stored, not a share within {NEAR_BOUND:g} point of 0% or 100% (any trained model reaches a test accuracy of "
    "100% on the synthetic task, and any model below a bin's attention reaches 0% in it), and not when the other "
    "condition's official interval (baseline against faster query-key learning) holds it too, and not when this "
    "book under official measures another quantity than the one the authors stored (the line below the table says "
    "which)"
)
CONDITIONS = ("baseline", "faster")


def informative(key: str, official: Mapping[str, Any] | None = None, others: Sequence[str] = ()) -> str:
    """Whether the authors' stored number ``key`` is informative (``INFORMATIVE_RULE``): 'yes', or 'no: ' and why.
    ``official``: key -> this book's ``Interval`` under official (None: not run), for the other condition's check;
    ``others``: the keys of the same number under the other condition (default: '<stem>.baseline' for
    '<stem>.faster' and back; Figure 2: the panel it speeds up, or the panels that speed it up)."""
    theirs, _, unit = authors.number(key)
    if theirs is None:
        return "no: nothing stored"
    if unit == "%" and min(theirs, 100 - theirs) <= NEAR_BOUND:
        return f"no: a share within {NEAR_BOUND:g} point of {'0' if theirs <= 50 else '100'}%, reached by any model"
    stem, _, condition = key.rpartition(".")
    if not others and condition in CONDITIONS:
        others = (f"{stem}.{CONDITIONS[1 - CONDITIONS.index(condition)]}",)
    for other in ((official or {}).get(k) for k in others):
        if other is not None and other.n > 1 and other.low <= theirs <= other.high:
            return "no: the other condition's official interval holds it too"
    return INFORMATIVE


def different_quantity(why: str) -> str:
    """The informative column's words for a stored number that this book under official does not measure the
    authors' way (``why``: how its quantity differs, said once below the table by ``other_quantities``): no
    reproduction verdict is drawn from it."""
    return "no: another quantity under official (below the table)"


def other_quantities(different: Mapping[str, str]) -> str:
    """The sentence below a comparison table naming each stored quantity official measures another way and how
    (``different``: key -> why), each quantity once; '' when there is none."""
    told: dict[str, str] = {}
    for key, why in different.items():
        told.setdefault(str(authors.table().loc[key, "quantity"]), why)
    parts = [f"{quantity} ({why})" for quantity, why in told.items()]
    return ("Another quantity under official, so no verdict: " + "; ".join(parts) + ".") if parts else ""


DIFFERENCES = Path(__file__).with_name("authors_differences.csv")  # why official differs where it does
CAUSES = ("a setting", "a measurement", "the data", "chance", "a failure to reproduce")


@functools.cache
def differences() -> dict[str, tuple[str, str]]:
    """Why this book under official differs from a stored number, found by reading both runs: key -> (cause, one of
    ``CAUSES`` by its short name, and the explanation in words)."""
    table = pd.read_csv(DIFFERENCES, keep_default_na=False)
    wrong = sorted(set(table["cause"]) - set(CAUSES)) + sorted(set(table["key"]) - set(authors.table().index))
    if wrong:
        raise ValueError(f"{DIFFERENCES.name}: {wrong} is no cause of {CAUSES} nor a stored number's key; fix the row")
    return {str(row.key): (str(row.cause), str(row.explanation)) for row in table.itertuples()}


def why_differs(keys: Sequence[str], verdicts: Sequence[str], names: Sequence[str]) -> list[str]:
    """For each stored number official differs from (``names``: each row's name in words), its cause and explanation
    (``differences``), or that it is not yet explained; one item each, none when none differs."""
    told = differences()
    return [
        f"{name} (cause: {told[key][0]}): {told[key][1]}" if key in told else f"{name}: not yet explained"
        for key, verdict, name in zip(keys, verdicts, names)
        if verdict == DIFFERS
    ]


def _informative_counts(verdicts: Sequence[str], informative_words: Sequence[str]) -> tuple[int, int, int]:
    """(n, k, d): the informative stored numbers (``informative``), how many reproduce, how many differ."""
    useful = [v for v, i in zip(verdicts, informative_words) if i == INFORMATIVE]
    return len(useful), useful.count(REPRODUCES), useful.count(DIFFERS)


def _differ(d: int) -> str:
    return f"{d} {'differs' if d == 1 else 'differ'}"


def tally(verdicts: Sequence[str], informative_words: Sequence[str]) -> str:
    """'reproduces k of n informative (d differ, u undecided; m compared)': the informative stored numbers
    (``informative``), as ``code_replication`` counts them, and how many stored numbers, informative or not, got a
    verdict (reproduces or differs)."""
    n, k, d = _informative_counts(verdicts, informative_words)
    m = sum(v in (REPRODUCES, DIFFERS) for v in verdicts)
    return f"reproduces {k} of {n} informative ({_differ(d)}, {n - k - d} undecided; {m} compared)"


CODE_RULE = (  # the mark under the authors' code, as the summary and the report's title state it
    "marked [Re] if none of the informative stored numbers differs and more than half of them reproduce (an "
    f"undecided one counts as not reproducing), otherwise [¬Re]; {HOLM_WORDS}; no mark until an official run "
    "gives an informative number to compare"
)


def code_replication(
    verdicts: Sequence[str], informative_words: Sequence[str], p_values: Sequence[float] | None = None
) -> tuple[str | None, str]:
    """ReScience's mark under the authors' code (``CODE_RULE``) over every chapter's stored numbers, and its count
    in words ('3 of 5 informative stored numbers reproduce, 1 differs, 1 undecided'); None without an informative
    number compared. ``p_values``: each number's p-value where it differs (NaN elsewhere, or for a deterministic
    'differs'); a 'differs' that Holm's correction does not keep (``chance.beyond_chance``) is not counted, and
    the words say how many."""
    n, k, d = _informative_counts(verdicts, informative_words)
    useful = [i for i, (v, w) in enumerate(zip(verdicts, informative_words)) if w == INFORMATIVE and v == DIFFERS]
    ps = [p_values[i] if p_values is not None and np.isfinite(p_values[i]) else 0.0 for i in useful]
    chance = d - sum(beyond_chance(ps, k + d))
    within = f" ({chance} more within chance)" if chance else ""
    words = f"{k} of {n} informative stored numbers reproduce, {_differ(d - chance)}{within}, {n - k - d} undecided"
    if not n or k + d == 0:
        return None, words
    return ("[Re]" if d - chance == 0 and 2 * k > n else "[¬Re]"), words


# ---- both sides' spread: the authors' per-seed numbers against this book's, where they printed them ----

TOLERANCE = {"%": 2.0, "": 0.02}  # by unit: the widest difference that still counts as the same number
RELATIVE_TOLERANCE = 0.10  # ... and never more than this share of the authors' number (a small share stays small)
TOLERANCE_WORDS = (
    "the smaller of 2 points (0.02 for a probability difference) and a tenth of the authors' number, so that a small "
    "share is held to a small band"
)
WELCH_RULE = (
    "Where the authors printed each seed's number, both sides' spread decides: the 95% Welch interval of the "
    "difference of means (this book under official minus the authors') reproduces when it lies within the "
    f"tolerance ({TOLERANCE_WORDS}), differs when it lies wholly beyond it, and is undecided when it reaches across it"
)


def tolerance(theirs: float, unit: str) -> float:
    """The difference from the authors' number ``theirs`` that still counts as the same number (``TOLERANCE_WORDS``):
    ``TOLERANCE[unit]``, at most ``RELATIVE_TOLERANCE`` of ``theirs``."""
    return min(TOLERANCE[unit], RELATIVE_TOLERANCE * abs(theirs))


def welch(ours: Sequence[float], theirs: Sequence[float]) -> tuple[float, float, float]:
    """The difference of means (ours minus theirs) and its 95% Welch interval (unequal variances,
    Welch-Satterthwaite degrees of freedom); a side with no spread contributes none."""
    a, b = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    diff = float(a.mean() - b.mean())
    if va + vb == 0:
        return diff, diff, diff
    dof = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = float(stats.t.ppf(0.975, dof) * np.sqrt(va + vb))
    return diff, diff - half, diff + half


def welch_verdict(ours: Sequence[float], theirs: Sequence[float], unit: str) -> str:
    """``WELCH_RULE``'s word for this book's per-seed values against the authors'."""
    _, low, high = welch(ours, theirs)
    tol = tolerance(float(np.mean(theirs)), unit)
    if -tol <= low and high <= tol:
        return REPRODUCES
    return DIFFERS if low > tol or high < -tol else UNDECIDED_WORD
