"""Tables for reading: the tidy CSVs keep their keys (``top_right_cell``, ``hit_cap``); the page shows plain words with
units, numbers to a fixed number of digits, empty cells empty, and intervals written one way: '+2.3 [+0.4, +4.1]',
the mean and its 95% interval over seeds (said once, in the table's caption or column)."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from IPython.display import HTML

LABELS = {  # a tidy column's key -> what a reader sees
    "panel": "panel",
    "label": "run",
    "seed": "seed",
    "condition": "condition",
    "layers": "layers",
    "ACMC": "ACMC (%)",
    "AC": "AC (%)",
    "MRTA": "MRTA (%)",
    "accuracy": "accuracy (%)",
    "F1": "F1 (%)",
    "EM": "exact match (%)",
    "sufficiency": "sufficiency",
    "comprehensiveness": "comprehensiveness",
    "top_right_cell": "top-right cell (%)",
    "top_left": "top-left (%)",
    "query_attention %": "on the query (%)",
    "steps": "steps",
    "hit_cap": "stopped at the step cap",
    "capped": "seeds at the step cap",
    "final_train_nll": "final training loss",
    "test_nll": "test loss",
    "train_loss": "training loss",
    "incentive": "incentive",
    "incentive_per_delta": "incentive per unit attention",
    "alpha": "attention α",
    "epoch": "epoch",
    "ratio": "r = η_QK/η_OV",
    "stopping_loss": "stopping loss",
    "mu_ov": "μ_OV",
    "mu_qk": "μ_QK",
    "t": "time t",
    "init": "initialisation",
    "init_scale": "initial scale",
    "lr": "learning rate",
    "scaled_scores": "scores scaled by 1/√d",
    "mult_set": "QK multipliers",
    "qk_mult": "QK multiplier",
    "n_classes": "classes",
    "max_mu_gap": "largest gap to the ODE",
    "max_off_ansatz": "largest part off the ansatz",
    "final_alpha": "final attention α",
    "final_loss": "final loss",
    "examples": "examples",
    "majority class": "majority class (%)",
    "split": "split",
    "group": "group",
    "peak": "peak incentive",
    "peak_epoch": "epoch of the peak",
    "fade_epoch": "epoch it fades",
    "model": "model",
    "nominal ratio": "nominal QK/OV ratio",
    "optimizer": "optimiser",
    "metric": "measure",
    "baseline": "baseline",
    "with change": "with the change",
    "effect": "change",
}


def label(key: str) -> str:
    """What a reader sees for a tidy column's key (the key itself where there is no label)."""
    return LABELS.get(key, key)


def count(n: int, noun: str) -> str:
    """'1 seed', '5 seeds': a count with its noun, for prose."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def number(value: object, digits: int = 1) -> str:
    """A number to ``digits`` decimals (an integer as it is, a NaN or None as an empty cell)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return f"{value:,}"
    if isinstance(value, (float, np.floating)):
        return f"{value:,.{digits}f}"
    return str(value)


def readable(
    table: pd.DataFrame, digits: Mapping[str, int] | int = 1, labels: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """``table`` for reading: its index and columns in plain words (``LABELS``, then ``labels``), its numbers as text
    with ``digits`` decimals (one for all, or per column key), empty cells empty, a one-level index's name in the
    header row's first cell."""
    names = {**LABELS, **(labels or {})}
    out = table.copy()
    for column in out.columns:
        d = digits.get(column, 1) if isinstance(digits, Mapping) else digits
        out[column] = [number(v, d) for v in out[column]]
    out = out.rename(columns=lambda c: names.get(c, c) if isinstance(c, str) else c)
    out.index = out.index.set_names([names.get(n, n) if isinstance(n, str) else n for n in out.index.names])
    if out.index.nlevels == 1 and out.columns.nlevels == 1 and out.index.name:
        out = out.rename_axis(index=None, columns=out.index.name)  # its name in the header's corner, not a row
    return out


def listed(items: Sequence[str], conjunction: str = "and") -> str:
    """'a', 'a and b', 'a, b and c' (or another conjunction); repeats dropped."""
    items = list(dict.fromkeys(items))
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {conjunction} " + items[-1]


def folded(table: pd.DataFrame, summary: str, header: bool = True) -> HTML:
    """A table folded under a one-line summary that opens on a click (``<details>``): for what a reader may want to
    look up (each seed's numbers, the data's sizes) without it pushing the page's results apart."""
    body = table.to_html(header=header, border=0, escape=True)
    return HTML(
        '<details style="margin: 0.5em 0 1em 0; padding: 0.3em 0.6em; border: 1px solid #d0d7de; '
        'border-radius: 6px; font-size: 0.9em"><summary style="cursor: pointer; color: #57606a">'
        f'{html.escape(summary)}</summary><div style="overflow-x: auto">{body}</div></details>'
    )
