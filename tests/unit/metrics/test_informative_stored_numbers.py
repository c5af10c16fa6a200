"""Every stored number compared, the informative ones counted, both sides' spread where the authors printed each
seed's number, and every authors' row naming its quantity as their code computes it."""

import math

import numpy as np
import pytest
from scipy import stats

from qkov_lib.data import authors
from qkov_lib.metrics import official, verdicts
from qkov_lib.metrics.official import INFORMATIVE, code_replication, informative, tally, welch, welch_verdict
from qkov_lib.metrics.verdicts import DIFFERS, REPRODUCES, UNDECIDED, Interval


def test_a_number_any_model_reaches_is_not_informative_and_one_that_discriminates_is():
    assert informative("fig2.a.accuracy").startswith("no: a share within 1 point of 100%")  # any trained model
    assert informative("fig2.a.top_right_cell").startswith("no: a share within 1 point of 0%")  # any model below 0.8
    assert informative("sva.AC.baseline").startswith("no:")  # 0.0% at attention >= 0.5
    assert informative("fig2.c.top_right_cell") == "no: nothing stored"
    for key in ("fig2.b.top_right_cell", "fig2.g.top_right_cell", "fig2.h.top_right_cell", "fig3.factorised.0.2"):
        assert informative(key) == INFORMATIVE, key
    both = {"hatexplain.accuracy.faster": Interval(56.0, 54.0, 58.0, 5)}  # holds the baseline's 57.5 too
    assert (
        informative("hatexplain.accuracy.baseline", both) == "no: the other condition's official interval holds it too"
    )
    apart = {"hatexplain.accuracy.faster": Interval(50.0, 49.0, 51.0, 5)}
    assert informative("hatexplain.accuracy.baseline", apart) == INFORMATIVE


def test_the_tally_counts_every_informative_number_as_the_mark_does_and_those_compared():
    words = [REPRODUCES, DIFFERS, REPRODUCES, UNDECIDED, REPRODUCES]
    useful = [INFORMATIVE, INFORMATIVE, "no: a share within 1 point of 100%", INFORMATIVE, "no: nothing stored"]
    assert tally(words, useful) == "reproduces 1 of 3 informative (1 differs, 1 undecided; 4 compared)"
    assert code_replication(words, useful)[1] == "1 of 3 informative stored numbers reproduce, 1 differs, 1 undecided"
    assert tally([UNDECIDED], [INFORMATIVE]) == "reproduces 0 of 1 informative (0 differ, 1 undecided; 0 compared)"
    assert official.UNDECIDED_WORD == UNDECIDED and official.REPRODUCES == verdicts.REPRODUCES


def test_the_welch_interval_is_scipys_and_decides_against_the_tolerance():
    ours, theirs = [57.1, 57.9, 56.8, 58.2, 57.5], [56.6, 57.54, 57.95, 57.8, 57.69]
    diff, low, high = welch(ours, theirs)
    test = stats.ttest_ind(ours, theirs, equal_var=False)
    ci = test.confidence_interval(0.95)
    assert math.isclose(low, ci.low) and math.isclose(high, ci.high) and math.isclose(diff, np.mean(ours) - 57.516)
    assert welch_verdict(ours, theirs, "%") == REPRODUCES  # within 2 points either way
    assert welch_verdict([x + 5 for x in ours], theirs, "%") == DIFFERS  # wholly beyond 2 points
    assert welch_verdict([x + 2 for x in ours], theirs, "%") == UNDECIDED  # reaches across the tolerance
    assert welch([1.0, 1.0], [1.0, 1.0]) == (0.0, 0.0, 0.0)  # no spread on either side


@pytest.mark.parametrize("key", sorted(set(authors._per_seed()["key"])))
def test_the_authors_per_seed_numbers_give_their_stored_mean(key):
    values = authors.per_seed(key)
    stored, seeds, _ = authors.number(key)
    assert values is not None and len(values) == seeds == 5
    digits = len(authors.table().loc[key, "value"].split(".")[-1])  # the stored number's printed decimals
    assert round(float(np.mean(values)), digits) == pytest.approx(stored, abs=10**-digits), key


def test_a_stored_number_with_per_seed_values_is_read_with_both_spreads():
    keys = ["hatexplain.accuracy.baseline"]
    table = authors.three_way(dict.fromkeys(keys, ""))
    ours = [57.1, 57.9, 56.8, 58.2, 57.5]
    narrow = verdicts.beside_official(table, keys, {keys[0]: Interval.of(ours)}, lambda i: i.text(), samples={})
    both = verdicts.beside_official(
        table, keys, {keys[0]: Interval.of(ours)}, lambda i: i.text(), samples={keys[0]: ours}
    )
    assert both[verdicts.VERDICT_COLUMN].iloc[0] == welch_verdict(ours, authors.per_seed(keys[0]), "%")
    assert narrow[verdicts.VERDICT_COLUMN].iloc[0] == verdicts.reproduces(57.5, Interval.of(ours), 5)  # as before
    assert both[official.INFORMATIVE_COLUMN].iloc[0] == INFORMATIVE


