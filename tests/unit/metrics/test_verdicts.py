"""Intervals over seeds of a bounded quantity stay inside its bounds, and the verdicts they decide keep their rules."""

import numpy as np
import pandas as pd
import pytest

from qkov_lib.chapters import fig2_dtap
from qkov_lib.chapters.beside import fig2 as fig2_beside
from qkov_lib.metrics import verdicts
from qkov_lib.metrics.verdicts import FAILS, HOLDS, PERCENT, PROBABILITY, UNDECIDED, Interval, above, at_least, at_most

NEAR_FULL = [100.0, 100.0, 100.0, 100.0, 83.5]  # one seed of five falls short: the t interval reaches past 100


def test_an_accuracy_near_100_percent_has_its_interval_inside_the_bounds():
    plain, bounded = Interval.of(NEAR_FULL), Interval.of(NEAR_FULL, PERCENT)
    assert plain.high > 100  # what the t interval alone gives
    assert bounded.high == 100.0 and bounded.low == plain.low and bounded.mean == plain.mean
    assert bounded.text() == "96.7 [87.5, 100.0]"
    share = Interval.of([0.0, 0.0, 0.0, 0.02], PROBABILITY)
    assert share.low == 0.0 and share.high > 0.0


def test_an_interval_away_from_the_bounds_is_the_t_interval():
    values = [60.0, 62.5, 58.0, 61.0, 59.5]
    assert Interval.of(values, PERCENT) == Interval.of(values)
    assert Interval.of([97.0], PERCENT) == Interval(97.0, 97.0, 97.0, 1)  # one seed: no interval


def test_a_value_outside_the_bounds_is_refused():
    with pytest.raises(ValueError, match=r"outside the bounds \[0, 1\]"):
        Interval.of([0.5, 97.0], PROBABILITY)  # a percentage read as a probability


@pytest.mark.parametrize("threshold", [50.0, 90.0, 99.0])
def test_clipping_keeps_every_verdict_against_a_threshold_inside_the_bounds(threshold):
    rng = np.random.default_rng(0)
    for _ in range(200):
        values = np.clip(rng.normal(rng.uniform(40, 100), rng.uniform(0, 15), size=5), 0, 100)
        plain, bounded = Interval.of(values), Interval.of(values, PERCENT)
        for rule in (above, at_least):
            assert rule(bounded, threshold) == rule(plain, threshold)
    straddling = Interval.of([100.0, 100.0, 100.0, 100.0, 90.0], PERCENT)
    assert straddling.low < 99.0 and at_least(straddling, 99.0) == UNDECIDED  # straddles: stays undecided
    assert at_most(straddling, 100.0) == HOLDS and above(straddling, 100.0) == FAILS  # the bound decides


def test_figure_2_reads_its_percentages_inside_the_bounds():
    rows = [
        {
            "panel": p,
            "seed": s,
            "ACMC": 70.0 + s,
            "top_left": 30.0 + s,
            "top_right_cell": 60.0 + s,
            "accuracy": NEAR_FULL[s] if p in "abgh" else 99.0,
        }
        for p in fig2_dtap.PANEL_KEYS
        for s in range(5)
    ]
    summary = pd.DataFrame(rows)
    table = fig2_beside.compared(summary)
    shown = " ".join(table.astype(str).to_numpy().ravel())
    assert "96.7 [87.5, 100.0] %" in shown and "100.1" not in shown


def test_two_single_runs_reproduce_within_the_stated_share_and_not_beyond():
    """Figure 3's comparison: the authors' one run against one official seed, within SINGLE_RUN_TOLERANCE."""
    one = lambda x: Interval.of([x])  # noqa: E731
    edge = 1 + verdicts.SINGLE_RUN_TOLERANCE
    assert verdicts.reproduces(0.5, one(0.5 * edge * 0.999), 1, "", single_runs=True) == verdicts.REPRODUCES
    assert verdicts.reproduces(0.5, one(0.5 * edge * 1.001), 1, "", single_runs=True) == verdicts.DIFFERS
    assert verdicts.reproduces(0.5, one(0.5), 1, "") == verdicts.UNDECIDED  # without the rule: no interval
    assert verdicts.reproduces(0.5, one(0.5), 5, "", single_runs=True) == verdicts.UNDECIDED  # a mean of five
