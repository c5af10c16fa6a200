"""The numbers the authors' notebooks stored, read from their saved outputs (``authors_outputs.csv``, with where each
came from: the notebook, a single seed or a mean this companion derived from stored per-seed numbers, or "not
recorded" where a cell never ran), and the paper's own number where its text states one. The chapters show them
beside their own runs; none of them is a result of this companion.

Each row names its notebook (its path in the authors' repository), its cell (the cell's position in the notebook
file, every cell counted from 1, with its execution count "In [k]" where the saved notebook has one; "none" where
no cell computes the number; "not identified" where the cell has not been traced) and the seeds the stored number
covers ('5 (1234-1238)'; '1 (1238)' for a model left over from a loop over seeds; '0' for a number not recorded,
'0 (deterministic)' for one without a random draw)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

PATH = Path(__file__).with_name("authors_outputs.csv")
NOT_RECORDED = "not recorded"


@functools.cache
def table() -> pd.DataFrame:
    """Every stored number, one row per key (chapter, quantity, condition, paper, value, unit, seeds, provenance,
    notebook, cell, note)."""
    return pd.read_csv(PATH, dtype={"seeds": str}, keep_default_na=False).set_index("key")


def _value(row: pd.Series, column: str) -> str:
    """A stored value with its unit ('94.6%'), or '' where there is none."""
    if row[column] == "":
        return ""
    return f"{float(row[column]):g}{row['unit'] if row['unit'] == '%' else ''}"


def stored(key: str) -> str:
    """What the authors' notebooks stored for ``key``: '94.6% (1 seed (1234), stored)', '20.8% (mean of 5 seeds,
    derived)' or 'not recorded'."""
    row = table().loc[key]
    if row["provenance"] == NOT_RECORDED:
        return NOT_RECORDED
    seeds = _seeds(row["seeds"])
    how = (
        f"mean of {seeds}"
        if row["provenance"] == "derived" and seeds and not seeds.startswith(("seed", "one"))
        else seeds
    )
    return f"{_value(row, 'value')} ({', '.join(x for x in (how, row['provenance']) if x)})"


def _seeds(text: str) -> str:
    """'5 (1234-1238)' -> '5 seeds, 1234-1238'; '1 (1234)' -> 'seed 1234'; '1' -> 'one seed'; '0 (deterministic)'
    -> 'deterministic'; '0' or '' -> ''."""
    count, _, ids = text.partition(" ")
    ids = ids.strip("()")
    if count in ("", "0"):
        return ids
    if count == "1":
        return f"seed {ids}" if ids else "one seed"
    return f"{count} seeds" + (f", {ids}" if ids else "")


def number(key: str) -> tuple[float | None, int, str]:
    """A stored number as data: its value (None where none is stored), how many seeds it covers, its unit."""
    row = table().loc[key]
    value = None if row["value"] == "" else float(row["value"])
    return value, int(str(row["seeds"]).split(" ")[0] or 0), row["unit"]


def summary(keys: Iterable[str]) -> str:
    """Several keys on one line, each named by its condition: '(b) FACO 94.6% (1 seed (1234), stored); (d) CACO not
    recorded'."""
    return "; ".join(f"{table().loc[k, 'condition']} {stored(k)}" for k in keys)


def three_way(measured: Mapping[str, str]) -> pd.DataFrame:
    """Per key, indexed by its condition: the paper's number (or 'not stated'), the authors' notebooks' as stored,
    and this run's (``measured``: key -> text), for reading side by side; the quantity heads the index when every
    row measures the same one, else it is a column."""
    rows = table().loc[list(measured)]
    out = pd.DataFrame(
        {
            "quantity": list(rows["quantity"]),
            "the paper": [_value(r, "paper") or "not stated" for _, r in rows.iterrows()],
            "the authors' notebooks": [stored(k) for k in rows.index],
            "this run": list(measured.values()),
        },
        index=pd.Index(list(rows["condition"])),
    )
    if out["quantity"].nunique() == 1:
        return out.drop(columns="quantity").rename_axis(out["quantity"].iloc[0])
    return out.rename_axis("condition")


PER_SEED = Path(__file__).with_name("authors_per_seed.csv")


@functools.cache
def _per_seed() -> pd.DataFrame:
    """The per-seed numbers the authors' notebooks printed (key, seed, value in the unit of ``table``, notebook,
    cell, what the cell printed), where a stored number is a mean over seeds this companion derived."""
    return pd.read_csv(PER_SEED, keep_default_na=False)


def per_seed(key: str) -> list[float] | None:
    """The per-seed values the authors' notebooks printed for a stored number (their mean is its value), in seed
    order; None where they printed none."""
    rows = _per_seed()
    values = rows.loc[rows["key"] == key].sort_values("seed")["value"]
    return [float(v) for v in values] if len(values) else None
