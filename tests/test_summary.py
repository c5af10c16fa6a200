"""The reproducibility summary's results table on a hand-made scorecard: how a headline combines its parts'
verdicts, names each part's numbers, and says when a chapter did not run."""
import pandas as pd

from qkov_lib.chapters import summary
from qkov_lib.verdicts import FAILS, HOLDS, NOT_EVIDENCE, UNDECIDED

RULE = "holds if the 95% interval of X lies above 0; fails if it lies at or below 0; undecided if it straddles 0"


def scorecard(rows: list[tuple[str, str, str, str, str]]) -> pd.DataFrame:
    """A scorecard table (``scorecard.gather``'s columns that the summary reads): page, id, verdict, numbers."""
    return pd.DataFrame([{"page": page, "id": cid, "verdict": verdict, "this run": run, "authors": theirs,
                          "rule": RULE} for page, cid, verdict, run, theirs in rows],
                        columns=["page", "id", "verdict", "this run", "authors", "rule"])


def row(table: pd.DataFrame, page: str) -> pd.Series:
    return table.set_index("page").loc[page]


def test_a_headline_holds_only_if_every_part_holds_and_names_each_parts_numbers():
    claims = scorecard([("hatexplain", "accuracy_comparable", UNDECIDED, "62.3 → 61.9", "baseline 57.5%"),
                        ("hatexplain", "ACMC_rises", HOLDS, "14.8 → 41.1", ""),
                        ("sva", "accuracy_comparable", HOLDS, "76.4 → 82.7", ""),
                        ("sva", "ACMC_rises", HOLDS, "0.5 → 11.9", ""),
                        ("squad", "F1_comparable", NOT_EVIDENCE, "18.0 → 17.0", ""),
                        ("squad", "ACMC_rises", FAILS, "12.2 → 13.6", ""),
                        ("fig2_dtap", "fafo_top_left", FAILS, "99.1", "")])
    table = summary.results_table(claims)
    assert len(table) == len(summary.HEADLINES)
    hatexplain = row(table, "hatexplain")
    assert hatexplain["verdict"] == UNDECIDED  # one part undecided, none failing
    assert hatexplain["this run"] == "accuracy: 62.3 → 61.9. ACMC: 14.8 → 41.1"
    assert hatexplain["authors"] == "accuracy: baseline 57.5%"
    assert hatexplain["reason"].startswith("the 95% interval of X") and "straddles 0" in hatexplain["reason"]
    assert row(table, "sva")["verdict"] == HOLDS
    assert row(table, "squad")["verdict"] == NOT_EVIDENCE  # a model that did not learn outweighs a failure
    fafo = table[table["claim"].str.contains("both circuits factorised")].iloc[0]
    assert fafo["verdict"] == FAILS and fafo["this run"] == "99.1" and fafo["authors"] == "not recorded"


def test_a_chapter_that_did_not_run_is_undecided_and_says_so():
    table = summary.results_table(scorecard([]))
    assert (table["verdict"] == UNDECIDED).all() and (table["reason"] == "not in this build's results").all()


def test_every_label_names_one_id():
    for h in summary.HEADLINES:
        assert not h.labels or len(h.labels) == len(h.ids), h
