"""The scorecard: every chapter's claims for one profile, in the book's order, in three parts (the paper's claims,
the reviewers' tests and untested corollaries, this companion's own checks of derivations), each claim's verdict as
a word with its rule, the authors' stored number beside it, and, for Figure 2's claims, how they fare across the
atlas's settings."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import torch

from ..core.contents import GATHERERS, chapter_names, title
from ..core.results import UNAVAILABLE, ResultsError, load, results_root
from ..metrics.verdicts import CHECK, COLUMNS, PAPER, REVIEW, WORDS, note, verdict_table
from . import atlas

CLAIMS_SECTION = "the-claims-checked"  # the anchor of each chapter's "The claims, checked" section
PARTS = (
    (PAPER, "The paper's claims"),
    (REVIEW, "The reviewers' tests and the paper's untested corollaries"),
    (CHECK, "This companion's own checks of the derivations"),
)


@dataclass(frozen=True, kw_only=True)
class Setup:
    """The scorecard takes no parameters: it reads the results of the profile it is run under."""

    profile: str = field(init=False, default="default")  # the profile it runs under (``chapter.resolve`` sets it)


PROFILES: dict[str, dict] = {}


class Scorecard(NamedTuple):
    """Every chapter's claims (``gather``'s table) and, per chapter that contributes none, why."""

    table: pd.DataFrame
    missing: dict[str, str]


def run(setup: Setup, *, device: torch.device | None = None, progress: bool = True) -> Scorecard:
    """Every chapter's claims under the profile the scorecard runs under. It reads results and computes nothing:
    ``device`` and ``progress`` are unused here."""
    return Scorecard(*gather(results_root() / setup.profile))


def gather(folder: Path) -> tuple[pd.DataFrame, dict[str, str]]:
    """Every chapter's claims from one profile's results folder, in book order (columns: page, chapter, the claim
    table's columns, and 'across the atlas' for Figure 2's claims); and, per chapter that contributes none, why (not
    run under this profile, its data not available, its results unusable)."""
    parts, notes = [], {}
    for name in chapter_names():
        if name in GATHERERS:
            continue
        try:
            tables, meta = load(folder, name)
        except ResultsError as err:
            missing = not (folder / f"{name}.json").exists()
            notes[name] = "not run under this profile" if missing else f"its results are unusable ({err})"
            continue
        if meta.get("status") == UNAVAILABLE:
            notes[name] = "its data was not available where the book was built"
        elif "claims" in tables:
            parts.append(tables["claims"].assign(page=name, chapter=title(name)))
    table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["page", "chapter", *COLUMNS])
    share = atlas_share(folder)
    table["across the atlas"] = [
        share.get(i, "") if page == "fig2_dtap" else "" for i, page in zip(table["id"], table["page"])
    ]
    return table[["page", "chapter", *COLUMNS, "across the atlas"]], notes


def atlas_share(folder: Path) -> dict[str, str]:
    """Figure 2's claims by id: how they fare across the atlas's settings ({} when the atlas has not run)."""
    try:
        return atlas.grid.share_by_claim(load(folder, "atlas")[0][atlas.VERDICTS])
    except ResultsError:
        return {}


def tally(table: pd.DataFrame) -> pd.DataFrame:
    """How many claims of each kind have each verdict (rows: the three parts; columns: the four words)."""
    counts = table.groupby("kind")["verdict"].value_counts().unstack(fill_value=0)
    counts = counts.reindex(index=[k for k, _ in PARTS], columns=list(WORDS), fill_value=0).astype(int)
    counts.index = [name for _, name in PARTS]
    return counts


def section(table: pd.DataFrame, kind: str) -> str:
    """The claims of one kind as a table of three columns: the verdict; the claim, with the chapter that decides it
    (a link to its claims) and, for Figure 2's, how it fares across the atlas; this run's numbers, with the authors'
    stored ones where they stored any."""
    part = table[table["kind"] == kind]
    if part.empty:
        return "<p>No claims of this kind under this profile.</p>"

    def cells(r: pd.Series) -> tuple[str, str]:
        link = f'<a href="{r["page"]}.html#{CLAIMS_SECTION}">{html.escape(r["chapter"])}</a>'
        atlas_line = f"; across the atlas: {html.escape(r['across the atlas'])}" if r["across the atlas"] else ""
        theirs = str(r["authors"] or "") if pd.notna(r["authors"]) else ""
        return (
            html.escape(r["claim"]) + note(f"decided in {link}{atlas_line}"),
            html.escape(r["this run"]) + (note(f"the authors' notebooks: {html.escape(theirs)}") if theirs else ""),
        )

    return verdict_table(
        ((r["verdict"], cells(r)) for _, r in part.iterrows()),
        ("verdict", "claim", "this run (95% interval over seeds)"),
    )
