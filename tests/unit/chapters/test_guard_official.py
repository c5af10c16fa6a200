"""One guard for every comparison with the authors' numbers: an official run that departs from the official profile
(any override, not only SQuAD's sizes) or whose models did not learn gets no reproduction verdict, and a chapter's
page and the summary, reading the same unit, give the same verdict for every stored number."""

import re
import pandas as pd
import pytest

from qkov_lib.chapters import fig2_dtap, fig3_incentive, hatexplain, squad, sva
from qkov_lib.chapters.beside import fig2 as fig2_beside
from qkov_lib.chapters.summary import beside
from qkov_lib.core.results import load, save
from qkov_lib.data import authors
from qkov_lib.metrics.official import NOT_CHECKED, Guard, authors_parameters, departures
from qkov_lib.runs.official_read import official_unit
from qkov_lib.metrics.verdicts import OFFICIAL_COLUMN, REPRODUCES, UNDECIDED, VERDICT_COLUMN
from qkov_lib.runs.real_verdicts import compared, official_note, official_run, reduction

SHIFTS = (-0.4, -0.1, 0.0, 0.2, 0.3)


def per_seed(page: str) -> pd.DataFrame:
    """Five seeds per condition around the authors' stored numbers (each would reproduce), 0 where none is stored."""
    table, rows = authors.table(), []
    for seed, shift in enumerate(SHIFTS):
        for condition, key in (("baseline", "baseline"), ("faster QK", "faster")):
            row = {"condition": condition, "seed": seed}
            for metric in ("accuracy", "F1", "EM", "MRTA", "AC", "ACMC", "sufficiency", "comprehensiveness"):
                found = f"{page}.{metric}.{key}"
                value = table.loc[found, "value"] if found in table.index else ""
                row[metric] = (float(value) if value != "" else 50.0) * (1 + shift / 100)
            rows.append(row)
    return pd.DataFrame(rows)


CLAIMS = pd.DataFrame({"id": ["accuracy_comparable"], "claim": ["c"], "verdict": ["holds"]})


def test_any_override_of_the_official_profile_is_named_and_an_unrecorded_setup_is_not_theirs():
    assert reduction(sva, {"epochs": 1, "max_train": 200}) is not None  # the example: once None
    theirs = authors_parameters(hatexplain)
    assert departures(hatexplain, theirs) == ()
    assert departures(hatexplain, dict(theirs, epochs=1)) == (f"epochs 1 (theirs: {theirs['epochs']})",)
    assert departures(hatexplain, dict(theirs, seeds=[1, 2])) != ()  # seeds are a setting too
    assert departures(hatexplain, None) == (NOT_CHECKED,)  # unknown parameters never pass as theirs
    older = {k: v for k, v in theirs.items() if k != "measure"}  # a unit recorded before `measure` existed
    assert departures(hatexplain, older) == (f"measure not recorded (theirs: {theirs['measure']!r})",)
    assert departures(squad, authors_parameters(squad)) == ()  # SQuAD at the authors' sizes
    assert "epochs" in reduction(squad, dict(authors_parameters(squad), epochs=4))


@pytest.fixture
def root(tmp_path):
    """Official units: HateXplain overridden (one epoch), SVA at the authors' settings, SQuAD scaled down as its
    official profile runs; each chapter also under default."""
    units = {
        "hatexplain": dict(authors_parameters(hatexplain), epochs=1),
        "sva": authors_parameters(sva),
        "squad": dict(authors_parameters(squad), max_train=640, epochs=4),
    }
    for page, params in units.items():
        tables = {"per_seed": per_seed(page), "claims": CLAIMS}
        save(tmp_path / "official", page, tables, {"parameters": params})
        save(tmp_path / "default", page, tables, {"parameters": {}})
    return tmp_path


