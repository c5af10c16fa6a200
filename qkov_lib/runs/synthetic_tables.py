"""Figure 2's tables from its runs' results (``synthetic_runs.PanelResult``): per-panel means over seeds as text,
the DTAP heatmaps and the training curves in long form."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pandas as pd

from .synthetic_runs import PanelResult


def mean_pm_std(summary: pd.DataFrame, columns: Sequence[str], by: str = "label") -> pd.DataFrame:
    """'mean ± std' strings per group (std over seeds, ddof=1), for the chapter tables."""
    agg = summary.groupby(by, sort=False)[list(columns)].agg(["mean", "std"])
    return pd.DataFrame(
        {c: [f"{m:.1f} ± {s:.1f}" for m, s in zip(agg[(c, "mean")], agg[(c, "std")].fillna(0))] for c in columns},
        index=agg.index,
    )


def heatmap_cells(results: Sequence[PanelResult], seeds: Sequence[int], bins: Sequence[float]) -> pd.DataFrame:
    """Every seed's heatmaps in long form: panel, seed, probability bin, attention bin, percent."""
    names = [f"{lo:g}-{hi:g}" for lo, hi in itertools.pairwise(bins)]
    return pd.DataFrame(
        [
            {
                "panel": r.panel.key,
                "label": r.panel.label,
                "seed": seed,
                "prob_bin": names[i],
                "attention_bin": names[j],
                "percent": float(r.heatmaps[s, i, j]),
            }
            for r in results
            for s, seed in enumerate(seeds)
            for i in range(len(names))
            for j in range(len(names))
        ]
    )


def curve_table(results: Sequence[PanelResult]) -> pd.DataFrame:
    """Training NLL (mean mini-batch loss per ``eval_every`` steps) in long form: label, step, seed, train_nll."""
    return pd.concat([r.curves for r in results], ignore_index=True)
