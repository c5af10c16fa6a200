"""Table 5's claims (Appendix D.5): Table 1's claims checked at each depth on hand-made per-seed rows, each claim
named with its depth, and a depth whose models do not beat the majority class 'not evidence' on its own."""

from fake_chapters import table1_rows

from qkov_lib.chapters import hatexplain_layers
from qkov_lib.runs.real_verdicts import Majority


def test_each_depth_is_checked_on_its_own_rows_and_named_in_its_claims():
    rows = {1: table1_rows(), 2: table1_rows(ACMC=[-4.0, -5.0, -6.0]), 4: table1_rows(ACMC=[-1.0, 0.0, 1.0])}
    table = hatexplain_layers.claims(rows).set_index("id")
    assert len(table) == 3 * 5
    assert table.loc["1_layers_ACMC_rises", "verdict"] == "holds"
    assert table.loc["2_layers_ACMC_rises", "verdict"] == "fails"  # -5 +- 2.5 points
    assert table.loc["4_layers_ACMC_rises", "verdict"] == "undecided"  # 0 +- 2.5
    assert table.loc["2_layers_accuracy_comparable", "verdict"] == "holds"
    assert table.loc["2_layers_ACMC_rises", "claim"].startswith("2 layers: With faster query-key learning")
    assert table.loc["2_layers_ACMC_rises", "estimate"] == -5.0


def test_a_depth_that_does_not_beat_the_majority_class_is_not_evidence_alone():
    unlearned = table1_rows()
    unlearned.loc[unlearned["condition"] == "baseline", "correct"] = 60  # the majority class's own count
    table = hatexplain_layers.claims({2: table1_rows(), 4: unlearned}, floor=Majority(60, 100))
    by_depth = table.groupby(table["id"].str.split("_").str[0])["verdict"].agg(set)
    assert by_depth["2"] == {"holds"} and by_depth["4"] == {"not evidence"}