@pytest.mark.parametrize("page, module", [("hatexplain", hatexplain), ("sva", sva), ("squad", squad)])
def test_the_page_and_the_summary_give_the_same_verdict_for_the_same_unit(root, page, module):
    from_summary = beside.beside_authors(root, "default", page)[VERDICT_COLUMN]
    read = official_run(module, "default", root=root)  # a page under default reads the official unit
    from_page = compared(per_seed(page), page, read)
    if "quantity" in from_page.columns:
        from_page = from_page.set_index("quantity", append=True).swaplevel()
    assert list(from_page[VERDICT_COLUMN]) == list(from_summary)
    params = load(root / "official", page)[1]["parameters"]
    here = official_run(module, "official", per_seed(page), CLAIMS, parameters=params)  # the page under official
    assert here.reduced == read.reduced and list(compared(per_seed(page), page, here)[VERDICT_COLUMN]) == list(
        compared(per_seed(page), page, read)[VERDICT_COLUMN]
    )
    assert not official_run(module, "official", per_seed(page), CLAIMS).comparable  # no parameters: not theirs
    if page == "sva":  # at the authors' settings: verdicts drawn
        assert REPRODUCES in set(from_summary) and official_note(module, read) == ""
    else:  # overridden or scaled: none, and the page says why
        assert set(from_summary) == {UNDECIDED}
        note = official_note(module, read)
        assert "not the authors' experiment" in note and "*undecided*" in note
        shown = beside.beside_authors(root, "default", page)[OFFICIAL_COLUMN]
        assert shown.str.contains("not the authors' experiment: ").all()
        tally = beside.official_html(root, "default", [page])
        told = r"reproduces 0 of (\d+) informative \(0 differ, \1 undecided; 0 compared\)"
        assert re.search(told, tally.split("</summary>")[0])


def fig2_main(accuracy_a: float) -> pd.DataFrame:
    """Per-panel rows that give the authors' top-right cells back, panel (a) at ``accuracy_a``."""
    stored = authors.table()
    cell = {k: stored.loc[f"fig2.{k}.top_right_cell", "value"] for k in "abcdefgh"}
    return pd.DataFrame(
        [
            {
                "panel": k,
                "seed": seed,
                "top_right_cell": (float(cell[k]) if cell[k] != "" else 50.0) + abs(shift),
                "accuracy": accuracy_a if k == "a" else 100.0,
            }
            for k in "abcdefgh"
            for seed, shift in enumerate(SHIFTS)
        ]
    )


def test_figure_2_a_panel_at_chance_accuracy_is_not_evidence_and_an_override_is_not_theirs(tmp_path):
    theirs = authors_parameters(fig2_dtap)
    learned = official_unit(fig2_dtap, "official", {"main": fig2_main(100.0)}, theirs)
    assert fig2_dtap.guard(learned).comparable
    assert REPRODUCES in set(fig2_beside.compared(fig2_main(100.0), learned)[VERDICT_COLUMN])
    chance = official_unit(fig2_dtap, "official", {"main": fig2_main(25.0)}, theirs)
    assert "(a) 25.0%" in fig2_dtap.guard(chance).not_learned
    assert set(fig2_beside.compared(fig2_main(100.0), chance)[VERDICT_COLUMN]) == {UNDECIDED}
    assert (
        "did not learn" not in fig2_dtap.guard(chance).note() and "panels at chance" in fig2_dtap.guard(chance).note()
    )
    save(
        tmp_path / "official",
        "fig2_dtap",
        {"main": fig2_main(100.0), "claims": CLAIMS},
        {"parameters": dict(theirs, lr=1.0)},
    )
    table = beside.beside_authors(tmp_path, "official", "fig2_dtap")
    assert set(table[VERDICT_COLUMN]) == {UNDECIDED} and table[OFFICIAL_COLUMN].str.contains("lr 1.0").all()


def fig3_curves(last: float) -> pd.DataFrame:
    """Two epochs of both stored models at the authors' alphas: the loss 1.0, then ``last`` of it."""
    return pd.DataFrame(
        [
            {"model": m, "alpha": a, "seed": 0, "epoch": e, "train_loss": 1.0 if e == 1 else last}
            for m in ("factorised", "collapsed + bias")
            for a in (0.2, 0.4, 0.6, 0.8, 1.0)
            for e in (1, 2)
        ]
    )


def test_figure_3_a_loss_that_did_not_move_is_not_evidence():
    theirs = authors_parameters(fig3_incentive)
    moved = official_unit(fig3_incentive, "official", {"main": fig3_curves(0.01)}, theirs)
    still = official_unit(fig3_incentive, "official", {"main": fig3_curves(0.95)}, theirs)
    assert fig3_incentive.guard(moved) == Guard() and not fig3_incentive.guard(still).comparable
    assert "factorised at alpha 0.2" in fig3_incentive.guard(still).not_learned
    assert set(fig3_incentive.compared(fig3_curves(0.95), still)[VERDICT_COLUMN]) == {UNDECIDED}
