"""Figure 2's claims (Section 4) on hand-made per-seed summaries of three seeds: each claim holds, fails or is
undecided as its 95% interval over seeds says, on the panels it names, and reports the weakest part's numbers."""

import pytest
from fake_chapters import HALF_3, fig2_rows

from qkov_lib.chapters import fig2_dtap


def verdicts(rows) -> dict[str, str]:
    return fig2_dtap.claims(rows).set_index("id")["verdict"].to_dict()


def test_every_claim_holds_on_a_summary_built_to_support_it_with_the_weakest_parts_numbers():
    table = fig2_dtap.claims(fig2_rows()).set_index("id")
    assert list(table.index) == ["collapsed_ov_top_right", "fafo_top_left", "faster_qk_top_right", "prediction_kept"]
    assert (table["verdict"] == "holds").all()
    collapsed = table.loc["collapsed_ov_top_right"]  # (d) at 70 +- 1 is weaker than (b) at 80 +- 1
    assert collapsed[["estimate", "low", "high"]].tolist() == pytest.approx([70, 70 - HALF_3, 70 + HALF_3])
    assert "(b) 80.0 [" in collapsed["this run"] and "(d) 70.0 [" in collapsed["this run"]
    assert table.loc["fafo_top_left", "estimate"] == pytest.approx(40)
    faster = table.loc["faster_qk_top_right"]  # the smallest paired gain, (h) against (d): 5, 6, 4 points
    assert faster[["estimate", "low"]].tolist() == pytest.approx([5, 5 - HALF_3])
    assert "(h) vs (d) +5.0 [" in faster["this run"]
    kept = table.loc["prediction_kept"]  # the same accuracy in every panel: a paired change of exactly 0
    assert kept[["estimate", "low", "high"]].tolist() == pytest.approx([0, 0, 0])


def test_each_claim_fails_when_its_interval_lies_on_the_wrong_side():
    assert verdicts(fig2_rows(acmc={"d": [20, 21, 22]}))["collapsed_ov_top_right"] == "fails"  # at most 23.5 < 50
    assert verdicts(fig2_rows(top_left={"a": [5, 6, 7]}))["fafo_top_left"] == "fails"
    slower = verdicts(fig2_rows(acmc={"h": [64, 66, 65]}))  # (h) 5 points below (d): one part of four fails
    assert slower["faster_qk_top_right"] == "fails" and slower["collapsed_ov_top_right"] == "holds"
    worse = fig2_dtap.claims(fig2_rows(accuracy={"g": [80, 81, 82]})).set_index("id").loc["prediction_kept"]
    assert worse["verdict"] == "fails" and worse["estimate"] == pytest.approx(-10)


def test_an_interval_that_straddles_the_threshold_is_undecided():
    assert verdicts(fig2_rows(acmc={"b": [30, 50, 70]}))["collapsed_ov_top_right"] == "undecided"  # 50 +- 49.7
    assert verdicts(fig2_rows(top_left={"a": [5, 25, 45]}))["fafo_top_left"] == "undecided"
    assert verdicts(fig2_rows(acmc={"h": [59, 70, 81]}))["faster_qk_top_right"] == "undecided"  # gains -10, 0, 10
    straddles = verdicts(fig2_rows(accuracy={"e": [85, 91, 97]}))  # a change of -5, 0, +5 points against -1
    assert straddles["prediction_kept"] == "undecided"


def test_one_seed_gives_no_interval_and_decides_nothing():
    one = fig2_rows().query("seed == 0")
    assert set(verdicts(one).values()) == {"undecided"}