# What the authors' code computes, per chapter and measure: the words a stored row's quantity must hold
# (OFFICIAL_CODE.md: attention rollout read at the last position; comprehensiveness removes the top k = 5% of the
# padded length, sufficiency keeps them alone; SVA's relevant tokens are the subject and the verb, its AC head 0's
# attention at position -1; SQuAD's AC at attention >= 0.1).
AS_COMPUTED = {
    ("hatexplain", "MRTA"): ("rollout", "rationale", "last position"),
    ("sva", "MRTA"): ("rollout", "subject and the verb", "last position"),
    ("squad", "MRTA"): ("rollout", "answer", "last position"),
    ("sva", "AC"): ("head 0", "last position", ">= 0.5", "subject and the verb"),
    ("sva", "above_10"): ("head 0", "last position", ">= 0.1", "subject and the verb"),
    ("hatexplain", "above_33"): ("> 0.33", "rationale"),  # their bins: <= .33, > .33, > .66
    ("hatexplain", "above_66"): ("> 0.66", "rationale"),
    ("squad", "AC"): (">= 0.1", "answer"),
}
ERASED = {
    "comprehensiveness": ("k = 5% of the padded length", "removed"),
    "sufficiency": ("k = 5% of the padded length", "kept alone"),
}


def test_every_authors_row_names_its_quantity_as_their_code_computes_it():
    rows = authors.table()
    for key, r in rows[rows["chapter"].isin(["hatexplain", "sva", "squad"])].iterrows():
        metric = key.split(".")[1]
        words = ERASED.get(metric) or AS_COMPUTED.get((r["chapter"], metric))
        if words is None:  # accuracy, F1, EM, ACMC: named as the task's score
            continue
        missing = [w for w in words if w not in r["quantity"]]
        assert not missing, f"{key}: {r['quantity']!r} lacks {missing}"
    assert "on the subject" not in " ".join(rows.loc[rows["chapter"] == "sva", "quantity"]).replace(
        "on the subject and the verb", ""
    )


def test_the_mark_under_the_authors_code_counts_informative_numbers_only():
    yes, no = INFORMATIVE, "no: a share within 1 point of 100%, reached by any model"
    # three informative: two reproduce, one undecided -> more than half reproduce and none differs
    assert code_replication(["reproduces", "reproduces", "undecided", "differs"], [yes, yes, yes, no]) == (
        "[Re]",
        "2 of 3 informative stored numbers reproduce, 0 differ, 1 undecided",
    )
    assert code_replication(["reproduces", "differs", "reproduces"], [yes, yes, yes])[0] == "[¬Re]"  # one differs
    assert code_replication(["reproduces", "undecided"], [yes, yes])[0] == "[¬Re]"  # half is not more than half
    assert code_replication(["undecided", "reproduces"], [yes, no])[0] is None  # nothing informative compared
    assert code_replication([], [])[0] is None


def test_a_number_official_differs_from_is_explained_or_said_to_be_unexplained():
    told = official.differences()
    assert told and all(cause in official.CAUSES for cause, _ in told.values())
    key = next(iter(told))
    items = official.why_differs([key, "fig2.b.top_right_cell"], [DIFFERS, DIFFERS], ["one", "two"])
    assert items[0].startswith("one (cause: ") and items[0].endswith(told[key][1])
    assert items[1] == "two: not yet explained"
    assert official.why_differs([key], [REPRODUCES], ["one"]) == []  # explained only where it differs
    far = Interval(-50.0, -51.0, -49.0, 5)  # no stored number lies there: official differs
    table = verdicts.beside_official(authors.three_way({key: "x"}), [key], {key: far}, lambda i: i.text())
    assert table.attrs["keys"] == [key] and list(table[verdicts.VERDICT_COLUMN]) == [DIFFERS]
    line = verdicts.tally_line(table, "The page's rule.")
    assert line.split("\n\n")[0].endswith("The page's rule.")  # the page's own words close the tally's paragraph
    assert line.split("\n\n")[-1].startswith("- ") and line.endswith(f"): {told[key][1]}.")  # one item each


def test_the_tolerance_scales_with_a_small_number():
    # the 1-layer baseline's attention mass on words against the authors' on WordPieces: 0.7 points on 2.67% is
    # over a quarter of the number, not the same number
    ours, theirs = [1.951, 1.954, 1.957, 1.953, 1.955], [2.67] * 5
    assert official.tolerance(2.67, "%") == pytest.approx(0.267)
    assert official.tolerance(57.5, "%") == 2.0 and official.tolerance(0.17, "") == pytest.approx(0.017)
    assert welch_verdict(ours, theirs, "%") == DIFFERS
    assert welch_verdict([2.6, 2.7, 2.65, 2.68, 2.62], theirs, "%") == REPRODUCES
    assert verdicts.reproduces(2.67, verdicts.Interval(1.954, 1.951, 1.957, 5), 1) == DIFFERS
