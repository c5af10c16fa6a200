"""The scorecard: every chapter's claims for one profile, in the book's order, in three parts (the paper's claims,
the reviewers' tests and untested corollaries, this companion's own checks of derivations), each claim's verdict as
a word with its rule, the authors' stored number beside it, and, for Figure 2's claims, how they fare across the
atlas's settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import torch

from ..core.contents import GATHERERS, chapter_names, title
from ..core.results import BY_HAND, PUBLISHED, UNAVAILABLE, ResultsError, Sources, folder_of, load, sources
from ..metrics.verdicts import CHECK, COLUMNS, PAPER, REVIEW, WORDS
from ..present.gathered import scorecard_section
from . import atlas
from .atlas import claims as atlas_claims

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
    return Scorecard(*gather(sources(setup.profile)))


def gather(where: Path | Sources) -> tuple[pd.DataFrame, dict[str, str]]:
    """Every chapter's claims from one profile's results (a folder, or ``Sources`` choosing one per chapter), in
    book order (columns: page, chapter, the claim table's columns, 'across the atlas' for Figure 2's claims, and
    'results': ``PUBLISHED`` or ``BY_HAND``); and, per chapter that contributes none, why (not run under this
    profile, its data not available, its results unusable)."""
    parts, notes = [], {}
    for name in chapter_names():
        if name in GATHERERS:
            continue
        folder = folder_of(where, name)
        try:
            tables, meta = load(folder, name)
        except ResultsError as err:
            missing = not (folder / f"{name}.json").exists()
            notes[name] = "not run under this profile" if missing else f"its results are unusable ({err})"
            continue
        if meta.get("status") == UNAVAILABLE:
            notes[name] = "its data was not available where the book was built"
        elif "claims" in tables:
            origin = where.origin(name) if isinstance(where, Sources) else PUBLISHED
            parts.append(tables["claims"].assign(page=name, chapter=title(name), results=origin))
    table = (
        pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["page", "chapter", *COLUMNS, "results"])
    )
    share = atlas_share(where)
    table["across the atlas"] = [
        share.get(i, "") if page == "fig2_dtap" else "" for i, page in zip(table["id"], table["page"])
    ]
    # a unit saved before a column existed (a claim's own reason, ``why``) reads it as empty
    return table.reindex(columns=["page", "chapter", *COLUMNS, "across the atlas", "results"]), notes


def by_hand_note(table: pd.DataFrame) -> str:
    """A sentence saying which chapters' rows were read from a run by hand ('' when none were)."""
    pages = list(dict.fromkeys(table.loc[table["results"] == BY_HAND, "chapter"]))
    if not pages:
        return ""
    where = "the chapters run by hand (data/results/interactive), newer than the published results"
    if len(pages) == table["chapter"].nunique():
        return f"Every row is read from {where}."
    return f"Read from {where}: {'; '.join(pages)}. The other rows are read from the published results."


def atlas_share(where: Path | Sources) -> dict[str, str]:
    """Figure 2's claims by id: how they fare across the atlas's settings ({} when the atlas has not run)."""
    try:
        return atlas_claims.share_by_claim(load(folder_of(where, "atlas"), "atlas")[0][atlas.VERDICTS])
    except ResultsError:
        return {}


def tally(table: pd.DataFrame) -> pd.DataFrame:
    """How many claims of each kind have each verdict (rows: the three parts; columns: the four words)."""
    counts = table.groupby("kind")["verdict"].value_counts().unstack(fill_value=0)
    counts = counts.reindex(index=[k for k, _ in PARTS], columns=list(WORDS), fill_value=0).astype(int)
    counts.index = [name for _, name in PARTS]
    return counts


def section(table: pd.DataFrame, kind: str) -> str:
    """The claims of one kind (``PARTS``) as a table for reading (``present.gathered.scorecard_section``)."""
    return scorecard_section(table[table["kind"] == kind])
