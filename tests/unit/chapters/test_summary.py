"""The reproducibility summary's results table on a hand-made scorecard: how a headline combines its parts'
verdicts, names each part's numbers, and says when a chapter did not run."""

import re

import pandas as pd

from qkov_lib.chapters import summary
from qkov_lib.chapters.summary import NOT_HERE, not_computed
from qkov_lib.core.results import UNAVAILABLE, write_meta
from qkov_lib.data import authors
from qkov_lib.metrics.verdicts import FAILS, HOLDS, NOT_EVIDENCE, UNDECIDED

RULE = "holds if the 95% interval of X lies above 0; fails if it lies at or below 0; undecided if it straddles 0"


def scorecard(rows: list[tuple[str, str, str, str, str]]) -> pd.DataFrame:
    """A scorecard table (``scorecard.gather``'s columns that the summary reads): page, id, verdict, numbers."""
    return pd.DataFrame(
        [
            {"page": page, "id": cid, "verdict": verdict, "this run": run, "authors": theirs, "rule": RULE}
            for page, cid, verdict, run, theirs in rows
        ],
        columns=["page", "id", "verdict", "this run", "authors", "rule"],
    )


def row(table: pd.DataFrame, page: str) -> pd.Series:
    return table.set_index("page").loc[page]


def test_a_headline_holds_only_if_every_part_holds_and_names_each_parts_numbers():
    claims = scorecard(
        [
            ("hatexplain", "accuracy_comparable", UNDECIDED, "62.3 → 61.9", "baseline 57.5%"),
            ("hatexplain", "ACMC_rises", HOLDS, "14.8 → 41.1", ""),
            ("sva", "accuracy_comparable", HOLDS, "76.4 → 82.7", ""),
            ("sva", "ACMC_rises", HOLDS, "0.5 → 11.9", ""),
            ("squad", "F1_comparable", NOT_EVIDENCE, "18.0 → 17.0", ""),
            ("squad", "ACMC_rises", FAILS, "12.2 → 13.6", ""),
            ("fig2_dtap", "fafo_top_left", FAILS, "99.1", ""),
        ]
    )
    table = summary.results_table(claims)
    assert len(table) == len(summary.HEADLINES)
    hatexplain = row(table, "hatexplain")
    assert hatexplain["verdict"] == UNDECIDED  # one part undecided, none failing
    assert hatexplain["this run"] == "accuracy: 62.3 → 61.9. ACMC: 14.8 → 41.1"
    assert hatexplain["authors"] == "accuracy: baseline 57.5%"
    assert hatexplain["reason"].startswith("accuracy: the 95% interval of X")  # the part that decides, named
    assert "straddles 0" in hatexplain["reason"]
    assert row(table, "sva")["verdict"] == HOLDS and not row(table, "sva")["reason"].startswith("ACMC")  # both hold
    assert row(table, "squad")["verdict"] == NOT_EVIDENCE  # a model that did not learn outweighs a failure
    fafo = table[table["claim"].str.contains("both circuits factorised")].iloc[0]
    assert fafo["verdict"] == FAILS and fafo["this run"] == "99.1" and fafo["authors"] == "not recorded"


def test_a_chapter_that_did_not_run_is_undecided_and_says_so():
    table = summary.results_table(scorecard([]))
    assert (table["verdict"] == UNDECIDED).all() and (table["reason"] == "not in this build's results").all()


def test_every_label_names_one_id():
    for h in summary.HEADLINES:
        assert not h.labels or len(h.labels) == len(h.ids), h


