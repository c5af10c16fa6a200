"""A stored run's text columns that hold one value on every row, kept once in its metadata instead of on each row
of its CSV: a training curve's label repeated on each of 10,000 rows is four fifths of its bytes, and the committed
store has a size budget (``store.BUDGET_MB``). The tables read back equal to the ones computed
(tests/unit/runs/test_store_columns.py). Also how tables read back from CSV (``round_trip``) and how per-seed
tables are joined as one run writes them (``interleave``)."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

Tables = dict[str, pd.DataFrame]
META_KEY = "constant_columns"  # table -> column -> [its position, its one value]
MIN_ROWS = 100  # a shorter table keeps every column: too little to save


def _constant(frame: pd.DataFrame, column: str) -> bool:
    """Whether ``column`` is text holding one value on every row."""
    values = frame[column]
    return (
        pd.api.types.is_string_dtype(values)
        and isinstance(values.iloc[0], str)
        and bool((values == values.iloc[0]).all())
    )


def factor(tables: Mapping[str, pd.DataFrame]) -> tuple[Tables, dict[str, dict[str, list[Any]]]]:
    """Each table less its constant text columns (at least ``MIN_ROWS`` rows, and one column always left, so the rows
    stay counted), and those columns per table: name -> [position, value], for the metadata (``META_KEY``)."""
    out, constants = {}, {}
    for name, frame in tables.items():
        same = [c for c in frame.columns if len(frame) >= MIN_ROWS and _constant(frame, c)]
        same = same[: len(frame.columns) - 1]
        out[name] = frame.drop(columns=same)
        if same:
            constants[name] = {c: [frame.columns.get_loc(c), frame[c].iloc[0]] for c in same}
    return out, constants


def restore(tables: Mapping[str, pd.DataFrame], meta: Mapping[str, Any]) -> Tables:
    """The tables as computed: each constant column (``factor``, as the metadata records it) put back in place."""
    out = dict(tables)
    for name, columns in (meta.get(META_KEY) or {}).items():
        frame = out[name].copy()
        for column, (position, value) in sorted(columns.items(), key=lambda item: item[1][0]):
            frame.insert(position, column, value)
        out[name] = frame
    return out


def round_trip(tables: Tables) -> Tables:
    """Tables as they read back from CSV (pandas reads every float back to the bit: tests/unit/runs/test_store.py):
    what a run outside any chapter returns, like one read from the store."""
    return {name: pd.read_csv(io.StringIO(frame.to_csv(index=False))) for name, frame in tables.items()}


def interleave(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Per-seed tables of the same shape joined as one run of all seeds writes them: row by row, the seeds in
    turn (row 0 of every seed, then row 1, ...)."""
    if not frames:
        return pd.DataFrame()
    marked = [f.assign(_row=range(len(f)), _seed=k) for k, f in enumerate(frames)]
    joined = pd.concat(marked, ignore_index=True).sort_values(["_row", "_seed"], kind="stable")
    return joined.drop(columns=["_row", "_seed"]).reset_index(drop=True)
