"""The summary's comparison of the paper's text with the authors' code: every chapter whose numbers the authors'
notebooks stored (``data.authors``), this book under ``official`` beside them, each number's verdict and whether it
is informative (``metrics.official``), and the tallies."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pandas as pd

from ...core.chapter import name_of
from ...core.contents import chapter_names
from ...core.results import UNAVAILABLE, ResultsError, profile_tables, read_meta
from ...metrics.official import (
    INFORMATIVE_COLUMN,
    OFFICIAL,
    Guard,
    OfficialUnit,
    code_replication,
    tally,
)
from ...metrics.verdicts import (
    DIFFERS,
    OFFICIAL_COLUMN,
    REPRODUCES,
    UNDECIDED,
    VERDICT_COLUMN,
)
from ...present.gathered import official_chapter, official_missing, official_total
from ...runs.official_read import official_unit
from ...runs.real_verdicts import compared as real_compared
from ...runs.real_verdicts import official_from
from .. import fig2_dtap, fig3_incentive, fig4_mu_trajectories, hatexplain, hatexplain_layers, squad, sva
from ..beside import fig2 as fig2_beside
from ..beside import fig4 as fig4_beside


def profile_difference(root: Path, profile: str, other: str, page: str = "fig2_dtap") -> pd.DataFrame | None:
    """A chapter's verdicts under this build's profile beside another profile's (e.g. the authors' settings,
    ``official``), where both have been run into the same results root; None when the other has not."""
    theirs, ours = profile_tables(root, other, page), profile_tables(root, profile, page)
    if theirs is None or ours is None or "claims" not in theirs or "claims" not in ours:
        return None
    both = ours["claims"].merge(theirs["claims"], on="id", suffixes=("", " other"))
    return pd.DataFrame({"claim": both["claim"], profile: both["verdict"], other: both["verdict other"]})


# ---- the paper's text against the authors' code: this book under `official` beside the authors' stored numbers ----

Tables = Mapping[str, pd.DataFrame]  # a chapter's tables as saved (``results.load``)
Compared = tuple[pd.DataFrame, Guard] | None  # a comparison table and the official run's guard
Compare = Callable[[Tables, OfficialUnit], Compared]  # (a run, the official run) -> None: nothing official to compare


def _synthetic(compare: Callable[[Tables, OfficialUnit], pd.DataFrame], guard: Callable) -> Compare:
    """A synthetic chapter's comparison (its ``compared`` on its tables) and its guard (its ``guard``: the
    departures and its not-learned check)."""

    def both(run: Tables, official: OfficialUnit) -> Compared:
        return compare(run, official), guard(official)

    return both


def _fig4(run: Tables, official: OfficialUnit) -> Compared:
    """Figure 4's stored numbers beside Theorem 1's solution (``fig4_beside.compared``, the path its page takes)."""
    return fig4_beside.compared(run["main"], official), official.guard


def _real(module: ModuleType, depth: int | None = None) -> Compare:
    """A real-data chapter's comparison (``real_verdicts.compared`` of ``real_verdicts.official_from``, the path its
    page takes), of the depth the authors stored (``depth``); None when the official run has no rows of that depth."""

    def both(run: Tables, official: OfficialUnit) -> Compared:
        theirs = official_from(official, module, depth)
        if theirs is None:
            return None
        rows = run["per_seed"]
        rows = rows[rows["layers"] == depth] if depth is not None and "layers" in rows else rows
        return real_compared(rows if len(rows) else None, name_of(module), theirs), theirs.guard

    return both


@dataclass(frozen=True)
class Beside:
    """How a chapter's run is set beside its official run: its module, the tables it reads, and the comparison."""

    module: ModuleType
    tables: tuple[str, ...]
    compare: Compare


SYNTHETIC, REAL = ("main", "claims"), ("per_seed", "claims")
BESIDE_OFFICIAL = {  # every chapter whose numbers the authors' notebooks stored (``data.authors``)
    "fig2_dtap": Beside(
        fig2_dtap,
        SYNTHETIC,
        _synthetic(lambda run, off: fig2_beside.compared(run["main"], off, run.get("heatmaps")), fig2_dtap.guard),
    ),
    "fig3_incentive": Beside(
        fig3_incentive,
        SYNTHETIC,
        _synthetic(lambda run, off: fig3_incentive.compared(run["main"], off), fig3_incentive.guard),
    ),
    "fig4_mu_trajectories": Beside(fig4_mu_trajectories, ("main",), _fig4),
    "hatexplain": Beside(hatexplain, REAL, _real(hatexplain)),
    "hatexplain_layers": Beside(hatexplain_layers, REAL, _real(hatexplain_layers, hatexplain_layers.STORED_DEPTH)),
    "sva": Beside(sva, REAL, _real(sva)),
    "squad": Beside(squad, REAL, _real(squad)),
}


P_COLUMN = "p"  # a comparison's p-value where it differs (``metrics.chance``): read by the mark, not shown


def _by_number(table: pd.DataFrame) -> pd.DataFrame:
    """A comparison table indexed by (quantity, condition), whatever its shape (``authors.three_way``: one quantity
    names the index; several are a column, or the first level of the index)."""
    if isinstance(table.index, pd.MultiIndex):
        out = table
    elif "quantity" in table.columns:
        out = table.set_index("quantity", append=True).swaplevel()
    else:
        out = table.set_index(pd.MultiIndex.from_product([[table.index.name], table.index]))
    return out.rename_axis(["quantity", "condition"])


