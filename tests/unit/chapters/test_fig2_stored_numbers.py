"""Figure 2's stored numbers beyond single cells: the authors' top-row sums (attention below 0.4, at least 0.6) read
from each seed's heatmap cells, and the informative rule's other-condition test across Figure 2's panels (a faster
panel against the panel it speeds up)."""

import pandas as pd

from qkov_lib.chapters import fig2_dtap
from qkov_lib.chapters.beside import fig2 as fig2_beside
from qkov_lib.data import authors
from qkov_lib.metrics.official import INFORMATIVE_COLUMN, Guard, OfficialUnit
from qkov_lib.metrics.verdicts import VERDICT_COLUMN

BINS = ("0-0.2", "0.2-0.4", "0.4-0.6", "0.6-0.8", "0.8-1")


def cells(top_rows: dict[str, list[list[float]]]) -> pd.DataFrame:
    """Heatmap cells with the given top rows (panel -> one row of five shares per seed), every other row empty."""
    rows = []
    for panel, seeds in top_rows.items():
        for seed, shares in enumerate(seeds):
            for prob in BINS:
                for attention, share in zip(BINS, shares):
                    percent = share if prob == fig2_dtap.TOP_ROW else 0.0
                    rows.append(dict(panel=panel, seed=seed, prob_bin=prob, attention_bin=attention, percent=percent))
    return pd.DataFrame(rows)


def test_the_top_row_sums_add_each_seeds_cells_in_the_range():
    heat = cells({"g": [[0, 0, 2, 77, 21], [0, 0, 3, 76, 21]], "a": [[1, 63, 36, 0, 0], [0, 65, 35, 0, 0]]})
    keys = ["fig2.g.top_row_strong_attention", "fig2.a.top_row_weak_attention", "fig2.g.top_row.0.6-0.8"]
    found = fig2_beside.top_row_sums(heat, keys)
    assert found["fig2.g.top_row_strong_attention"].mean == 97.5  # (98 + 97) / 2
    assert found["fig2.a.top_row_weak_attention"].mean == 64.5  # (64 + 65) / 2
    assert "fig2.g.top_row.0.6-0.8" not in found  # one cell: fig2_dtap.top_row's
    coarse = heat.assign(attention_bin=heat["attention_bin"].replace({"0.4-0.6": "0.4-0.7", "0.6-0.8": "0.7-0.8"}))
    assert "fig2.g.top_row_strong_attention" not in fig2_beside.top_row_sums(coarse, keys)  # 0.6 is no edge: left out


def test_a_faster_panels_number_held_by_its_base_panels_interval_is_not_informative():
    assert fig2_beside.counterparts("fig2.g.top_right_cell") == ["fig2.d.top_right_cell"]
    assert fig2_beside.counterparts("fig2.a.top_row_weak_attention") == [
        "fig2.e.top_row_weak_attention",
        "fig2.f.top_row_weak_attention",
    ]
    summary = pd.DataFrame(
        [
            {"panel": k, "seed": s, "top_right_cell": 20.0 + s % 2, "accuracy": 100.0}  # (g)'s 20.8 in every panel
            for k in "abcdefgh"
            for s in range(5)
        ]
    )
    unit = OfficialUnit({"main": summary}, Guard((), ""))
    table = fig2_beside.compared(summary, unit).reset_index()
    stored = authors.table().loc["fig2.g.top_right_cell"]
    (row,) = (
        r for _, r in table.iterrows() if (r["condition"], r["quantity"]) == tuple(stored[["condition", "quantity"]])
    )
    assert row[INFORMATIVE_COLUMN] == "no: the other condition's official interval holds it too"
    assert row[VERDICT_COLUMN] == "reproduces"  # compared all the same, not counted in the tally
