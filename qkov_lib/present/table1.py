"""The real-data pages for reading (Section 7, Table 1): numbers over seeds as text ('12.3 ± 4.5', '12.3 [10.1,
14.5]', never '-0.0'), Table 1 turned for a page column, each seed's measures, accuracy by group, and a loader's
provenance. ``runs.real_data`` computes them; this module only writes them."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..metrics.stats import mean_ci
from ..metrics.verdicts import Interval
from .tables import LABELS, readable

TABLE_METRICS = ("accuracy", "MRTA", "AC", "ACMC", "sufficiency", "comprehensiveness")  # Table 1's measures


DIGITS = {"sufficiency": 3, "comprehensiveness": 3}  # probability differences; the other measures in percent
MEASURES = {
    **LABELS,
    "sufficiency": "sufficiency (probability drop)",
    "comprehensiveness": "comprehensiveness (probability drop)",
}  # a measure's name and unit on a page


def _fixed(value: float, digits: int) -> str:
    """``value`` to ``digits`` decimals, never '-0.0'."""
    return f"{round(float(value), digits) + 0.0:.{digits}f}"


def _pm(mean: float, half: float, digits: int) -> str:
    """'12.3 ± 4.5' (the mean alone where there is no half-width: one seed)."""
    return _fixed(mean, digits) if math.isnan(half) else f"{_fixed(mean, digits)} ± {_fixed(half, digits)}"


def interval_text(values: Sequence[float], digits: int, bounds: tuple[float, float] | None = None) -> str:
    """Values over seeds as their mean and 95% interval, '12.3 [10.1, 14.5]' (``Interval.text``), never '-0.0';
    ``bounds`` those of the quantity (``verdicts.PERCENT``: the interval of a percentage stays within [0, 100])."""
    return interval_words(Interval.of(values, bounds), digits)


def interval_words(i: Interval, digits: int) -> str:
    """An interval as '12.3 [10.1, 14.5]' (``Interval.text``) to ``digits`` decimals, never '-0.0'."""
    mean, low, high = (round(float(x), digits) + 0.0 for x in i.numbers)
    return Interval(mean, low, high, i.n).text(digits)


def mean_pm(values: Sequence[float], digits: int) -> str:
    """Values over seeds as 'mean ± 95% half-width'."""
    return _pm(*mean_ci(np.asarray(values, dtype=float)), digits)


def table1_display(
    table: pd.DataFrame, by: str | list[str] = "condition", metrics: Sequence[str] = TABLE_METRICS
) -> pd.DataFrame:
    """``table1`` for reading: one "mean ± half-width" column per metric (percentages to 0.1, probability
    differences to 0.001; the mean alone for one seed), so a row fits the page."""
    shown = table.set_index(by)
    return pd.DataFrame(
        {m: [_pm(v, h, DIGITS.get(m, 1)) for v, h in zip(shown[m], shown[f"{m} ±"])] for m in metrics},
        index=shown.index,
    )


def table1_page(
    table: pd.DataFrame, by: str | list[str] = "condition", metrics: Sequence[str] = TABLE_METRICS
) -> pd.DataFrame:
    """``table1_display`` turned for a page column: one row per measure, named in plain words with its unit, and
    one column per condition ('2 layers, baseline' where ``by`` holds the depth too)."""
    shown = table1_display(table, by, metrics)

    def column(key: Any) -> str:
        parts = key if isinstance(key, tuple) else (key,)
        names = by if isinstance(by, list) else [by]
        return ", ".join(f"{v} layers" if n == "layers" else str(v) for n, v in zip(names, parts))

    out = shown.T.rename(index=MEASURES)
    out.columns = [column(k) for k in shown.index]
    out.index.name = None  # the row names say what they are; no header row of their own
    return out


def per_seed_display(
    per_seed: pd.DataFrame, by: Sequence[str] = ("condition", "seed"), metrics: Sequence[str] = TABLE_METRICS
) -> pd.DataFrame:
    """Each seed's measures for reading, narrow enough for a page column: plain-word headers (``tables.LABELS``:
    percentages marked, sufficiency and comprehensiveness bare, so say once that they are probability drops), the
    same digits as Table 1's row, conditions by their short names ('faster QK')."""
    table = per_seed.assign(condition=[c.split(" (x")[0] for c in per_seed["condition"]])
    table = table.set_index(list(by))[list(metrics)]
    for m in metrics:
        table[m] = [_fixed(v, DIGITS.get(m, 1)) for v in table[m]]
    return readable(table)


def short_names(maps: Mapping[str, Any]) -> dict[str, Any]:
    """Per-condition values keyed by the condition's short name ('faster QK (x30)' -> 'faster QK'), for panel titles
    that must fit half a phone's width (the caption gives the multiplier)."""
    return {name.split(" (x")[0]: value for name, value in maps.items()}


def about_data(info: Mapping[str, Any]) -> pd.DataFrame:
    """A loader's provenance record (``Prepared.info``) as a two-column table: what, and its value in words."""

    def words(value: Any) -> str:
        if isinstance(value, Mapping):
            return ", ".join(f"{k} {v}" for k, v in value.items())
        return f"{value:,}" if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else str(value)

    return pd.DataFrame({"value": [words(v) for v in info.values()]}, index=pd.Index(list(info)))


def group_table(by_group: pd.DataFrame, name: Callable[[Any], str] = str) -> pd.DataFrame:
    """Accuracy by group for reading: per split and group, the majority share, the size, and each condition's mean
    accuracy ± 95% CI half-width over seeds (percent, 0.1; the mean alone for one seed); ``name`` labels a group."""
    rows = []
    for (split, group), part in by_group.groupby(["split", "group"], sort=False):
        row = {
            "split": split,
            "group": name(group),
            "examples": int(part["examples"].iloc[0]),
            "majority class": f"{part['majority'].iloc[0]:.1f}",
        }
        for cond, runs in part.groupby("condition", sort=False):
            row[cond] = mean_pm(runs["accuracy"].to_numpy(), 1)
        rows.append(row)
    return pd.DataFrame(rows).set_index(["split", "group"])


def group_display(by_group: pd.DataFrame, name: Callable[[Any], str] = str, group: str = "group") -> pd.DataFrame:
    """``group_table`` with its headers in plain words: ``group`` names the grouping (e.g. 'attractors'), each
    condition's column says it holds accuracy in percent."""
    table = group_table(by_group, name)
    conditions = {c: f"{c}: accuracy (%)" for c in by_group["condition"].unique()}
    return readable(table, labels={"group": group, **conditions})
