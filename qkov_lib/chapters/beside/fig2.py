"""Figure 2's stored numbers beside this book under ``official``, read by the chapter's page and by the summary
alike: the top-right cell and test accuracy per panel, each top-row cell the authors stored, and the top-row sums
they imply (attention below 0.4, at least 0.6), each with whether official gives it back; a number held by the
other condition's official interval (a faster panel against the panel it speeds up) is not informative."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ...data import authors
from ...metrics.official import OfficialUnit
from ...metrics.verdicts import PERCENT, Interval, beside_official
from ..fig2_dtap import FASTER, PANEL_KEYS, TOP_ROW, guard, top_row

SUMS = {"top_row_weak_attention": (0.0, 0.4), "top_row_strong_attention": (0.6, 1.0)}  # attention ranges


def top_row_sums(cells: pd.DataFrame | None, keys: Sequence[str]) -> dict[str, Interval]:
    """The top-row sums among ``keys`` ('fig2.<panel>.top_row_weak_attention': probability >= 0.8, attention below
    0.4; ``SUMS``) from a run's heatmap cells: each seed's sum of the cells in the range, its mean and 95% interval
    over seeds; a range that does not start and end at the run's bin edges is left out."""
    out: dict[str, Interval] = {}
    for key in keys:
        _, panel, name = key.split(".", 2)
        if cells is None or name not in SUMS:
            continue
        low, high = SUMS[name]
        row = cells[(cells["panel"] == panel) & (cells["prob_bin"] == TOP_ROW)]
        lows, highs = (row["attention_bin"].str.split("-").str[i].astype(float).round(9) for i in (0, 1))
        if low in set(lows) and high in set(highs):
            out[key] = Interval.of(row[(lows >= low) & (highs <= high)].groupby("seed")["percent"].sum(), PERCENT)
    return out


def counterparts(key: str) -> list[str]:
    """A stored number's keys under the other condition (``official.informative``): the panel a faster panel speeds
    up, or the faster panels of a base panel (``fig2_dtap.FASTER``)."""
    _, panel, rest = key.split(".", 2)
    pairs = [base for faster, base in FASTER if faster == panel] + [f for f, base in FASTER if base == panel]
    return [f"fig2.{p}.{rest}" for p in pairs]


def compared(
    summary: pd.DataFrame, official: OfficialUnit | None = None, cells: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The paper, the authors' notebooks as stored, this run and this book under ``official`` (its unit,
    ``official_read.official_unit``; None: not run), side by side, each number a run's mean and 95% interval over seeds
    (from its per-panel ``summary`` and heatmap ``cells``), and whether ``official`` gives the authors' number back
    (``verdicts.beside_official``; undecided unless its guard, with Figure 2's not-learned check, lets a verdict be
    drawn)."""
    table = authors.table()
    every = [k for k in table.index if k.startswith("fig2.")]
    others = {k: counterparts(k) for k in every}
    rows = [k for k in every if ".top_row" in k]
    wanted = sorted({*rows, *(o for k in rows for o in others[k])})

    def intervals(per_panel: pd.DataFrame, heat: pd.DataFrame | None) -> dict[str, Interval]:
        pairs = [(f"fig2.{k}.{m}", m, k) for k in PANEL_KEYS for m in ("top_right_cell", "accuracy")]
        found = {key: Interval.of(per_panel.loc[per_panel["panel"] == k, m], PERCENT) for key, m, k in pairs}
        return found | top_row(heat, [k for k in wanted if ".top_row." in k]) | top_row_sums(heat, wanted)

    ours = intervals(summary, cells)
    keys = [k for k in every if k in ours or ".top_row" in k]
    shown = authors.three_way({key: ours[key].text() + " %" if key in ours else "not run" for key in keys})
    theirs = None if official is None else intervals(official.tables["main"], official.tables.get("heatmaps"))
    evidence = official is not None and guard(official).comparable
    return beside_official(shown, keys, theirs, lambda i: i.text() + " %", evidence=evidence, others=others)
