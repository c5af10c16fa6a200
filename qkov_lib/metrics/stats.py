"""Means with 95% confidence intervals over seeds (Student t), paired effects against a baseline, and a
classifier's trivial baseline (always the majority class)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats


def mean_ci(values: Sequence[float] | np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """(mean, half-width of the two-sided t interval); the half-width is NaN for a single value."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        raise ValueError("mean_ci needs at least one value")
    if v.size == 1:
        return float(v[0]), float("nan")
    half = stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size)
    return float(v.mean()), float(half)


def paired_effects(
    summary: pd.DataFrame, base: str, metrics: Sequence[str], by: str = "panel", pair: str = "seed", level: float = 0.95
) -> pd.DataFrame:
    """For every group other than ``base``: per metric, the baseline and group means and the mean paired
    difference (group - baseline, matched on ``pair``) with its confidence interval."""
    wide = summary.pivot_table(index=pair, columns=by, values=list(metrics))
    rows = []
    for group in summary[by].unique():
        if group == base:
            continue
        for metric in metrics:
            diff = (wide[(metric, group)] - wide[(metric, base)]).dropna()
            mean, half = mean_ci(diff.to_numpy(), level)
            rows.append(
                {
                    by: group,
                    "metric": metric,
                    "baseline": float(wide[(metric, base)].mean()),
                    "with change": float(wide[(metric, group)].mean()),
                    "effect": mean,
                    "ci_low": mean - half,
                    "ci_high": mean + half,
                    "seeds": int(diff.size),
                }
            )
    return pd.DataFrame(rows)


def majority_share(labels: np.ndarray) -> float:
    """The accuracy, in percent, of always predicting the most frequent class."""
    return 100 * np.bincount(labels).max() / len(labels)


@dataclass(frozen=True)
class Majority:
    """The trivial baseline of a classifier: always predicting the test set's most frequent class gets ``count`` of
    its ``examples`` right. Counts, so that a model's test predictions are compared with it exactly."""

    count: int
    examples: int

    @classmethod
    def of(cls, labels: np.ndarray) -> Majority:
        return cls(int(np.bincount(labels).max()), len(labels))

    @property
    def share(self) -> float:
        """The baseline's accuracy in percent, for reading."""
        return 100 * self.count / self.examples