def beside_authors(root: Path, profile: str, page: str) -> pd.DataFrame | None:
    """A chapter's stored numbers (``data.authors``), one row each: the paper's number, the authors' notebooks' as
    stored, this book under ``official`` (the unit ``<root>/official/<page>``, read by ``official_unit`` as
    the chapter's page reads it: its mean and 95% interval over seeds), this book under ``profile`` (its unit in the
    same root; 'not run' without one) and whether ``official`` gives the authors' number back (the chapter's own
    comparison; undecided where the unit's guard draws no verdict: its models did not learn, or it is not the
    authors' experiment, the reason beside its numbers). None when the chapter has no official results to compare:
    no unit, a unit without the tables it reads (its data was not available), or none of the depth stored."""
    spec = BESIDE_OFFICIAL[page]
    theirs = official_unit(spec.module, "", root=root)
    if theirs is None or not all(t in theirs.tables for t in spec.tables):
        return None
    compared = spec.compare(theirs.tables, theirs)
    if compared is None:
        return None
    table, guard = compared
    chance, keys = table.attrs.get("p", {}), table.attrs.get("keys", [])  # by stored number (``beside_official``)
    table = table.assign(**{P_COLUMN: [chance.get(k, math.nan) for k in keys] if len(keys) == len(table) else math.nan})
    rows = _by_number(table)
    out = rows[["the paper", "the authors' notebooks", OFFICIAL_COLUMN, INFORMATIVE_COLUMN]].copy()
    if not guard.comparable:
        out[OFFICIAL_COLUMN] += f" ({guard.reason})"
    if profile != OFFICIAL:
        ours = _tables(root, profile, page, spec)
        here = pd.Series(dtype=str)
        if ours is not None:
            mine = spec.compare(ours, theirs)
            if mine is None:  # only an official run with nothing to compare gives None, and this one had some
                raise RuntimeError(f"{page}: comparing {profile} with {OFFICIAL} gave nothing, yet {OFFICIAL} had rows")
            here = _by_number(mine[0])["this run"]
        out[f"this book under {profile}"] = here.reindex(out.index).fillna("not run")
    out[VERDICT_COLUMN] = rows[VERDICT_COLUMN] if guard.comparable else UNDECIDED
    out.attrs[P_COLUMN] = list(rows[P_COLUMN])  # row by row: the mark weighs each 'differs' against chance
    return out


def _tables(root: Path, profile: str, page: str, spec: Beside) -> Tables | None:
    """A chapter's tables under ``profile`` in ``root`` (``results.profile_tables``), None unless it holds every
    table the comparison reads."""
    tables = profile_tables(root, profile, page)
    return tables if tables is not None and all(t in tables for t in spec.tables) else None


def official_command(page: str) -> str:
    """The command that computes a chapter under ``official``."""
    return f"python -m qkov_lib reproduce --profile {OFFICIAL} --only {page}"


def official_html(root: Path, profile: str, pages: list[str] | None = None) -> str:
    """For every chapter whose numbers the authors stored (``BESIDE_OFFICIAL``, in the book's order; or ``pages``):
    its title linked to its page, how many of its numbers ``official`` gives back, and its rows
    (``beside_authors``) folded beneath, each led by its verdict word; or, where the chapter has no official
    results in ``root``, a sentence saying so and the command that computes them."""
    parts: list[str] = []
    tables: list[pd.DataFrame] = []
    for page in pages or [n for n in chapter_names() if n in BESIDE_OFFICIAL]:
        table = beside_authors(root, profile, page)
        if table is None:
            try:
                stopped = read_meta(root / OFFICIAL, page).get("status") == UNAVAILABLE
            except ResultsError:
                stopped = False
            why = "its run stopped: its data was not available where it ran" if stopped else "not run yet"
            parts.append(official_missing(page, OFFICIAL, why, official_command(page)))
            continue
        words = ", ".join(f"{word}: {n}" for word, n in counts_of(table[VERDICT_COLUMN]).items())
        tables.append(table)
        parts.append(official_chapter(page, table, VERDICT_COLUMN, f"{tally_of(table)}; {words}"))
    if tables:  # every chapter's stored numbers together: the book's tally
        parts.insert(0, official_total(tally_of(pd.concat(tables))))
    return "\n".join(parts)


def code_mark(root: Path, profile: str) -> tuple[str | None, str]:
    """The book's mark under the authors' code (``official.code_replication``) over every chapter's stored numbers
    that ``official`` has results for, and its count in words."""
    tables = [
        t
        for page in chapter_names()
        if page in BESIDE_OFFICIAL
        if (t := beside_authors(root, profile, page)) is not None
    ]
    if not tables:
        return None, "no chapter has run under official yet"
    both = pd.concat(tables)
    chance = [p for t in tables for p in t.attrs.get(P_COLUMN, [math.nan] * len(t))]
    return code_replication(list(both[VERDICT_COLUMN]), list(both[INFORMATIVE_COLUMN]), chance)


def tally_of(table: pd.DataFrame) -> str:
    """A comparison's tally (``official.tally``): 'reproduces k of n informative (d differ, u undecided; m
    compared)'."""
    return tally(list(table[VERDICT_COLUMN]), list(table[INFORMATIVE_COLUMN]))


def counts_of(verdicts: pd.Series) -> dict[str, int]:
    """How many rows have each reproduction word, in the order reproduces, differs, undecided; a word no row has is
    left out."""
    words = list(verdicts)
    return {w: words.count(w) for w in (REPRODUCES, DIFFERS, UNDECIDED) if w in words}
