"""The scorecard: every chapter's claim table for one profile, in the book's order, with, for Figure 2's claims,
in how many of the atlas's settings the same check holds."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..contents import GATHERERS, chapter_names, title
from ..results import ResultsError, load
from . import atlas


@dataclass(frozen=True, kw_only=True)
class Setup:
    """The scorecard takes no parameters: it reads the results of the profile it is run under."""


PROFILES: dict[str, dict] = {}


def gather(folder: Path) -> pd.DataFrame:
    """Every chapter's claim table from one profile's results folder, in book order; a chapter without results, or
    with results that fail their check (a file missing or changed), gets one row saying so."""
    parts = []
    for name in chapter_names():
        if name in GATHERERS:
            continue
        try:
            tables = load(folder, name)[0]
        except ResultsError as err:
            missing = not (folder / f"{name}.json").exists()
            note = "(chapter not run under this profile)" if missing else f"(results unusable: {err})"
            tables = {"claims": pd.DataFrame([{"id": "", "claim": note, "this run": "", "reproduced": None}])}
        if "claims" in tables:
            parts.append(tables["claims"].assign(chapter=title(name)))
    table = pd.concat(parts, ignore_index=True)[["chapter", "id", "claim", "this run", "reproduced"]]
    fig2 = table["chapter"] == title("fig2_dtap")
    share = _atlas_share(folder)
    table["across the atlas"] = [share.get(i, "") if in_fig2 else "" for i, in_fig2 in zip(table["id"], fig2)]
    return table


def _atlas_share(folder: Path) -> dict[str, str]:
    """Figure 2's claims by id: in how many of the atlas's settings each holds ({} when the atlas has not run)."""
    try:
        return atlas.share_by_claim(load(folder, "atlas")[0][atlas.VERDICTS])
    except ResultsError:
        return {}
