"""Table 1's claims (Section 7; ``runs.real_data.claims``, the HateXplain, SVA and SQuAD chapters') on hand-made
per-seed rows of three seeds: each claim reads the paired change from the baseline to faster QK through its 95%
interval, and a condition that does not beat its floor makes every claim 'not evidence'."""

import pytest
from fake_chapters import HALF_3, table1_rows

from qkov_lib.runs.real_verdicts import Majority, claims

IDS = ["accuracy_comparable", "AC_rises", "ACMC_rises", "sufficiency_falls", "comprehensiveness_rises"]


def verdicts(rows, **kw) -> dict[str, str]:
    return claims(rows, **kw).set_index("id")["verdict"].to_dict()


def test_every_claim_holds_on_rows_built_to_support_it_with_the_paired_changes():
    table = claims(table1_rows()).set_index("id")
    assert list(table.index) == IDS and (table["verdict"] == "holds").all()
    accuracy = table.loc["accuracy_comparable"]  # +1, +2, +3 points: 2 [-0.5, 4.5], at least -1
    assert accuracy[["estimate", "low", "high"]].tolist() == pytest.approx([2, 2 - HALF_3, 2 + HALF_3])
    assert accuracy["this run"].startswith("71.0 → 73.0, change +2.0 [")
    assert table.loc["AC_rises", "estimate"] == pytest.approx(11)
    assert table.loc["sufficiency_falls", "estimate"] == pytest.approx(-0.11)
    assert table.loc["sufficiency_falls", "this run"].startswith("0.510 → 0.400")


def test_each_claim_fails_on_the_wrong_side_of_zero_or_of_the_accuracy_slack():
    assert verdicts(table1_rows(accuracy=[-5.0, -6.0, -7.0]))["accuracy_comparable"] == "fails"
    assert verdicts(table1_rows(AC=[-1.0, 0.0, 0.0]))["AC_rises"] == "undecided"  # -1/3 +- 1.4 straddles 0
    assert verdicts(table1_rows(ACMC=[-4.0, -5.0, -6.0]))["ACMC_rises"] == "fails"
    risen = verdicts(table1_rows(sufficiency=[0.1, 0.11, 0.12]))  # sufficiency up: the claimed fall fails
    assert risen["sufficiency_falls"] == "fails" and risen["comprehensiveness_rises"] == "holds"
    assert verdicts(table1_rows(comprehensiveness=[0.0, 0.0, 0.0]))["comprehensiveness_rises"] == "fails"


def test_an_accuracy_change_that_straddles_the_slack_is_undecided():
    assert verdicts(table1_rows(accuracy=[0.0, 1.0, -1.0]))["accuracy_comparable"] == "undecided"  # 0 +- 2.5
    assert set(verdicts(table1_rows().query("seed == 0")).values()) == {"undecided"}  # one seed: no interval


def test_a_classifier_floor_is_the_majority_class_as_counts():
    learned = verdicts(table1_rows(), floor=Majority(60, 100))  # 70-75 of 100 right against 60
    assert set(learned.values()) == {"holds"}
    table = claims(table1_rows(), floor=Majority(72, 100))  # the baseline's 70-72 do not beat 72
    assert (table["verdict"] == "not evidence").all()
    assert table["rule"].str.startswith("not evidence: the baseline models do not beat").all()


def test_a_score_floor_reads_the_interval_of_the_task_metric_squads_f1():
    rows = table1_rows("F1")
    table = claims(rows, performance="F1", floor=50.0, floor_name="the fixed-span baseline").set_index("id")
    assert table.index[0] == "F1_comparable" and (table["verdict"] == "holds").all()
    above = claims(rows, performance="F1", floor=71.0, floor_name="the fixed-span baseline")  # 71 +- 2.5
    assert (above["verdict"] == "not evidence").all()
    assert above["rule"].str.contains("the baseline model's F1 .* does not beat the fixed-span baseline").all()


def test_the_authors_stored_numbers_are_named_beside_the_claims_of_the_chapter_that_stored_them():
    table = claims(table1_rows(), stored="hatexplain").set_index("id")
    assert table.loc["accuracy_comparable", "authors"].startswith("baseline ")
    assert claims(table1_rows()).set_index("id").loc["accuracy_comparable", "authors"] == ""