AUTHORS_NOTEBOOKS = {  # the 17 notebooks of the authors' repository (commit 9e89c94)
    "Fig2-Heatmaps/Fig-2-Heatmaps-Row-1.ipynb",
    "Fig2-Heatmaps/Fig-2_CACO_FAFO Experiments.ipynb",
    "FIg-3-Code/Fig-3_Fixed-Self-Attention-Experiments_Factorised.ipynb",
    "FIg-3-Code/Fig-3_Fixed-Self-Attention-Experiments_Collapsed.ipynb",
    "Fig-4 Code/Simulated_Differential_equations.ipynb",
    *(
        f"HateXplain Dataset/{n}.ipynb"
        for n in (
            "HateXplain_Faster_QK_LR_Final_4-Layers",
            "HateXplain_Faster_QK_LR_Final_Config",
            "HateXplain_Same_LR-4-Layers",
            "HateXplain_Same_LR_Final_Config",
            "HateXplain_heatmaps_1_layer",
            "HateXplain_heatmaps_2_layers",
        )
    ),
    "SVA-Dataset/Baseline_SVA_Train+heatmap+Eval.ipynb",
    "SVA-Dataset/Faster_SVA_Train+heatmap+Eval.ipynb",
    *(
        f"Squad-Dataset/{n}.ipynb"
        for n in ("GPT2-Squad-QA_Faster", "GPT2-Squad-QA_Same", "Squad_Faster_QK_heatmaps", "Squad_baseline_heatmaps")
    ),
}
CELL = re.compile(r"\d+( \((In \[\d+\]|unexecuted|no execution count)\))?")  # position in the file, from 1
SEEDS = re.compile(r"(\d+)( \(.+\))?")  # how many seeds the stored number covers, and which


def test_every_stored_number_names_its_notebook_its_cell_and_how_many_seeds_it_covers():
    rows = authors.table()
    assert len(AUTHORS_NOTEBOOKS) == 17 and not rows.empty
    for key, r in rows.iterrows():
        assert r["notebook"] in AUTHORS_NOTEBOOKS, key
        assert CELL.fullmatch(r["cell"]) or r["cell"] in ("none", "not identified"), key
        seeds = SEEDS.fullmatch(r["seeds"])
        assert seeds, key
        recorded = r["provenance"] != authors.NOT_RECORDED
        assert (int(seeds.group(1)) > 0 or "deterministic" in r["seeds"]) == recorded, key  # 0: nothing stored
        if r["cell"] == "none" or "unexecuted" in r["cell"]:
            assert not recorded, key  # no cell ran: no number
    untraced = set(rows.index[rows["cell"] == "not identified"])  # DTAP shares read from images, cell not yet traced
    assert untraced == {"squad.AC.baseline", "squad.AC.faster", "squad.ACMC.baseline", "squad.ACMC.faster"}
    for key in ("fig2.g.accuracy", "fig2.h.accuracy"):  # the model left after the loop over five seeds
        assert rows.loc[key, "seeds"] == "1 (1238)" and authors.stored(key) == "100% (seed 1238, stored)"
    assert authors.stored("fig4.alpha.0.01") == "0.149 (deterministic, stored)"
    assert authors.stored("hatexplain.accuracy.baseline") == "57.5% (mean of 5 seeds, 1234-1238, derived)"


def test_the_claims_not_computed_are_counted_and_their_reason_named(tmp_path):
    write_meta(tmp_path, "sva", {"status": UNAVAILABLE})  # its run stopped: no data where it ran
    rows = pd.DataFrame(
        {"page": ["fig2_dtap", "sva", "squad", "squad"], "reason": ["holds because", NOT_HERE, NOT_HERE, NOT_HERE]}
    )
    line = not_computed(rows, tmp_path)
    assert line.startswith("3 of the 4 central claims were not computed in this build, so they read undecided (")
    assert ": its data was not available where it ran;" in line and line.endswith(": it has not run in this build).")
    assert not_computed(rows.iloc[:1], tmp_path) == ""


def test_how_the_build_ran_shows_the_compute_behind_each_page(tmp_path):
    """A page made from the store in seconds stands on its stored runs' compute: both are shown."""
    from qkov_lib.chapters.summary import methodology
    from qkov_lib.core.results import save

    runs = {"runs": 11, "from_store": 11, "compute_s": 1500.0, "commits": ["a" * 40]}
    save(tmp_path, "hatexplain", {}, {"wall_time_s": 12.0, "device": "cpu", "stored_runs": runs})
    save(tmp_path, "theorem1", {}, {"wall_time_s": 120.0, "device": "cpu"})
    table = methodology(tmp_path, ["hatexplain", "theorem1", "sva"])  # sva: not run, no row
    assert list(table.columns[-3:]) == ["page (min)", "stored runs (from the store)", "their compute (CPU min)"]
    assert table.iloc[0, -3:].tolist() == [0.2, "11 (11)", 25.0]
    assert table.iloc[1, -3:].tolist()[:2] == [2.0, ""] and len(table) == 2
