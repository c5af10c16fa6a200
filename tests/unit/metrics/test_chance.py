"""Chance is not a difference (``qkov_lib.metrics.chance``): each rule's p-value falls below 0.05 exactly where the
rule says 'differs', and the mark counts a 'differs' only where Holm's correction over the numbers compared keeps
it, so that a perfect reproduction can earn [Re]."""

import pytest

from qkov_lib.metrics.chance import beyond_chance, interval_p, welch_p
from qkov_lib.metrics.official import INFORMATIVE, code_replication, welch_verdict
from qkov_lib.metrics.verdicts import DIFFERS, REPRODUCES, Interval, reproduces


@pytest.mark.parametrize("theirs", [86.9, 87.0, 86.0, 88.5, 90.0])
def test_the_interval_rules_p_value_is_below_five_percent_exactly_where_it_differs(theirs):
    ours = Interval.of([87.2, 88.3, 87.4, 88.0, 87.6])
    p = interval_p(theirs, ours.mean, ours.low, ours.high, ours.n)
    assert (p < 0.05) == (reproduces(theirs, ours, 5) == DIFFERS)


@pytest.mark.parametrize("shift", [0.0, 1.0, 2.5, 4.0, 6.0])
def test_the_welch_rules_p_value_is_below_five_percent_exactly_where_it_differs(shift):
    theirs = [56.6, 57.54, 57.95, 57.8, 57.69]
    ours = [x + shift for x in [57.1, 57.9, 56.8, 58.2, 57.5]]
    assert (welch_p(ours, theirs, 2.0) < 0.05) == (welch_verdict(ours, theirs, "%") == DIFFERS)


def test_holm_keeps_a_difference_only_below_its_step_of_the_family():
    assert beyond_chance([0.03], 1) == [True]  # one comparison: 0.03 < 0.05
    assert beyond_chance([0.03], 29) == [False]  # one of 29: 0.03 > 0.05 / 29
    assert beyond_chance([0.0001, 0.03], 29) == [True, False]  # the step-down stops at the first it keeps not


def test_the_mark_counts_no_difference_that_chance_explains():
    verdicts = [REPRODUCES] * 28 + [DIFFERS]
    words = [INFORMATIVE] * 29
    assert code_replication(verdicts, words, [float("nan")] * 28 + [0.034]) == (
        "[Re]",
        "28 of 29 informative stored numbers reproduce, 0 differ (1 more within chance), 0 undecided",
    )
    assert code_replication(verdicts, words, [float("nan")] * 28 + [0.0001])[0] == "[¬Re]"
    assert code_replication(verdicts, words)[0] == "[¬Re]"  # no p-value: a deterministic difference counts
